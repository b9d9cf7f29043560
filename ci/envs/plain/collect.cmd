# The whole tree in the bare environment: nothing may fail or error at collection for want of a package
# (what needs a framework or an extra is one skip naming it, tests/conftest.py).
python -m pytest tests --collect-only -q -p no:cacheprovider
