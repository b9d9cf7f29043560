# What `pip install -e ".[test]"` alone gives (numpy, array-api-compat, pytest, hypothesis,
# array-api-strict): the core and objectives suites pass in it, and every suite that needs a
# framework or an extra skips with the packages it needs named (tests/conftest.py, REQUIRES).
# $INSTALL is uv's (or pip's) install command for this environment (tools/run_suites.py).
$INSTALL -q -e ".[test]"
