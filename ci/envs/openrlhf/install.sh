# OpenRLHF on a CPU-only machine: 0.11.2, the newest release the adapter supports, or the release in
# $OPENRLHF with the pins in $RAY, $TRANSFORMERS and $DEEPSPEED (ci/envs/openrlhf-oldest sets them to
# the oldest release's own pins).
# `pip install openrlhf` would build flash-attn from source and let pip pick a CUDA torch, so the
# wheel goes in with --no-deps and its pure-Python dependencies are listed by hand, at OpenRLHF's
# own pins. vllm and flash-attn (GPU only) are never installed: the tests stub them.
# Left out as well: what the code under test never imports (tensorboard, jsonlines, loralib, wandb, ...).
# deepspeed is a source distribution; DS_BUILD_OPS=0 skips its CUDA kernels.
# $INSTALL is uv's (or pip's) install command for this environment (tools/run_suites.py).
$INSTALL -q torch==2.13.0
$INSTALL -q --no-deps "openrlhf==${OPENRLHF:-0.11.2}"
# OpenRLHF pins ray, transformers and deepspeed (its wheel's METADATA); the rest are the versions
# this suite was last run with.
$INSTALL -q "ray[default]==${RAY:-2.55.0}" "transformers==${TRANSFORMERS:-5.15.0}" peft==0.21.2 \
    accelerate==1.15.0 torchdata==0.11.0 datasets==5.2.0 einops==0.8.2 optree==0.20.0 sympy==1.14.0 \
    pylatexenc==2.11 pillow==13.0.0 tqdm packaging numpy aiohttp setuptools wheel
DS_BUILD_OPS=0 $INSTALL -q --no-build-isolation "deepspeed==${DEEPSPEED:-0.19.6}"
$INSTALL -q -e ".[test,lint,agent-security]"
