"""Multi-reward advantage estimators for GRPO-style reinforcement learning."""
