#!/usr/bin/env bash
# GPU rows of the benchmark: torch on CUDA (timed with CUDA events) and jax on the GPU, in one call;
# then, where verl / TRL are importable by the same python, verl end to end and TRL's own lines on
# CUDA (python -m benchmarks.frameworks --device cuda: a synchronisation after each call).
#
# Run from the repository root on a machine with an NVIDIA GPU and a python whose torch has CUDA
# (PYTHON=... to choose it; jax rows are added when jax sees a GPU). Writes gpu*.json / gpu*.md into
# ${OUT:-.}; each part stops itself (timeout), and the whole script takes at most 8 minutes.
#
# First, the training run's first minutes as a smoke check (docs/experiments.md, "What a GPU run would
# need"): the full paper-row run's launch command printed, not launched (corrgrpo-recipe tool_calling
# verl --dry-run: Qwen2.5-7B-Instruct, group 4, 128 prompts a step, lr 1e-6, 15 epochs), then three
# optimiser steps of the same recipe family through TRL and the project's adapter on the GPU with a tiny
# model (python -m corrgrpo_tasks.gpu_smoke tool_calling, grpo and corrgrpo), one JSON line each in
# gpu_train_smoke.jsonl. PART=train runs only this, PART=bench only the benchmark rows below; DEVICE=cpu
# dry-runs the training part on a CPU (no CUDA check, no benchmark rows).
#
# The estimator call itself reads nothing back to the host: the torch path labels ragged groups by
# sorted position (no value-dependent shapes) and sums with index_add_. Input validation does one
# scalar read (the finiteness check of the scores); the events bracket the whole public call.
set -euo pipefail
PY=${PYTHON:-python3}
OUT=${OUT:-.}
PART=${PART:-all}
DEVICE=${DEVICE:-cuda}
mkdir -p "$OUT"
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 PYTHONPATH="${PWD}/src:${PWD}/adapters:${PWD}/tasks:${PWD}${PYTHONPATH:+:$PYTHONPATH}"
if [ "$DEVICE" = cuda ]; then
  "$PY" - <<'PYCHECK'
import torch
assert torch.cuda.is_available(), "torch has no CUDA device here"
print("device:", torch.cuda.get_device_name(0), "| torch", torch.__version__)
PYCHECK
fi
if [ "$PART" != bench ]; then
  timeout 60 "$PY" -m corrgrpo_tasks.recipes tool_calling verl --dry-run > "$OUT/gpu_recipe.txt"
  : > "$OUT/gpu_train_smoke.jsonl"
  for estimator in grpo corrgrpo; do
    timeout 240 "$PY" -m corrgrpo_tasks.gpu_smoke tool_calling --device "$DEVICE" --steps 3 \
      --estimator "$estimator" | grep '^{"domain"' >> "$OUT/gpu_train_smoke.jsonl"  # TRL prints its logs too
  done
  cat "$OUT/gpu_train_smoke.jsonl"
fi
if [ "$PART" = train ] || [ "$DEVICE" != cuda ]; then
  exit 0
fi
backends="torch-cuda"
if "$PY" -c "import jax, sys; sys.exit(0 if any(d.platform == 'gpu' for d in jax.devices()) else 1)" 2>/dev/null; then
  backends="$backends jax"
fi
common=(--k 7 --layout dense8 runs shuffled --estimator grpo corrgrpo gdpo gdpo_corr --repeat 5 --budget 0.2)
# With numpy rows (the cross-backend equality column, and the loop baseline at 65,536 rows).
timeout 170 "$PY" -m benchmarks --backend numpy $backends --n 65536 1e6 --loop-max 65536 "${common[@]}" \
  --json "$OUT/gpu.json" --markdown "$OUT/gpu.md"
# 1e7 rows on the device alone.
timeout 100 "$PY" -m benchmarks --backend $backends --n 1e7 --loop-max 0 "${common[@]}" \
  --json "$OUT/gpu_1e7.json" --markdown "$OUT/gpu_1e7.md"
# verl end to end through its registry on CUDA (uuid4 strings, (N, L) float32 token rewards, int64
# mask): verl's grpo_vectorized, the reference CorrGRPO loop as written, ours. verl's row loops
# (its GRPO and GDPO) take minutes per call on a GPU and are left out here.
if "$PY" -c "import verl" 2>/dev/null; then
  timeout 150 "$PY" -m benchmarks.frameworks verl --device cuda --n 65536 --length 1 1024 --layout runs shuffled \
    --repeats 7 --skip "row loop" "gdpo" --json "$OUT/gpu_verl.json" --markdown "$OUT/gpu_verl.md" || true
else
  echo "verl not importable by $PY: no verl rows" >&2
fi
# TRL's own advantage lines against our grpo / corrgrpo on CUDA float32 tensors.
if "$PY" -c "import trl" 2>/dev/null; then
  timeout 60 "$PY" -m benchmarks.frameworks trl --device cuda --repeats 7 \
    --json "$OUT/gpu_trl.json" --markdown "$OUT/gpu_trl.md" || true
else
  echo "trl not importable by $PY: no TRL rows" >&2
fi
