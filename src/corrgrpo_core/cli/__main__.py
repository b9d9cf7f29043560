"""``python -m corrgrpo_core.cli`` runs the ``corrgrpo`` command."""

import sys

from . import main

sys.exit(main())
