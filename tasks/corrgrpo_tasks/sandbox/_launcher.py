"""First code to run inside the sandbox: apply resource limits, then run the program as ``__main__``.

This file is not imported by the package: its text is passed to the interpreter with ``-c``. It uses only
the standard library and must stay small, because it runs once per sandboxed program.

Arguments: ``LIMITS PATH [ARG...]`` where ``LIMITS`` is ``cpu_seconds,address_space_bytes,file_size_bytes,
processes,open_files`` (integers) and ``PATH`` is the program file.

The limits are set here rather than on the parent side of ``bwrap`` because ``RLIMIT_NPROC`` is counted
per user namespace only from inside it: set outside, it would count every process of the same user on
the host.
"""

import builtins
import os
import resource
import sys
import types


class _Quitter:
    """``exit()``/``quit()``: the interpreter runs with ``-S`` (no ``site``, whose start-up costs more than
    the rest), and ``site`` is what defines them; programs for stdin/stdout judges often call them."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Use {self.name}() to exit"

    def __call__(self, code: object = None) -> None:
        raise SystemExit(code)


def _limit(kind: int, value: int) -> None:
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY and value > hard:
        value = hard
    resource.setrlimit(kind, (value, value))


def _main() -> None:
    cpu, memory, file_size, processes, open_files = (int(part) for part in sys.argv[1].split(","))
    if os.environ.get("SANDBOX_PDEATHSIG") == "1":
        # rlimits-only mode has no bwrap --die-with-parent; ask the kernel for the same.
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
        except Exception:  # noqa: BLE001, S110 - best effort; the wall-clock kill still applies
            pass
    _limit(resource.RLIMIT_CORE, 0)
    soft_cpu = max(1, cpu)
    _, hard_cpu = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(
        resource.RLIMIT_CPU,
        (soft_cpu, soft_cpu + 1 if hard_cpu == resource.RLIM_INFINITY else min(hard_cpu, soft_cpu + 1)),
    )
    _limit(resource.RLIMIT_AS, memory)
    _limit(resource.RLIMIT_FSIZE, file_size)
    _limit(resource.RLIMIT_NPROC, processes)
    _limit(resource.RLIMIT_NOFILE, open_files)

    path = sys.argv[2]
    with open(path, "rb") as handle:
        source = handle.read()
    sys.argv = [path, *sys.argv[3:]]
    builtins.__dict__["exit"] = _Quitter("exit")
    builtins.__dict__["quit"] = _Quitter("quit")
    # -c puts the (writable) working directory first on sys.path: a program could plant modules there.
    sys.path[:] = [entry for entry in sys.path if entry not in ("", ".")]
    module = types.ModuleType("__main__")
    module.__file__ = path
    sys.modules["__main__"] = module
    exec(compile(source, path, "exec", dont_inherit=True, optimize=0), module.__dict__)  # noqa: S102


if __name__ == "__main__":
    _main()
