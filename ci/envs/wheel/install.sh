# The package as a user gets it, nothing editable: the sdist and the wheel built from this tree (uv
# builds the wheel from the sdist, so both are checked; python -m build where uv cannot be had), then
# the wheel installed with extras into this fresh venv, the CPU torch first as the README says (here
# ci/constraints.txt pins it: a CUDA torch would fail tests/wheel). tools/run_suites.py rebuilds this
# environment on every run, --reuse or not: the stamp does not cover the source tree.
DIST="$VENV/dist"
rm -rf "$DIST"
if [ -n "${UV:-}" ]; then
  "$UV" build --quiet --out-dir "$DIST" "$ROOT"
else
  $INSTALL -q build && "$PY" -m build --outdir "$DIST" "$ROOT"
fi
ls "$DIST"/corrgrpo_core-*.tar.gz "$DIST"/corrgrpo_core-*-py3-none-any.whl
$INSTALL -q "torch==2.13.0"
$INSTALL -q "$(ls "$DIST"/corrgrpo_core-*-py3-none-any.whl)[test,cli,torch]"
