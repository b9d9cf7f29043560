# The oldest OpenRLHF the adapter supports (corrgrpo_adapters/__init__.py): the openrlhf environment's
# install at that release. Its other packages stay the newest's: OpenRLHF 0.10.4 pins transformers
# 5.7.0 (installed --no-deps, the pin is not enforced), whose flash-attn probe breaks on the tests'
# flash_attn stub; deepspeed stays the 0.19.6 build. Runs the adapter's tests (adapters.args); the
# newest runs in ci/envs/openrlhf.
OPENRLHF=0.10.4 source "$ROOT/ci/envs/openrlhf/install.sh"
