"""``python -m corrgrpo_adapters.openrlhf ...`` is the ``corrgrpo-openrlhf`` launcher."""

import sys

from .launcher import main

if __name__ == "__main__":
    sys.exit(main())
