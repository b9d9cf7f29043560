import os

# One thread per backend, as everywhere in this project (and a fair match for numpy).
os.environ.setdefault("OMP_NUM_THREADS", "1")

from ._cli import main

raise SystemExit(main())
