# The TRL environment: the project with its trl extra (trl==1.16.0), the CPU torch wheel pinned by
# ci/constraints.txt, and the test tools. torch is named explicitly because trl only reaches it
# through accelerate, and an unpinned resolve pulls a CUDA build.
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q "torch==2.13.0"
"$PY" -m pip install -q -e ".[test,lint,trl,agent-security,cli]" "torch==2.13.0"
# gguf: tests/tasks/training write a tiny GGUF and convert it the way the SmolLM2 run does (pure Python).
"$PY" -m pip install -q "gguf==0.19.0"
