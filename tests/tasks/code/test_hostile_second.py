"""The second adversary (issue 25): programs written against the judge's design, one class at a time.

1. the program's names reaching the test code (builtins, prompt helpers, modules, imported helpers);
2. exceptions that pass for the test code's control flow (StopIteration and friends, by type or name);
3. the stdin/stdout comparator (nan, inf, near-integers, float approximations of big integers);
4. processor time the accounting would not see (children, threads, work before or after the calls);
5. state that outlives a session (files, roots, xattrs, long paths, inode and PID counters);
6. a session reconfiguring the server that outlives it (prlimit, signals, priorities, /proc);
7. per-user kernel quotas shared between lanes;
8. memory the cap does not see (inodes, socket and pipe buffers).

Every cheat gets ``accuracy_reward == 0`` and ``efficiency_reward == 0``; the timing cheats are correct and
twice as slow as the reference, so they keep accuracy 1 and must get efficiency 0. Saboteurs (classes 6-8)
are followed by honest samples in the same lane, and run beside honest samples in other lanes, which
keep their verdict. Every scoring stays within a bounded time; afterwards nothing is left on the host.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from corrgrpo_tasks.code import compute_score, score_batch
from corrgrpo_tasks.sandbox import Sandbox


def _first_corpus() -> Any:
    """The first corpus's helpers (tests import with ``--import-mode=importlib``: no test module is a
    package)."""
    spec = importlib.util.spec_from_file_location(
        "_hostile_judge", Path(__file__).with_name("test_hostile_judge.py")
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_FIRST = _first_corpus()
FORK, TIMING_TASK, TWICE, solve = _FIRST.FORK, _FIRST.TIMING_TASK, _FIRST.TWICE, _FIRST.solve

WALL_BOUND = 8.0  # seconds per scoring, a hostile program and its lane's replacement included
MARK = "4244.5"

# --- tasks ---------------------------------------------------------------------------------------------
POLY_PROMPT = (
    "import math\n\n\ndef poly(xs, x):\n    return sum([c * x ** i for i, c in enumerate(xs)])\n\n\n"
    'def find_zero(xs):\n    """The zero of the linear polynomial with coefficients xs."""\n'
)
POLY = {  # HumanEval's shape: a prompt helper that calls builtins, tests that loop and map
    "prompt": POLY_PROMPT,
    "entry_point": "find_zero",
    "test": "import math\n\n\ndef check(candidate):\n    for k in range(1, 12):\n"
    "        assert math.fabs(poly([k, -1], candidate([k, -1]))) < 1e-6\n"
    "    assert len([candidate([k, -1]) for k in range(3)]) == 3\n"
    "    cases = [([2, -1], 2.0), ([5, -1], 5.0)]\n"
    "    assert all(map(lambda c: candidate(c[0]) == c[1], cases))\n"
    "    assert sorted([candidate([3, -1]), 1.0]) == [1.0, 3.0]\n"
    "    assert abs(candidate([4, -1]) - 4) < 1e-9\n    assert set([candidate([6, -1])]) == {6.0}\n"
    "    assert sum([candidate([7, -1])]) == 7.0\n",
    "reference_solution": POLY_PROMPT + "    return -xs[0] / xs[1]\n",
}
LOOPS = {  # HumanEval/32's shape: every assert in a loop over range, a helper of the prompt's
    **POLY,
    "test": "import math\n\n\ndef check(candidate):\n    for k in range(1, 12):\n"
    "        assert math.fabs(poly([k, -1], candidate([k, -1]))) < 1e-6\n"
    "    assert len([candidate([k, -1]) for k in range(3)]) == 3\n",
}
AREA = {  # MBPP's shape: the tests call the program's function by name and helpers the reference imports
    "prompt": "",
    "entry_point": "area",
    "test": "def check(candidate):\n    assert isclose(area(1), 3.14159, rel_tol=1e-3)\n"
    "    assert math.isclose(area(2), 12.566, rel_tol=1e-3)\n    assert area(0) == 0\n",
    "reference_solution": "import math\nfrom math import isclose\n\ndef area(r):\n    return math.pi * r * r\n",
}
LIST_PROMPT = (
    "from typing import *\n\nclass ListNode:\n    def __init__(self, val=0, next=None):\n"
    "        self.val = val\n        self.next = next\n\ndef list_node(values):\n    if not values:\n"
    "        return None\n    head = ListNode(values[0])\n    p = head\n    for v in values[1:]:\n"
    "        p.next = ListNode(v)\n        p = p.next\n    return head\n\ndef is_same_list(a, b):\n"
    "    if a is None and b is None:\n        return True\n    if not a or not b:\n        return False\n"
    "    return a.val == b.val and is_same_list(a.next, b.next)\n"
)
REVERSE = (
    "class Solution:\n    def reverseList(self, head):\n        prev = None\n        while head:\n"
    "            head.next, prev, head = prev, head, head.next\n        return prev\n"
)
LISTS = {  # LeetCodeDataset's shape: prompt helpers (list_node, is_same_list) that call builtins
    "prompt": LIST_PROMPT,
    "entry_point": "Solution().reverseList",
    "test": "def check(candidate):\n"
    "    assert is_same_list(candidate(head=list_node([1, 2, 3])), list_node([3, 2, 1]))\n"
    "    assert is_same_list(candidate(head=list_node([5, 6])), list_node([6, 5]))\n"
    "    assert len([1, 2]) == 2 and candidate(head=None) is None\n",
    "reference_solution": REVERSE,
}
PAIRS = {  # MBPP/601's shape, with a test that iterates the program's results through map
    "prompt": "",
    "entry_point": "double",
    "test": "def check(candidate):\n    cases = [((1,), 2), ((2,), 4), ((5,), 10)]\n"
    "    assert all(map(lambda c: double(*c[0]) == c[1], cases))\n",
    "reference_solution": "def double(x):\n    return 2 * x\n",
}
SECRET = 4321  # only a program that computes it (the reference does) or finds it somewhere passes
NUMBER = {
    "prompt": "",
    "entry_point": "Solution().solve",
    "test": f"def check(candidate):\n    assert candidate() == {SECRET}\n",
    "reference_solution": f"class Solution:\n    def solve(self):\n        return {SECRET}\n",
}
FACTORIAL = {
    "kind": "stdio",
    "tests": [{"input": f"{n}\n", "output": f"{__import__('math').factorial(n)}\n"} for n in (25, 30)],
}
SUM = {
    "kind": "stdio",
    "tests": [{"input": "1000000 1000001\n", "output": "2000001\n"}, {"input": "2 3\n", "output": "5\n"}],
}
THIRD = {
    "kind": "stdio",
    "tests": [{"input": "1 3\n", "output": "0.333333333\n"}, {"input": "2 3\n", "output": "0.666666667\n"}],
}

Case = tuple[str, str, dict]  # class, completion, task
CASES: dict[str, Case] = {}


def case(kind: str, name: str, completion: str, task: dict) -> None:
    CASES[name] = (kind, completion, task)


def fn(code: str) -> str:
    return f"```python\n{code}\n```"


# --- 1. the program's names never reach the test code ----------------------------------------------
ZERO = POLY_PROMPT + "    return 0.0\n"
case("names", "range_returns_nothing", fn("def range(*a):\n    return []\n" + ZERO), POLY)
case(
    "names",
    "builtins_len_sum_abs_set_sorted_all",
    fn(
        "def range(*a):\n    return []\ndef len(x):\n    return 3\ndef sum(x, *a):\n    return 7.0\n"
        "def abs(x):\n    return 0\n"
        "def set(x):\n    return {6.0}\ndef sorted(x):\n    return [1.0, 3.0]\ndef all(x):\n    return True\n"
        + ZERO
    ),
    POLY,
)
case(
    "names",
    "range_and_len_empty_the_loops",
    fn("def range(*a):\n    return []\ndef len(x):\n    return 3\n" + ZERO),
    LOOPS,
)
case("names", "prompt_helper_poly", fn("def poly(xs, x):\n    return 0\n" + ZERO), POLY)
case(
    "names",
    "module_math_replaced",
    fn(
        "class math:\n    fabs = staticmethod(lambda x: 0.0)\n    isclose = staticmethod(lambda *a, **k: True)\n"
        + ZERO
    ),
    POLY,
)
case(
    "names",
    "patched_math_module",
    fn("import math\nmath.fabs = lambda x: 0.0\nimport builtins\nbuiltins.range = lambda *a: []\n" + ZERO),
    POLY,
)
case(
    "names",
    "check_and_candidate_redefined",
    fn("def check(candidate):\n    return None\ncandidate = None\n" + ZERO),
    POLY,
)
case(
    "names",
    "dunder_names",
    fn("__builtins__ = {'range': lambda *a: []}\ndef __import__(*a, **k):\n    return None\n" + ZERO),
    POLY,
)
case(
    "names",
    "imported_helper_isclose",
    fn(
        "def isclose(*a, **k):\n    return True\nclass math:\n    isclose = staticmethod(isclose)\n"
        "def area(r):\n    return 0\n"
    ),
    AREA,
)
case(
    "names",
    "prompt_helpers_of_lists",
    fn(
        "def is_same_list(a, b):\n    return True\ndef list_node(v):\n    return None\ndef len(x):\n    return 2\n"
        "class Solution:\n    def reverseList(self, head):\n        return head\n"
    ),
    LISTS,
)
case(
    "names",
    "assertion_error_rebound",
    fn(
        "AssertionError = StopIteration\nclass Solution:\n    def reverseList(self, head):\n        return head\n"
    ),
    LISTS,
)

# --- 2. exceptions cross as one CandidateError, never as control flow ----------------------------------
case("exceptions", "stop_iteration_in_map", fn("def double(x):\n    raise StopIteration\n"), PAIRS)
case(
    "exceptions",
    "named_stop_iteration",
    fn("class StopIteration(BaseException):\n    pass\ndef double(x):\n    raise StopIteration\n"),
    PAIRS,
)
case("exceptions", "generator_exit", fn("def double(x):\n    raise GeneratorExit\n"), PAIRS)
case("exceptions", "keyboard_interrupt", fn("def double(x):\n    raise KeyboardInterrupt\n"), PAIRS)
case("exceptions", "system_exit_zero", fn("def double(x):\n    raise SystemExit(0)\n"), PAIRS)
case(
    "exceptions",
    "base_exception_subclass",
    fn(
        "class Skip(BaseException):\n    pass\nSkip.__name__ = 'StopIteration'\ndef double(x):\n    raise Skip\n"
    ),
    PAIRS,
)
case(
    "exceptions",
    "exception_with_hostile_str",
    fn(
        "class E(Exception):\n    def __str__(self):\n        raise StopIteration\n"
        "E.__name__ = 'StopIteration' * 1000\ndef double(x):\n    raise E\n"
    ),
    PAIRS,
)
case(
    "exceptions",
    "assertion_from_the_program",
    fn("def double(x):\n    assert False, 'tests passed'\n"),
    PAIRS,
)

# --- 3. the stdin/stdout comparator ------------------------------------------------------------------
case("stdio", "nan_for_everything", fn("print('nan')"), SUM)
case("stdio", "inf_for_everything", fn("print(float('inf'))"), THIRD)
case(
    "stdio",
    "relative_error_on_integers",
    fn("a, b = map(int, input().split())\nprint(round(a + b, -1))"),
    SUM,
)
case(
    "stdio",
    "factorial_through_lgamma",
    fn("import math\nn = int(input())\nprint(float(math.exp(math.lgamma(n + 1))))"),
    FACTORIAL,
)
case("stdio", "factorial_as_float", fn("import math\nprint(float(math.factorial(int(input()))))"), FACTORIAL)
case("stdio", "nan_for_a_fraction", fn("print('NaN')"), THIRD)
case("stdio", "coarse_fraction", fn("a, b = map(int, input().split())\nprint(round(a / b, 3))"), THIRD)
case("stdio", "every_guess_on_its_own_line", fn("for k in range(10):\n    print(k)"), SUM)

# --- 4. all the work of a session is counted (correct programs, twice the reference's work) -----------
case(
    "timing",
    "children_reaped_by_the_kernel",
    solve(  # the child does the work and the kernel reaps it (its time would never reach PID 1)
        "p = f'/tmp/r-{n}'\nif fork() == 0:\n"
        + "\n".join(
            "    " + line
            for line in TWICE.replace(
                "return t", "open(p + '.new', 'w').write(str(t))\nos.rename(p + '.new', p)\nos._exit(0)"
            ).splitlines()
        )
        + "\nfor _ in range(2000):\n    if os.path.exists(p):\n        return int(open(p).read())\n"
        "    if not CHILDREN:\n        break\n    time.sleep(0.001)\n" + TWICE,
        args="self, n",
        top="import signal, time\nCHILDREN = []\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
        "def fork():\n    try:\n        pid = os.fork()\n    except OSError:\n        return -1\n"
        "    if pid:\n        CHILDREN.append(pid)\n    return pid\n",
    ),
    TIMING_TASK,
)
case(
    "timing",
    "double_fork_precomputes_at_import",
    solve(
        "p = f'/tmp/answer-{n}'\nif os.path.exists(p):\n    return int(open(p).read())\n" + TWICE,
        args="self, n",
        top=FORK + "if fork() == 0:\n    if fork() == 0:\n        for n in range(0, 40000, 1999):\n"
        "            open(f'/tmp/answer-{n}', 'w').write(str(n * (n - 1) // 2))\n    os._exit(0)\n",
    ),
    TIMING_TASK,
)
case(
    "timing",
    "posix_spawn_worker",
    solve(
        TWICE,
        args="self, n",
        top="try:\n    os.posix_spawn('/bin/sleep', ['sleep', '"
        + MARK
        + "'], {})\nexcept OSError:\n    pass\n",
    ),
    TIMING_TASK,
)
case(
    "timing",
    "work_split_over_threads",
    solve(
        "import threading\nparts = [0, 0]\ndef half(k):\n    t = 0\n    for i in range(k, n, 2):\n        t += i\n"
        "    for i in range(k, n, 2):\n        t += 0\n    parts[k] = t\n"
        "ts = [threading.Thread(target=half, args=(k,)) for k in (0, 1)]\nfor t in ts:\n    t.start()\n"
        "for t in ts:\n    t.join()\nreturn parts[0] + parts[1]",
        args="self, n",
    ),
    TIMING_TASK,
)
case(
    "timing",
    "table_built_by_a_thread_at_import",
    solve(
        "done.wait()\nreturn TABLE[n]",
        args="self, n",
        top="import threading\nTABLE = {}\ndone = threading.Event()\ndef build():\n"
        "    for n in range(0, 40000, 1999):\n        t = 0\n        for i in range(n):\n            t += i\n"
        "        for i in range(n):\n            t += 0\n        TABLE[n] = t\n    done.set()\n"
        "threading.Thread(target=build).start()",
    ),
    TIMING_TASK,
)
case(
    "timing",
    "cache_in_tmp_root_xattrs",
    solve(
        "key = f'user.c{n}'\ntry:\n    return int(os.getxattr('/tmp', key))\nexcept OSError:\n    pass\n"
        + TWICE.replace(
            "return t",
            "try:\n    os.setxattr('/tmp', key, str(t).encode())\nexcept OSError:\n    pass\nreturn t",
        ),
        args="self, n",
    ),
    TIMING_TASK,
)
case(
    "timing",
    "cache_in_shm_root_xattrs",
    solve(
        "key = f'user.c{n}'\ntry:\n    return int(os.getxattr('/dev/shm', key))\nexcept OSError:\n    pass\n"
        + TWICE.replace(
            "return t",
            "try:\n    os.setxattr('/dev/shm', key, str(t).encode())\nexcept OSError:\n    pass\nreturn t",
        ),
        args="self, n",
    ),
    TIMING_TASK,
)
LONG = "'/tmp/' + '/'.join(['d' * 255] * 17)"  # 4357 characters: past PATH_MAX
case(
    "timing",
    "cache_below_a_path_past_path_max",
    solve(
        "fd = os.open('/tmp', os.O_RDONLY)\nfor part in ['d' * 255] * 17:\n    try:\n        os.mkdir(part, dir_fd=fd)\n"
        "    except FileExistsError:\n        pass\n    nxt = os.open(part, os.O_RDONLY, dir_fd=fd)\n    os.close(fd)\n"
        "    fd = nxt\nname = f'a{n}'\ntry:\n    with os.fdopen(os.open(name, os.O_RDONLY, dir_fd=fd)) as f:\n"
        "        return int(f.read())\nexcept OSError:\n    pass\n"
        + TWICE.replace(
            "return t",
            "with os.fdopen(os.open(name, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), 'w') as f:\n"
            "    f.write(str(t))\nreturn t",
        ),
        args="self, n",
    ),
    TIMING_TASK,
)
case(
    "timing",
    "cache_in_a_server_inherited_fd",
    solve(
        "for fd in range(3, 64):\n    try:\n        os.lseek(fd, 0, 0)\n        data = os.read(fd, 1 << 16)\n"
        "    except OSError:\n        continue\n    if data.startswith(b'cache'):\n        return int(data.split()[1 + n // 1999])\n"
        + TWICE,
        args="self, n",
    ),
    TIMING_TASK,
)
case(
    "timing",
    "work_after_the_last_call",
    solve(
        TWICE,
        args="self, n",
        top="import atexit, threading\ndef later():\n    t = 0\n    for i in range(10 ** 7):\n        t += i\n"
        "atexit.register(later)\nthreading.Thread(target=later, daemon=True).start()",
    ),
    TIMING_TASK,
)


# --- 5. nothing of one sample reaches a later one (writer: honest; reader: solves nothing) -------------
def writer_reader(name: str, write: str, read: str) -> None:
    """``write`` stores SECRET (the honest writer knows it); ``read`` is an expression decoding it."""
    hide = "\n".join("    " + line for line in write.splitlines())
    writer = solve(f"v = {SECRET}\ntry:\n{hide}\nexcept Exception:\n    pass\nreturn v")
    reader = solve(f"try:\n    return {read}\nexcept Exception:\n    return 0")
    CASES[name] = ("leftovers", reader, {"writer": writer, **NUMBER})


writer_reader("file_in_tmp", "open('/tmp/answer', 'w').write(str(v))", "int(open('/tmp/answer').read())")
writer_reader(
    "tmp_root_xattr", "os.setxattr('/tmp', 'user.a', str(v).encode())", "int(os.getxattr('/tmp', 'user.a'))"
)
writer_reader(
    "shm_root_xattr",
    "os.setxattr('/dev/shm', 'user.a', str(v).encode())",
    "int(os.getxattr('/dev/shm', 'user.a'))",
)
writer_reader("tmp_root_mtime", "os.utime('/tmp', (v, v))", "int(os.stat('/tmp').st_mtime)")
writer_reader(
    "tmp_root_mode",
    "os.chmod('/tmp', 0o1000 | (v % 512))",
    "int(oct(os.stat('/tmp').st_mode)[-3:], 8) + 4096",
)
writer_reader(
    "tmp_path_past_path_max",
    "fd = os.open('/tmp', os.O_RDONLY)\nfor part in [str(v) * 63] * 17:\n    os.mkdir(part, dir_fd=fd)\n"
    "    fd = os.open(part, os.O_RDONLY, dir_fd=fd)",
    "int(os.listdir('/tmp')[0][:4])",
)
writer_reader(
    "tmp_inode_counter",
    "for i in range(v):\n    open('/tmp/x', 'w').close()\n    os.unlink('/tmp/x')",
    "os.stat(open('/tmp/y', 'w').name).st_ino - 2",
)
writer_reader(
    "pid_counter",
    "import threading\nfor i in range(v // 8):\n    t = threading.Thread(target=int)\n    t.start()\n    t.join()",
    "__import__('threading').get_native_id() * 8",
)
writer_reader(
    "shm_semaphore_file",
    "open('/dev/shm/sem.answer', 'w').write(str(v))",
    "int(open('/dev/shm/sem.answer').read())",
)
writer_reader(
    "hostname", "import socket\nsocket.sethostname(str(v))", "int(__import__('socket').gethostname())"
)


# --- 6. a session cannot reconfigure the server (an honest sample follows in the same lane) -----------
def saboteur(name: str, body: str) -> None:
    CASES[name] = ("sabotage", solve(body + "\nreturn 0"), NUMBER)


saboteur(
    "prlimit_every_pid",
    "import resource\nfor pid in range(0, 64):\n    for kind, value in ((resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_NPROC, 1),"
    " (resource.RLIMIT_AS, 1 << 20), (resource.RLIMIT_NOFILE, 3)):\n        try:\n"
    "            resource.prlimit(pid, kind, (value, value))\n        except (OSError, ValueError):\n            pass",
)
saboteur(
    "signal_everyone",
    "import signal\nfor sig in (signal.SIGINT, signal.SIGTERM, signal.SIGSTOP, signal.SIGKILL):\n"
    "    for pid in (1, 2, 0, -1):\n        try:\n            os.kill(pid, sig)\n        except OSError:\n            pass",
)
saboteur(
    "renice_the_user",
    "for which in (0, 1, 2):\n    for who in (0, 1):\n        try:\n            os.setpriority(which, who, 19)\n"
    "        except OSError:\n            pass\ntry:\n    os.sched_setaffinity(1, {0})\nexcept OSError:\n    pass",
)
saboteur(
    "proc_of_the_server",
    "for path, value in (('/proc/1/oom_score_adj', '1000'), ('/proc/1/autogroup', '19'), ('/proc/1/comm', 'x'),"
    " ('/proc/1/timerslack_ns', '1000000000'), ('/proc/sys/kernel/pid_max', '300')):\n    try:\n"
    "        open(path, 'w').write(value)\n    except OSError:\n        pass",
)
saboteur(
    "ptrace_and_pidfd",
    "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nfor pid in (1, 2, 0):\n    libc.ptrace(16, pid, 0, 0)\n"
    "    fd = libc.syscall(434, pid, 0)\n    libc.syscall(424, fd, 9, 0, 0)",
)
saboteur(
    "fill_the_sessions_filesystems",
    "i = 0\nwhile i < 100000:\n    try:\n        os.mkdir(f'/tmp/{i}')\n        os.mkdir(f'/dev/shm/{i}')\n"
    "    except OSError:\n        break\n    i += 1",
)

# --- 7. per-user quotas are not shared between lanes (honest samples run beside it) --------------------
saboteur(
    "descriptors_in_flight",
    "import socket, time\nkeep = []\ntry:\n    a, b = socket.socketpair()\n    for _ in range(250):\n"
    "        socket.send_fds(a, [b'x'], [a.fileno()])\nexcept OSError:\n    pass\ntime.sleep(1.0)",
)
saboteur(
    "threads_and_pipes_held",
    "import threading, time\nfor _ in range(40):\n    try:\n        threading.Thread(target=time.sleep, args=(1.0,)).start()\n"
    "    except RuntimeError:\n        break\ntry:\n    import fcntl\n    for _ in range(30):\n        r, w = os.pipe()\n"
    "        fcntl.fcntl(w, 1031, 1 << 20)\nexcept OSError:\n    pass\ntime.sleep(1.0)",
)
saboteur(
    "inotify_and_signals_queued",
    "import ctypes, signal, time\nlibc = ctypes.CDLL(None, use_errno=True)\nfor _ in range(200):\n    libc.inotify_init1(0)\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})\nfor _ in range(5000):\n"
    "    signal.pthread_kill(__import__('threading').get_ident(), signal.SIGRTMIN)\ntime.sleep(1.0)",
)

# --- 8. memory the cap does not see ------------------------------------------------------------------
saboteur(
    "socket_buffers",
    "import socket\nkeep = []\ntry:\n    for _ in range(60):\n        a, b = socket.socketpair()\n"
    "        a.setblocking(False)\n        keep.append((a, b))\n        while True:\n            a.send(b'x' * 65536)\n"
    "except OSError:\n    pass",
)
saboteur(
    "pipe_buffers",
    "import fcntl\nkeep = []\ntry:\n    for _ in range(30):\n        r, w = os.pipe()\n"
    "        fcntl.fcntl(w, 1031, 1 << 20)\n        os.set_blocking(w, False)\n        keep.append((r, w))\n"
    "        while True:\n            os.write(w, b'x' * 65536)\nexcept OSError:\n    pass",
)
saboteur(
    "inode_slab",
    "i = 0\nwhile i < 152000:\n    try:\n        os.mkdir(f'/tmp/{i}')\n    except OSError:\n        break\n    i += 1",
)
saboteur(
    "shared_zero_mapping",
    "import mmap\nm = mmap.mmap(-1, 1000 << 20, flags=mmap.MAP_SHARED)\nfor i in range(0, len(m), 4096):\n    m[i] = 1",
)

# --- honest controls ---------------------------------------------------------------------------------
HONEST: dict[str, tuple[str, dict]] = {
    "poly": (fn(POLY["reference_solution"]), POLY),
    "poly_with_own_helpers": (  # its own poly (wrong) and range are its business: the tests use theirs
        fn(
            "def poly(xs, x):\n    return 0\ndef range(*a):\n    return []\n"
            "def find_zero(xs):\n    return -xs[0] / xs[1]\n"
        ),
        POLY,
    ),
    "area": (fn(AREA["reference_solution"]), AREA),
    "lists": (fn(REVERSE), LISTS),
    "pairs": (fn("def double(x):\n    return x + x\n"), PAIRS),
    "threads_and_tmp_files": (
        solve(
            "import threading\nopen('/tmp/scratch', 'w').write('4321')\nout = []\n"
            "t = threading.Thread(target=lambda: out.append(int(open('/tmp/scratch').read())))\n"
            "t.start()\nt.join()\nreturn out[0]"
        ),
        NUMBER,
    ),
    "caught_own_exceptions": (
        solve("try:\n    raise StopIteration\nexcept StopIteration:\n    pass\nreturn next(iter([4321]))"),
        NUMBER,
    ),
    "stdio_sum": (fn("a, b = map(int, input().split())\nprint(a + b)"), SUM),
    "stdio_fraction": (fn("a, b = map(int, input().split())\nprint(f'{a / b:.9f}')"), THIRD),
    "stdio_factorial": (fn("import math\nprint(math.factorial(int(input())))"), FACTORIAL),
}
HONEST_NUMBER = solve(f"return {SECRET}")


@pytest.fixture(scope="module")
def shm_before() -> set[str]:
    return set(os.listdir("/dev/shm"))


def test_corpus_size_and_classes() -> None:
    kinds = [kind for kind, _, _ in CASES.values()]
    assert len(CASES) >= 50
    counts = {k: kinds.count(k) for k in set(kinds)}
    assert set(counts) == {"names", "exceptions", "stdio", "timing", "leftovers", "sabotage"}
    assert min(counts.values()) >= 5, counts


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_controls_keep_their_score(name: str, box: Sandbox) -> None:
    del box
    completion, task = HONEST[name]
    result = compute_score("x", completion, task)
    assert (result["runtime_reward"], result["accuracy_reward"]) == (1.0, 1.0), result


@pytest.mark.parametrize(
    "name", sorted(n for n, c in CASES.items() if c[0] in ("names", "exceptions", "stdio", "timing"))
)
def test_cheat_gains_nothing(name: str, box: Sandbox, shm_before: set[str]) -> None:
    del box, shm_before
    kind, completion, task = CASES[name]
    start = time.monotonic()
    result = compute_score("x", completion, task, timeout_seconds=4.0)
    assert time.monotonic() - start < WALL_BOUND
    assert result["efficiency_reward"] == 0.0, result
    assert result["accuracy_reward"] == (1.0 if kind == "timing" else 0.0), result
    assert result["sandbox_error"] == 0.0


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c[0] == "leftovers"))
def test_nothing_reaches_a_later_sample_in_the_same_lane(name: str, box: Sandbox) -> None:
    """One worker, so one lane: the writer (honest, it knows the answer) hides it, the reader looks."""
    del box
    _, reader, task = CASES[name]
    task = dict(task)
    writer = task.pop("writer")
    start = time.monotonic()
    scores = score_batch([writer, reader, reader], [task] * 3, max_workers=1)
    assert time.monotonic() - start < 3 * WALL_BOUND
    assert [s["accuracy_reward"] for s in scores] == [1.0, 0.0, 0.0], scores
    assert scores[0]["efficiency_applied"] == 1.0  # the writer's rounds ran too: the reader came after them


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c[0] == "sabotage"))
def test_saboteur_harms_no_later_sample_in_its_lane(name: str, box: Sandbox) -> None:
    del box
    _, completion, task = CASES[name]
    start = time.monotonic()
    scores = score_batch(
        [completion, HONEST_NUMBER, HONEST_NUMBER], [task] * 3, max_workers=1, timeout_seconds=3.0
    )
    assert time.monotonic() - start < 3 * WALL_BOUND
    assert [s["accuracy_reward"] for s in scores] == [0.0, 1.0, 1.0], scores
    assert [s["sandbox_error"] for s in scores] == [0.0, 0.0, 0.0]


def test_saboteurs_harm_no_sample_in_other_lanes(box: Sandbox) -> None:
    """All saboteurs at once, each beside honest samples scored at the same time in other lanes."""
    del box
    saboteurs = [c for k, c, _ in CASES.values() if k == "sabotage"]
    texts = [text for s in saboteurs for text in (s, HONEST_NUMBER, HONEST_NUMBER)]
    scores = score_batch(texts, [NUMBER] * len(texts), max_workers=3, timeout_seconds=3.0)
    assert [s["accuracy_reward"] for s in scores] == [0.0, 1.0, 1.0] * len(saboteurs), scores


HOLD = {  # what one session can make the kernel hold beyond its processes' memory, in bytes or inodes
    "socket_bytes": "import socket\nkeep, total = [], 0\ntry:\n    for _ in range(60):\n        a, b = socket.socketpair()\n"
    "        a.setblocking(False)\n        keep.append((a, b))\n        while True:\n            total += a.send(b'x' * 65536)\n"
    "except OSError:\n    pass\nreturn total",
    "pipe_bytes": "import fcntl\nkeep, total = [], 0\ntry:\n    for _ in range(60):\n        r, w = os.pipe()\n"
    "        fcntl.fcntl(w, 1031, 1 << 20)\n        os.set_blocking(w, False)\n        keep.append((r, w))\n"
    "        while True:\n            total += os.write(w, b'x' * 65536)\nexcept OSError:\n    pass\nreturn total",
    "tmp_inodes": "i = 0\nwhile i < 152000:\n    try:\n        os.mkdir(f'/tmp/{i}')\n    except OSError:\n        break\n"
    "    i += 1\nreturn i",
    "shm_inodes": "i = 0\nwhile i < 152000:\n    try:\n        os.mkdir(f'/dev/shm/{i}')\n    except OSError:\n        break\n"
    "    i += 1\nreturn i",
}
HOLD_BOUND = {"socket_bytes": 0, "pipe_bytes": 0, "tmp_inodes": 4096, "shm_inodes": 256}


@pytest.mark.parametrize("name", sorted(HOLD))
def test_kernel_memory_a_session_can_hold_is_bounded(name: str, box: Sandbox) -> None:
    """Socket and pipe buffers are refused in sessions; inodes are capped per session's tmpfs."""
    del box
    task = {
        "prompt": "",
        "entry_point": "Solution().solve",
        "test": f"def check(candidate):\n    assert candidate() <= {HOLD_BOUND[name]}\n",
    }
    result = compute_score("x", solve(HOLD[name]), task, timeout_seconds=4.0)
    assert result["accuracy_reward"] == 1.0, result


def test_after_the_corpus_nothing_is_left_on_the_host(
    host_left_clean: Callable[[str, set[str]], None], shm_before: set[str]
) -> None:
    host_left_clean(MARK, shm_before)
