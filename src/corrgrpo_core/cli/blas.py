"""numpy's OpenBLAS on one thread while the CLI computes a large batch (:func:`one_blas_thread`).

The core's only BLAS calls on numpy arrays are single passes over a slice (``np.vdot`` in its
finiteness checks). OpenBLAS runs each on every core, and its worker threads then spin waiting for
the next call: on the 1.9M-row file of ``python -m benchmarks.explain_file`` the command took 5.8-6.9
CPU seconds, and as much wall time, without a thread count against 4.0 with ``OMP_NUM_THREADS=1``
(load 5, 2 cores, before this setting). ``OMP_NUM_THREADS=1`` avoids it only when set before numpy
loads; a user runs the command without it, so the command sets OpenBLAS's own thread count (its C
function, the library found among the process's loaded ones) and sets it back after. A thread count in the environment
(``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``GOTO_NUM_THREADS``) is the user's choice and is
left alone, as is any other BLAS (MKL, Accelerate) and a system without ``/proc/self/maps``.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["one_blas_thread", "openblas_threads"]

_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GOTO_NUM_THREADS")
# (getter, setter) names: numpy >= 2's scipy-openblas, numpy 1.x's 64-bit build, a plain OpenBLAS
_NAMES = (
    ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
    ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
    ("openblas_get_num_threads", "openblas_set_num_threads"),
)


def openblas_threads() -> list[tuple[Callable[[], int], Callable[[int], None]]]:
    """(get, set) of the thread count of each OpenBLAS loaded in this process (Linux), or none."""
    try:
        with open("/proc/self/maps") as maps:  # address, permissions, offset, device, inode, path
            fields = [line.split(maxsplit=5) for line in maps if "openblas" in line.lower()]
        paths = sorted({f[5].strip() for f in fields if len(f) == 6})
    except OSError:
        return []
    found = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)  # (loaded already: the same library, not a second copy)
        except OSError:
            continue
        for get, put in _NAMES:
            if hasattr(lib, get) and hasattr(lib, put):
                getter, setter = getattr(lib, get), getattr(lib, put)
                getter.restype, getter.argtypes = ctypes.c_int, []
                setter.restype, setter.argtypes = None, [ctypes.c_int]
                found.append((getter, setter))
                break
    return found


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """OpenBLAS on one thread inside the block, unless the environment sets a thread count.

    >>> import numpy as np
    >>> with one_blas_thread():
    ...     float(np.vdot(np.ones(4), np.ones(4)))
    4.0
    """
    libs = [] if any(os.environ.get(name) for name in _ENV) else openblas_threads()
    counts = [get() for get, _ in libs]
    for _, put in libs:
        put(1)
    try:
        yield
    finally:
        for (_, put), count in zip(libs, counts, strict=True):
            put(count)
