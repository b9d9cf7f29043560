# The oldest verl the adapter supports (corrgrpo_adapters/__init__.py): the verl environment's install
# at that release. Runs the adapter's tests (adapters.args); the newest runs in ci/envs/verl.
VERL=0.9.0 source ci/envs/verl/install.sh
