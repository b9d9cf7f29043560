# The verl environment: verl 0.9.1 (or the release in $VERL: ci/envs/verl-oldest sets it to the oldest
# supported) with its declared dependencies, on the CPU torch wheel.
# verl's own CPU extras ("cpu", "fsdp", ...) pin torch==2.11 and pull CUDA-only packages, so we take the
# plain distribution (the constraints keep torch at 2.13.0) and add by hand the few "verl-core" extras
# that the trainer modules (ray_trainer, v1 trainers, main_ppo) import at module level.
# $INSTALL is uv's (or pip's) install command for this environment (tools/run_suites.py).
$INSTALL -q "torch==2.13.0"
$INSTALL -q "verl==${VERL:-0.9.1}" "TransferQueue>=0.1.10" pyzmq msgspec cachetools uvicorn fastapi
# agentdojo (pure Python, runs offline) for the agentdojo_agent loop test; it only adds packages.
$INSTALL -q -e ".[test,lint,agent-security]"
