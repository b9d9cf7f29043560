# The verl adapter, and the agent loop that subclasses verl's, are mypy --strict clean against the
# verl version this environment pins (elsewhere the framework is absent and typed Any).
mypy adapters/corrgrpo_adapters/verl tasks/corrgrpo_tasks/agent_security/verl_agent_loop.py
