# Code-generation task and its sandbox: `datasets` for the benchmark loaders (tests read local fixtures),
# torch (CPU, pinned by ci/constraints.txt) for the OpenRLHF-style reward function.
# The real sandbox needs bubblewrap on the machine (.ci/run installs it); the tests report, not skip, when
# it is missing.
# $INSTALL is uv's (or pip's) install command for this environment (tools/run_suites.py).
$INSTALL -q -e ".[test,lint,tasks]" "torch==2.13.0"
