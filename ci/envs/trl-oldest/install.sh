# The oldest TRL the adapter supports (corrgrpo_adapters/__init__.py), on the CPU torch wheel pinned by
# ci/constraints.txt. Runs the adapter's tests (adapters.args); the newest runs in ci/envs/trl with the
# rest of the TRL suites. requests: TRL imports it and declares it only through transformers.
$INSTALL -q "torch==2.13.0"
$INSTALL -q -e ".[test,trl]" "trl==1.4.0" "torch==2.13.0" requests
