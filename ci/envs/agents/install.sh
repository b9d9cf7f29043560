# Tool-calling and agent-security tasks and the recipe builders. No training framework: the recipes'
# framework tests live in ci/envs/verl/recipes.args and ci/envs/trl/recipes.args.
# agentdojo (pure Python, ~75 small packages, runs offline) provides the real suites and checkers;
# torch (the local CPU wheel) runs the agent-security smoke loop.
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q -e ".[test,torch,tasks]" "agentdojo==0.1.35"
