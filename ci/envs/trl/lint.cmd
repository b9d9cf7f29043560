# The TRL adapter is mypy --strict clean against the TRL version this environment pins (elsewhere
# the framework is absent and typed Any).
mypy adapters/corrgrpo_adapters/trl
