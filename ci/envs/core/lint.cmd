# Lint, a step of its own (not a test): the whole tree ruff-clean and ruff-formatted, and the typed
# packages (src/corrgrpo_core, tasks/corrgrpo_tasks: `files` in pyproject.toml) mypy --strict clean.
# Run here because this environment holds every array backend and the CLI's packages, so mypy reads
# their real types. Alone: `python3 tools/run_suites.py core/lint --reuse`.
ruff check .
ruff format --check .
mypy
