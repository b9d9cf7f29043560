# The oldest OpenRLHF the adapter supports (corrgrpo_adapters/__init__.py), at that release's own pins
# of transformers and deepspeed (ray's is the newest's), installed by the newest's script. Runs the
# adapter's tests (adapters.args); the newest runs in ci/envs/openrlhf with the OpenRLHF recipes.
# 0.10.2 and older lack the PolicyLoss.forward arguments the CISPO patch needs (dp_size, ...).
OPENRLHF=0.10.3 TRANSFORMERS=5.7.0 DEEPSPEED=0.18.9 source ci/envs/openrlhf/install.sh
