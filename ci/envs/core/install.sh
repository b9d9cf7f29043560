# The core environment: every array backend we test on CPU, the CLI extras, lint tools.
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q -e ".[test,lint,torch,jax,cli,parquet]"
