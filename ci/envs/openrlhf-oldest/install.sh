# The oldest OpenRLHF the adapter supports (corrgrpo_adapters/__init__.py): the openrlhf environment's
# install at that release, with the transformers it pins (deepspeed stays the newest's 0.19.6 build).
# Runs the adapter's tests (adapters.args); the newest runs in ci/envs/openrlhf.
OPENRLHF=0.10.4 TRANSFORMERS=5.7.0 source "$ROOT/ci/envs/openrlhf/install.sh"
