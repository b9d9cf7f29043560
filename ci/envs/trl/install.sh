# The TRL environment: the project with its trl extra (trl==1.16.0), the CPU torch wheel pinned by
# ci/constraints.txt, and the test tools. torch is named explicitly because trl only reaches it
# through accelerate, and an unpinned resolve pulls a CUDA build.
# $INSTALL is uv's (or pip's) install command for this environment (tools/run_suites.py).
$INSTALL -q "torch==2.13.0"
$INSTALL -q -e ".[test,lint,trl,agent-security,cli]" "torch==2.13.0"
