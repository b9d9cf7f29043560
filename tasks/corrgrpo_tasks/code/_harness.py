"""Test harness that runs inside the sandbox as ``/sandbox/main.py`` (standard library only).

It reads one job (JSON) from stdin, then reports each stage on the sandbox's side channel as a line
``<nonce> <json>``; the scorer ignores lines without the nonce. Stages, in order, each only if the
previous one succeeded:

* ``syntax``: ``ast.parse`` of the candidate; carries the AST node-type tokens for the similarity score.
* ``compile``: preamble, candidate, tests and entry point compile (separately, so that frames can be
  attributed: ``<prompt>``, ``<solution>``, ``<test>``).
* ``run``: ``passed``, ``wrong_answer`` (an ``AssertionError`` raised in the test code, or an output
  mismatch) or ``runtime_error`` (anything else, including an ``AssertionError`` raised in the
  candidate's own code, ``SystemExit`` and a returned object whose comparison methods come from the
  candidate: the always-equal hack).
* ``timing``: only after ``passed``: per-round times of the test suite for the candidate and, when given,
  the reference solution, run alternately in fresh namespaces.

Parsing and compiling happen here rather than in the scorer so that pathological source text (deep
nesting, huge literals) can only hurt the sandbox.
"""

# Running the candidate is this file's purpose; the sandbox around it is the security boundary.
# ruff: noqa: S102

from __future__ import annotations

import ast
import builtins
import gc
import io
import json
import os
import sys
import time
from collections.abc import Callable
from types import CodeType, TracebackType
from typing import Any

_PLAIN = (int, float, complex, str, bytes, bool, type(None))
_CONTAINERS = (list, tuple, set, frozenset)
_HACK_METHODS = ("__eq__", "__ne__", "__bool__")


