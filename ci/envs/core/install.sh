# The core environment: every array backend we test on CPU, the CLI extras, lint tools.
# $INSTALL is uv's (or pip's) install command for this environment (tools/run_suites.py).
$INSTALL -q -e ".[test,lint,torch,jax,cli,parquet]"
