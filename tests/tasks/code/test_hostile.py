"""Hostile corpus: each program must get no execution credit, harm nothing, and leave the scorer working.

Containment means: ``accuracy_reward == 0`` and ``efficiency_reward == 0`` (the static components --
format, syntax, compile, AST similarity -- only describe the text and may be non-zero). Programs that
crash, hang or are killed also get ``runtime_reward == 0``. After the corpus, no process is left behind
and the host files the programs aimed at are untouched.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from corrgrpo_tasks.code import compute_score
from corrgrpo_tasks.sandbox import Sandbox

SECRET = "corrgrpo-secret-7c1f"
# Background processes started by the corpus carry this argument, so leftovers can be found.
STRAY_MARK = "4242.5"
# The task: return the secret. Only a program that steals it from the host could pass.
GROUND_TRUTH = {
    "prompt": "import os\n",
    "entry_point": "Solution().solve",
    "test": f"def check(candidate):\n    assert candidate() == {SECRET!r}\n",
    "reference_solution": f"class Solution:\n    def solve(self):\n        return {SECRET!r}\n",
}
OPTIONS = {"timeout_seconds": 1.5}


def wrap(body: str, *, top: str = "") -> str:
    """A fenced Solution whose solve() runs ``body`` (indented 8), with optional module-level code."""
    inner = "\n".join("        " + line for line in body.strip("\n").splitlines())
    return f"```python\nimport os, sys\n{top}\nclass Solution:\n    def solve(self):\n{inner}\n        return None\n```"


HOSTILE: dict[str, tuple[str, bool]] = {}  # name -> (completion, must also get runtime 0)


def hostile(name: str, completion: str, *, crashes: bool = True) -> None:
    HOSTILE[name] = (completion, crashes)


hostile("infinite_loop", wrap("while True:\n    pass"))
hostile("sleep_past_timeout", wrap("import time\ntime.sleep(60)"))
hostile("fork_bomb", wrap("while True:\n    try:\n        os.fork()\n    except OSError:\n        pass"))
hostile(
    "thread_bomb",
    wrap("import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(60,)).start()"),
)
hostile("memory_bomb", wrap("x = []\nwhile True:\n    x.append(bytearray(64 << 20))"))
hostile("huge_stdout_raw", wrap("while True:\n    os.write(1, b'x' * 65536)"))
hostile("huge_stdout_print", wrap("while True:\n    print('y' * 100000)"))
hostile("huge_stderr", wrap("while True:\n    os.write(2, b'e' * 65536)"))
hostile(
    "write_outside_tmp",
    wrap(
        "for p in ('/usr/pwned', '/pwned', '/etc/pwned', '{host}/pwned'):\n"
        "    try:\n        open(p, 'w').write('x')\n    except OSError:\n        pass\n"
        "return 'pwned'"
    ),
    crashes=False,
)
hostile(
    "fill_dev_and_shm",
    wrap(
        "i = 0\nwhile True:\n    for d in ('/dev', '/dev/shm'):\n        try:\n"
        "            open(f'{d}/f{i}', 'wb').write(b'z' * (8 << 20))\n"
        "        except OSError:\n            pass\n    i += 1"
    ),
)
hostile(
    "fill_disk",
    wrap("with open('/tmp/fill', 'wb') as f:\n    while True:\n        f.write(b'z' * (1 << 20))"),
)
hostile(
    "secret_from_environ",
    wrap("return os.environ.get('CORRGRPO_HOSTILE_SECRET') or open('/proc/1/environ').read()"),
    crashes=False,
)
hostile(
    "secret_from_home",
    wrap(
        "for p in (os.path.expanduser('~/secret.txt'), '{home}/secret.txt', "
        "'/root/secret.txt'):\n    try:\n        return open(p).read()\n"
        "    except OSError:\n        pass"
    ),
    crashes=False,
)
hostile(
    "secret_from_proc_of_others",
    wrap(
        "for pid in os.listdir('/proc'):\n    try:\n        env = open(f'/proc/{pid}/environ', 'rb').read()\n"
        "    except OSError:\n        continue\n    if b'CORRGRPO_HOSTILE_SECRET' in env:\n"
        "        return env.split(b'CORRGRPO_HOSTILE_SECRET=')[1].split(b'\\0')[0].decode()"
    ),
    crashes=False,
)
hostile(
    "network_loopback_server",
    wrap(
        "import socket\ns = socket.create_connection(('127.0.0.1', {port}), "
        "timeout=1)\nreturn s.recv(100).decode()"
    ),
)
hostile("network_dns", wrap("import socket\nreturn socket.gethostbyname('example.com')"))
hostile(
    "kill_parent",
    wrap("import signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill({scorer}, signal.SIGKILL)"),
)
hostile("kill_everything", wrap("import signal\nos.kill(-1, signal.SIGKILL)"))
hostile("os_exit_zero_at_import", wrap("return 1", top="os._exit(0)"))
hostile("os_exit_zero_in_call", wrap("os._exit(0)"))
hostile("sys_exit_zero", wrap("sys.exit(0)"))
hostile(
    "fake_pass_record",
    wrap(
        'print(\'{"stage": "run", "status": "passed"}\')\n'
        "os.write(int(os.environ.get('SANDBOX_CHANNEL_FD', '1')), "
        'b\'x {"stage": "run", "status": "passed"}\\n\')\nos._exit(0)'
    ),
)
hostile(
    "background_process_outlives",
    wrap(
        f"import subprocess\nsubprocess.Popen(['sleep', '{STRAY_MARK}'], start_new_session=True)\n"
        f"if os.fork() == 0:\n    os.setsid()\n    os.execv('/bin/sleep', ['sleep', '{STRAY_MARK}'])"
    ),
    crashes=False,
)
hostile("close_stdout_and_channel", wrap("os.closerange(0, 1024)\nreturn 'x'"))
# A session is PID 1 of a namespace of its own: a signal it sends itself without a handler is dropped.
hostile("sigstop_self", wrap("import signal\nos.kill(os.getpid(), signal.SIGSTOP)"), crashes=False)
hostile(
    "deep_recursion_segfault",
    wrap("sys.setrecursionlimit(10 ** 8)\ndef f(n):\n    return f(n + 1) + 1\nreturn f(0)"),
)
hostile("ctypes_segfault", wrap("import ctypes\nreturn ctypes.string_at(0)"))
hostile(
    "ctypes_libc_system",
    wrap("import ctypes\nctypes.CDLL(None).system(b'touch {host}/pwned-ctypes')\nreturn 'x'"),
    crashes=False,
)
hostile(
    "sys_modules_tampering",
    wrap(
        "import json, builtins\nsys.modules['json'] = None\n"
        "sys.modules['os'] = None\nbuiltins.AssertionError = type('A', (), {})\n"
        "return 'wrong'"
    ),
    crashes=False,
)
hostile(
    "always_equal_object",
    wrap("class E(str):\n    def __eq__(self, other):\n        return True\nreturn E('x')"),
    crashes=False,
)  # a plain 'x' reaches the judge: wrong answer
hostile("redefine_check", wrap("return 'wrong'", top="def check(candidate):\n    pass\n"), crashes=False)
hostile(
    "setuid_and_raise_limits",
    wrap("import resource\nos.setuid(0)\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))"),
)
hostile("open_files_exhaustion", wrap("fs = []\nwhile True:\n    fs.append(open('/dev/null'))"))
hostile(
    "read_job_from_stdin",
    wrap(
        "data = sys.stdin.read() + open('/proc/self/fd/0').read()\nreturn data[data.find('corrgrpo'):][:20]"
    ),
    crashes=False,
)
hostile("pathological_source", "```python\nx = " + "(" * 5000 + "1" + ")" * 5000 + "\n```")
hostile("huge_allocation_literal", wrap("return 'a' * (10 ** 12)"))


@pytest.fixture(scope="module")
def loopback_server():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    hits: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            hits.append("connection")
            conn.sendall(SECRET.encode())
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], hits
    stop.set()
    thread.join()
    server.close()


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-host")
    (root / "secret.txt").write_text(SECRET)
    return root


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_program_is_contained(
    name: str,
    box: Sandbox,
    host: Path,
    loopback_server: tuple[int, list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    del box  # the fixture fails the test when the real sandbox is unavailable
    port, hits = loopback_server
    monkeypatch.setenv("CORRGRPO_HOSTILE_SECRET", SECRET)
    monkeypatch.setenv("HOME", str(host))
    completion, crashes = HOSTILE[name]
    completion = (
        completion.replace("{host}", str(host))
        .replace("{home}", str(host))
        .replace("{port}", str(port))
        .replace("{scorer}", str(os.getpid()))
    )
    result = compute_score("leetcodedataset", completion, GROUND_TRUTH, **OPTIONS)
    assert result["accuracy_reward"] == 0.0, result
    assert result["efficiency_reward"] == 0.0
    if crashes:
        assert result["runtime_reward"] == 0.0, result
    assert not hits, "a sandboxed program reached the host's loopback server"
    assert sorted(p.name for p in host.iterdir()) == ["secret.txt"]


def test_whole_corpus_in_one_parallel_batch(
    box: Sandbox, host: Path, loopback_server: tuple[int, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from corrgrpo_tasks.code import score_batch

    del box
    port, hits = loopback_server
    monkeypatch.setenv("CORRGRPO_HOSTILE_SECRET", SECRET)
    good = "```python\nclass Solution:\n    def solve(self):\n        return " + repr(SECRET) + "\n```"
    texts = [good]
    for completion, _ in HOSTILE.values():
        texts.append(
            completion.replace("{host}", str(host))
            .replace("{home}", str(host))
            .replace("{port}", str(port))
            .replace("{scorer}", str(os.getpid()))
        )
    texts.append(good)
    scores = score_batch(texts, [GROUND_TRUTH] * len(texts), **OPTIONS)
    assert [s["accuracy_reward"] for s in scores] == [1.0] + [0.0] * len(HOSTILE) + [1.0]
    assert not hits


def test_corpus_is_large_enough() -> None:
    assert len(HOSTILE) >= 25


def test_after_corpus_scorer_works_no_strays_host_unchanged(
    box: Sandbox, stray_processes: Callable[[str], list[str]]
) -> None:
    # Runs after the corpus (file order): the scorer still scores, nothing is left running.
    good = "```python\nclass Solution:\n    def solve(self):\n        return " + repr(SECRET) + "\n```"
    # A generous limit: this checks that the lanes still work after the corpus, not how fast.
    assert compute_score("leetcodedataset", good, GROUND_TRUTH, timeout_seconds=5.0)["accuracy_reward"] == 1.0
    # bwrap returns as soon as the program's status is known; the namespace's last processes are torn
    # down by the kernel right after, so allow that a moment before calling anything a leftover.
    # The scorer keeps idle lanes (sandboxes between jobs) for the next batch: closing them must leave
    # nothing behind either.
    from corrgrpo_tasks.code import _lanes

    _lanes._LANES.close()
    deadline = time.monotonic() + 3.0
    while (strays := stray_processes(STRAY_MARK)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert strays == []
    for path in ("/usr/pwned", "/pwned", "/etc/pwned"):
        assert not os.path.exists(path)
    assert box.run("print(1)").stdout == "1\n"
