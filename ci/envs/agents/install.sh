# Tool-calling and agent-security tasks and the recipe builders. No training framework: the recipes'
# framework tests live in ci/envs/verl/recipes.args and ci/envs/trl/recipes.args.
# agentdojo (pure Python, ~75 small packages, runs offline) provides the real suites and checkers.
# The agent-security smoke run is TRL's now (env trl), so this env needs no torch.
# $INSTALL is uv's (or pip's) install command for this environment (tools/run_suites.py).
$INSTALL -q -e ".[test,tasks,agent-security]"
