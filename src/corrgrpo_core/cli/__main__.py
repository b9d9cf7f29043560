"""``python -m corrgrpo_core.cli`` runs the ``corrgrpo`` command."""

import sys

from . import main

if __name__ == "__main__":  # importing the module (e.g. doctest collection) must not run the command
    sys.exit(main())