class _Sink(io.RawIOBase):
    """A writable raw stream that keeps the first ``cap`` bytes and counts the rest."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap
        self.data = bytearray()
        self.total = 0

    def writable(self) -> bool:
        return True

    def write(self, chunk: Any) -> int:
        size = len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += bytes(chunk[:room])
        self.total += size
        return size


def _text_sink(cap: int) -> tuple[_Sink, io.TextIOWrapper]:
    raw = _Sink(cap)
    return raw, io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", errors="replace", write_through=True)


def _ast_tokens(tree: ast.AST, cap: int) -> list[str]:
    """Pre-order node types with closing markers, identifiers and literals left out."""
    tokens: list[str] = []
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack and len(tokens) < cap:
        node, closing = stack.pop()
        name = type(node).__name__
        if closing:
            tokens.append("/" + name)
            continue
        tokens.append(name)
        stack.append((node, True))
        children = [child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.expr_context)]
        stack.extend((child, False) for child in reversed(children))
    return tokens


def _innermost_file(tb: TracebackType | None) -> str:
    filename = ""
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return filename


def _defined_by_candidate(kind: type) -> bool:
    for klass in type.__getattribute__(kind, "__mro__"):
        namespace = type.__getattribute__(klass, "__dict__")
        for method in _HACK_METHODS:
            code = getattr(namespace.get(method), "__code__", None)
            if code is not None and code.co_filename == "<solution>":
                return True
    return False


def _check_result(value: object, budget: int = 20000) -> None:
    """Raise when a returned value could fake test comparisons (the always-equal hack)."""
    pending: list[Any] = [value]
    while pending and budget > 0:
        budget -= 1
        item = pending.pop()
        kind = type(item)
        if kind in _PLAIN:
            continue
        if _defined_by_candidate(kind):
            raise TypeError(f"candidate returned {kind.__name__!r}, whose comparison methods it defines itself")
        if kind in _CONTAINERS:
            pending.extend(item)
        elif kind is dict:
            pending.extend(item.keys())
            pending.extend(item.values())


def _guard(candidate: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        result = candidate(*args, **kwargs)
        _check_result(result)
        return result

    return guarded


def _same_output(got: str, expected: str) -> bool:
    got_lines = [line.rstrip() for line in got.rstrip().splitlines()]
    expected_lines = [line.rstrip() for line in expected.rstrip().splitlines()]
    if got_lines == expected_lines:
        return True
    if len(got_lines) != len(expected_lines):
        return False
    for mine, theirs in zip(got_lines, expected_lines, strict=False):
        a, b = mine.split(), theirs.split()
        if len(a) != len(b):
            return False
        for x, y in zip(a, b, strict=False):
            if x == y:
                continue
            try:
                fx, fy = float(x), float(y)
            except ValueError:
                return False
            if abs(fx - fy) > 1e-6 * max(1.0, abs(fy)):
                return False
    return True


class _Job:
    prompt: CodeType
    program: CodeType
    test: CodeType
    entry: CodeType
    cases: list[tuple[str, str]]
    reference: CodeType | None

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.kind = job.get("kind", "check")
        self.print_cap = int(job.get("print_cap", 1 << 16))

    def compile_all(self, code: str) -> None:
        job = self.job
        self.prompt = compile(job.get("prompt") or "", "<prompt>", "exec", dont_inherit=True, optimize=0)
        self.program = compile(code, "<solution>", "exec", dont_inherit=True, optimize=0)
        if self.kind == "check":
            self.test = compile(job["test"], "<test>", "exec", dont_inherit=True, optimize=0)
            self.entry = compile(job["entry_point"], "<test>", "eval", dont_inherit=True, optimize=0)
        else:
            self.cases = [(str(case["input"]), str(case["output"])) for case in job["tests"]]
        self.reference = None
        if job.get("reference"):
            try:
                self.reference = compile(job["reference"], "<reference>", "exec", dont_inherit=True, optimize=0)
            except (SyntaxError, ValueError):
                self.reference = None

    def prepare(self, program: CodeType, guard: bool) -> Callable[[], None]:
        """Fresh namespace with the program loaded; returns a zero-argument callable running the tests."""
        if self.kind == "check":
            namespace = {"__name__": "__solution__", "__builtins__": builtins}
            exec(self.prompt, namespace)
            exec(program, namespace)
            exec(self.test, namespace)
            candidate = eval(self.entry, namespace)
            check: Any = namespace["check"]
            wrapped = _guard(candidate) if guard else candidate
            return lambda: check(wrapped)
        return lambda: self.run_cases(program)

    def run_cases(self, program: CodeType) -> None:
        for given, expected in self.cases:
            data = given.encode()
            raw, sink = _text_sink(max(2 * len(expected.encode()) + 1024, self.print_cap))
            namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
            stdin_fd = None
            if len(data) <= 60000:  # fits a pipe buffer: programs reading fd 0 directly work too
                read_end, write_end = os.pipe()
                os.write(write_end, data)
                os.close(write_end)
                stdin_fd = os.dup(0)
                os.dup2(read_end, 0)
                os.close(read_end)
                sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - lives as sys.stdin
            else:
                sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
            saved = sys.stdout
            sys.stdout = sink
            try:
                exec(self.prompt, namespace)
                exec(program, namespace)
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    raise RuntimeError(f"program exited with {exc.code!r}") from None
            finally:
                sys.stdout = saved
                if stdin_fd is not None:
                    os.dup2(stdin_fd, 0)
                    os.close(stdin_fd)
            sink.flush()
            if raw.total > raw.cap or not _same_output(raw.data.decode("utf-8", "replace"), expected):
                raise _WrongAnswer(f"wrong output for input {given[:80]!r}")


class _WrongAnswer(Exception):
    pass


def _main() -> None:
    started = time.perf_counter()
    raw = sys.stdin.buffer.read()
    # The job (tests, reference solution, nonce) must not stay readable from fd 0 by the candidate.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    job = json.loads(raw)
    del raw
    channel = int(os.environ["SANDBOX_CHANNEL_FD"])
    nonce = job["nonce"].encode()
    # Bind everything the reporting path needs now: the candidate may tamper with modules later.
    write, dumps, perf, collect, disable, enable = os.write, json.dumps, time.perf_counter, gc.collect, \
        gc.disable, gc.enable

    def emit(record: dict[str, Any]) -> None:
        # No contextlib here: only references bound before the candidate ran are trusted.
        try:  # noqa: SIM105
            write(channel, nonce + b" " + dumps(record).encode() + b"\n")
        except Exception:  # noqa: BLE001, S110 - a closed channel just means no report
            pass

    code = job["code"]
    try:
        if not code.strip():
            raise SyntaxError("empty program")
        tree = ast.parse(code)
        tokens = _ast_tokens(tree, int(job.get("ast_token_cap", 0)))
        del tree
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        emit({"stage": "syntax", "ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]})
        return
    emit({"stage": "syntax", "ok": True, "tokens": tokens})
    del tokens

    runner = _Job(job)
    try:
        runner.compile_all(code)
    except BaseException as exc:  # noqa: BLE001 - any failure here is a compile failure
        emit({"stage": "compile", "ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]})
        return
    emit({"stage": "compile", "ok": True})

    saved_out, saved_err = sys.stdout, sys.stderr
    _, sink = _text_sink(runner.print_cap)
    sys.stdout = sys.stderr = sink
    status, error, seconds = "passed", "", 0.0
    try:
        suite = runner.prepare(runner.program, guard=True)
        start = perf()
        suite()
        seconds = perf() - start
    except _WrongAnswer as exc:
        status, error = "wrong_answer", str(exc)
    except AssertionError as exc:
        trusted = _innermost_file(exc.__traceback__) in ("<test>", "<prompt>")
        status, error = ("wrong_answer" if trusted else "runtime_error"), f"AssertionError: {exc}"[:500]
    except MemoryError:
        status, error = "runtime_error", "MemoryError"
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt included
        status, error = "runtime_error", f"{type(exc).__name__}: {exc}"[:500]
    finally:
        sys.stdout, sys.stderr = saved_out, saved_err
    emit({"stage": "run", "status": status, "error": error, "seconds": seconds})
    timing = job.get("timing")
    if status != "passed" or not timing:
        return

    sys.stdout = sys.stderr = sink
    try:
        reference_suite = None
        if runner.reference is not None:
            try:
                reference_suite = runner.prepare(runner.reference, guard=False)
                reference_suite()  # warm-up, and the reference must pass its own tests
            except BaseException:  # noqa: BLE001
                reference_suite = None
        rounds, min_rounds, budget = int(timing["rounds"]), int(timing["min_rounds"]), float(timing["budget"])
        deadline = started + float(timing.get("deadline", 1e9))
        times: dict[str, list[float] | None] = {"candidate": [],
                                                "reference": [] if reference_suite is not None else None}
        # Sub-millisecond suites are below timer noise: repeat them inside each measurement.
        repeat = max(1, min(1000, int(0.002 / max(seconds, 1e-7)) + 1))
        began = perf()
        for index in range(rounds):
            # Stop before a round that would run into the sandbox's wall-clock kill.
            last = repeat * (sum(t[-1] for t in times.values() if t) if times["candidate"] else 2 * seconds)
            if perf() + last > deadline:
                break
            order = ("candidate", "reference") if index % 2 == 0 else ("reference", "candidate")
            for who in order:
                bucket = times[who]
                program = runner.program if who == "candidate" else runner.reference
                if bucket is None or program is None:
                    continue
                suite = runner.prepare(program, guard=who == "candidate")
                collect()
                disable()
                try:
                    start = perf()
                    for _ in range(repeat):
                        suite()
                    bucket.append((perf() - start) / repeat)
                finally:
                    enable()
            if index + 1 >= min_rounds and perf() - began > budget:
                break
    except BaseException as exc:  # noqa: BLE001 - a candidate that fails on a rerun gets no efficiency
        sys.stdout, sys.stderr = saved_out, saved_err
        emit({"stage": "timing", "error": f"{type(exc).__name__}: {exc}"[:500]})
        return
    sys.stdout, sys.stderr = saved_out, saved_err
    emit({"stage": "timing", **times})


if __name__ == "__main__":
    _main()
