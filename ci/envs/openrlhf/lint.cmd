# The OpenRLHF adapter, and the agent executor that subclasses OpenRLHF's, are mypy --strict clean
# against the OpenRLHF version this environment pins (elsewhere the framework is absent and typed Any).
mypy adapters/corrgrpo_adapters/openrlhf tasks/corrgrpo_tasks/agent_security/openrlhf_agent.py
