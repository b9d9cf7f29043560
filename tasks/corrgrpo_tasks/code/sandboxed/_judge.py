"""Judge: runs as ``/sandbox/main.py`` in a sandbox of its own; the candidate never shares its process.

It reads one job (JSON) from stdin: the candidate's source text, the prompt, the tests (``check`` code and
entry point, or stdin/expected-output cases), the reference solution's presence and the timing plan. It
reports on the sandbox's side channel (``SANDBOX_CHANNEL_FD``), which only this process holds, one JSON
record per line:

* ``syntax`` (``ast.parse``, through ``_ast``; AST node-type tokens for the similarity score) and ``compile`` (prompt,
  program, tests, entry point). The scorer starts the candidate's sandbox only after ``compile`` succeeds.
* ``run``: ``passed``, ``wrong_answer`` (an ``AssertionError`` raised by the test code, or an output
  mismatch), ``runtime_error`` or ``timeout``. The test code runs *here*, in a namespace of the prompt's
  and the test's own names with the real builtins; of the program's names only the entry point (and,
  for tests that call the program's names directly, MBPP's convention, the names the dataset's reference
  solution defines) are bound, to proxies that call into the candidate's sandbox (``_server.py``). No
  builtin, prompt helper or module is ever the program's. What comes back is plain data decoded by
  ``_wire`` into builtin values (and this process's own dataset classes), or a handle to an object that
  stays in the candidate's process, so every comparison is made by builtin code on builtin values. An
  exception the program raised arrives as ``CandidateError`` (its name and message as text), never as an
  exception the test code could mistake for its own control flow; a program that dies, hangs, exits, or
  sends anything malformed poisons the run (``runtime_error``), whatever the test code does with it.
* ``lane``: the sandboxes failed in a way the program cannot have caused (a server gone before a session
  started, a session that could not be confined): the scorer runs the job again on a fresh lane.
* ``reference``: asks the scorer for the reference's sandbox (only after ``passed``, when timing).
* ``timing``: per-round seconds of the test suite for the candidate and the reference, each round in a
  fresh process of its own sandbox (forked from a pristine server), alternating (ABBA). Before each round
  the other sandbox's session is ended: every process of it killed and its ``/tmp`` wiped. A module
  suite's round *replays* its verdict run (``_Server.replay``): the requests the test code sent, as one
  batch, and the answers must be the verdict run's byte for byte (else ``timing`` carries an error and
  the sample gets no efficiency).
"""

# The dataset's test code runs here by design; the judge's own sandbox is the boundary.
# No contextlib here (start-up cost): try/except/pass it is.
# ruff: noqa: S102, SIM105

from __future__ import annotations

import _ast
import _socket
import array
import builtins
import io
import os
import select
import struct
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing, collections, json, socket, ast: start-up cost in every judge; C modules only
    from collections.abc import Callable
    from typing import Any

if __name__ == "__main__":  # in the sandbox, next to /sandbox/_wire.py
    sys.path.insert(0, os.path.dirname(__file__))  # /sandbox, or the unsafe mode's directory
    import _syntax  # type: ignore[import-not-found]
    import _wire  # type: ignore[import-not-found]
    import _zygote  # type: ignore[import-not-found]

    sys.path.pop(0)
else:  # imported by the tests
    from . import _syntax, _wire

_HEADER = struct.Struct(">I")
_MODULE = "__judge__"
_BUILTIN_NAMES = frozenset(vars(builtins))
_DIGITS = frozenset("0123456789")


class CandidateError(Exception):
    """Any exception raised in the candidate's process, whatever its name: ``name`` and ``message`` are
    text. One ordinary exception type, so that nothing the program raises can pass for ``StopIteration``,
    ``GeneratorExit``, ``KeyboardInterrupt``, ``SystemExit``, an ``AssertionError`` of the tests or any
    other exception the test code's control flow relies on."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


class _Poison(BaseException):
    """The candidate process misbehaved (died, hung, exited, sent garbage): the run fails whatever the test
    code catches (a BaseException, so ``except Exception`` in test code does not swallow it)."""


class _Timeout(_Poison):
    pass


class _Shape(BaseException):
    """The candidate answered with an object of its own where the reference answered with plain data: a
    wrong answer, whatever the test code catches."""


class _LaneFault(_Poison):
    """The sandboxes failed before the program could have had a hand in it: the job is run again."""


class _WrongAnswer(Exception):
    pass


class _Diverged(Exception):
    """A timed round's answers are not the verdict run's, byte for byte: the sample gets no efficiency."""


# What a builtin raises when the candidate's object lacks the protocol the test code used (``len`` of a
# generator, ``hasattr`` of a missing attribute): the builtin's own exception, as in a plain run.
_PROTOCOL_ERRORS: dict[str, type[Exception]] = {"TypeError": TypeError, "AttributeError": AttributeError}
_PROTOCOL_OPS = dict.fromkeys(("len", "iter", "contains", "getitem", "setitem"), "TypeError") | {
    "getattr": "AttributeError"
}


def _number_kind(token: str) -> str:
    """``"int"`` for ``[+-]digits``, ``"real"`` for a decimal number with a point or an exponent
    (``-1.5``, ``.5``, ``2e10``), ``""`` for anything else (``nan``, ``inf``, ``1_000``, ``0x10``, ...)."""
    body = token[1:] if token[:1] in ("+", "-") else token
    mantissa, e, exponent = body.lower().partition("e")
    if e:
        digits = exponent[1:] if exponent[:1] in ("+", "-") else exponent
        if not digits or not set(digits) <= _DIGITS:
            return ""
    whole, dot, fraction = mantissa.partition(".")
    if not (whole or fraction) or not set(whole) <= _DIGITS or not set(fraction) <= _DIGITS:
        return ""
    return "real" if dot or e else "int"


def _canonical(token: str) -> bool:
    """A number as a problem prints one: ``-?(0|[1-9][0-9]*)(.[0-9]+)?`` (no sign ``+``, no leading
    zeros, no exponent)."""
    body = token[1:] if token[:1] == "-" else token
    whole, dot, fraction = body.partition(".")
    if not whole or not set(whole) <= _DIGITS or (len(whole) > 1 and whole[0] == "0"):
        return False
    return not dot or (bool(fraction) and set(fraction) <= _DIGITS)


def _same_token(got: str, expected: str, tolerance: float | None = None) -> bool:
    """The same text; or, where the expected token is a number in canonical form, a number of the same
    value (``5.0`` for ``5``: decimal arithmetic, never floats), within ``tolerance`` (absolute or
    relative) where the problem states one, but never more than half a unit of the expected token's
    last digit. Anything else (``00000101``, ``1e3``, ``nan``) only as the same text."""
    if got == expected:
        return True
    if not _canonical(expected) or not _number_kind(got):
        return False
    from decimal import Decimal  # imported once by the judge's PID 1 (see _main)

    mine, theirs = Decimal(got), Decimal(expected)
    if mine == theirs:
        return True
    if tolerance is None or not tolerance > 0:
        return False
    digits = len(expected.partition(".")[2])
    half_unit = Decimal(5).scaleb(-digits - 1)
    bound = min(Decimal(repr(float(tolerance))) * max(Decimal(1), abs(theirs)), half_unit)
    return abs(mine - theirs) <= bound


def _same_output(got: str, expected: str, tolerance: float | None = None) -> bool:
    """Line by line after stripping the whole text and each line (LiveCodeBench's rule), and token by
    token on a line that differs (``_same_token``)."""
    got_lines = [line.strip() for line in got.strip().split("\n")]
    expected_lines = [line.strip() for line in expected.strip().split("\n")]
    if len(got_lines) != len(expected_lines):
        return False
    for mine, theirs in zip(got_lines, expected_lines, strict=True):
        if mine == theirs:
            continue
        a, b = mine.split(), theirs.split()
        if len(a) != len(b) or not all(_same_token(x, y, tolerance) for x, y in zip(a, b, strict=True)):
            return False
    return True


class _Server:
    """The judge's end of one server sandbox (candidate or reference)."""

    def __init__(self, fd: int, deadline: float, prompt: str, program: str) -> None:
        self.expected: list[bool] | None = None
        self.ctl = _socket.socket(fileno=fd)
        self.deadline = deadline
        self.exited = False
        self.texts = _wire.encode((prompt, program))

    def _wait(self, fds: list[int]) -> list[int]:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise _Timeout("time limit")
        ready, _, _ = select.select(fds, [], [], remaining)
        if not ready:
            raise _Timeout("time limit")
        return ready

    def _event(self) -> dict[str, Any]:
        message = self.ctl.recv(4096)
        if not message:
            raise _Poison("the server ended")
        try:
            event = _wire.loads(message)
        except ValueError:
            raise _Poison("malformed control message") from None
        if not isinstance(event, dict):
            raise _Poison("malformed control message")
        if event.get("event") == "lane_error":  # only the server (or a session not yet confined) has ctl
            raise _LaneFault(str(event.get("error"))[:300])
        if event.get("event") == "exit":
            self.exited = True
        return event

    def pending(self) -> None:
        """Read the control messages already queued (a session's lane failure comes before its end)."""
        while select.select([self.ctl.fileno()], [], [], 0)[0]:
            self._event()

    def session(self, mode: str) -> _Session:
        mine, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.exited = False
        try:
            self.ctl.sendmsg(
                [_wire.dumps({"op": "start", "mode": mode}).encode()],
                [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", [theirs.fileno()]))],
            )
        except OSError:  # gone before this session began: nothing of this job's program can have done it
            mine.close()
            raise _LaneFault("the server is gone") from None
        finally:
            theirs.close()
        session = _Session(self, mine)
        session.send_raw(self.texts)
        return session

    def replay(self, recording: tuple[bytes, bytes]) -> _Session:
        """One timed round in replay mode: the verdict run's requests (``recording[0]``, frames back to
        back) go as one batch, which the server reads before it forks the session, so none is pending
        while the program runs; the session answers them all from memory and sends its answers (the
        ready message first, one per line) as one frame after the last call, which must be
        ``recording[1]`` byte for byte. The session is still open: its processor time comes with ``end()``."""
        requests, expected = recording
        session = self.session("replay")
        session.send_raw(requests)
        (size,) = _HEADER.unpack(session._recv(4))
        if size != len(expected) or session._recv(size) != expected:
            raise _Diverged("a timed round's answers differ from the verdict run's")
        return session

    def end(self, session: _Session) -> float:
        """End ``session``: returns once every process of that sandbox but its server is gone, with the
        processor time all of the session's processes used (measured by the server)."""
        session.sock.close()
        nonce = os.urandom(8).hex()
        try:
            self.ctl.send(_wire.dumps({"op": "end", "nonce": nonce}).encode())
        except OSError:
            raise _Poison("the server is gone") from None
        while True:
            self._wait([self.ctl.fileno()])
            event = self._event()
            if event.get("event") == "clean" and event.get("nonce") == nonce:
                cpu = event.get("cpu")
                if not isinstance(cpu, (int, float)) or isinstance(cpu, bool) or not 0 <= cpu < 1e6:
                    raise _Poison("malformed clean message")
                return float(cpu)


class _Session:
    def __init__(self, server: _Server, sock: _socket.socket) -> None:
        self.server = server
        self.sock = sock
        self.classes: dict[str, type] = {}
        self.kinds: dict[type, str] = {}
        self.failure: str | None = None
        self.wrong: str | None = None
        # Per request: whether the answer held an object of the program's (a handle); ``expected`` is the
        # reference's sequence for the same tests, where the job has one.
        self.shapes: list[bool] = []
        self.expected: list[bool] | None = server.expected
        self.handles = 0
        self.attributes: dict[str, frozenset[str]] = {}
        self.passed = 0  # asserts of the test code passed so far
        # What a timed round replays: every request frame sent and every reply received, in order (None
        # once they pass ``_wire.MAX_BATCH``: such a suite is not timed).
        self.sent: list[bytes] | None = []
        self.received: list[bytes] | None = []
        self.recorded = 0

    def record(self, log: list[bytes] | None, frame: bytes) -> None:
        self.recorded += len(frame)
        if log is not None and self.recorded <= _wire.MAX_BATCH:
            log.append(frame)
        else:
            self.sent = self.received = None

    def recording(self) -> tuple[bytes, bytes]:
        """The batch a timed round sends and the answers it must get back."""
        if self.sent is None or self.received is None:
            raise _Diverged("the suite's requests and answers are too large to replay")
        return b"".join(self.sent), b"\n".join(self.received)

    def count(self) -> None:
        self.passed += 1

    def _recv(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            ready = self.server._wait([self.sock.fileno(), self.server.ctl.fileno()])
            if self.sock.fileno() in ready:
                chunk = self.sock.recv(min(size - len(data), 1 << 20))
                if not chunk:
                    self.server.pending()
                    self.poison("the candidate's process ended")
                data += chunk
            elif self.server.ctl.fileno() in ready:
                self.server._event()
                if self.server.exited:
                    # Whatever the process wrote before it ended is still readable; take it first.
                    self.sock.setblocking(False)
                    try:
                        while len(data) < size:
                            chunk = self.sock.recv(min(size - len(data), 1 << 20))
                            if not chunk:
                                break
                            data += chunk
                    except BlockingIOError:
                        pass
                    if len(data) < size:
                        self.poison("the candidate's process ended")
                    self.sock.setblocking(True)
        return bytes(data)

    def send_raw(self, payload: bytes) -> None:
        try:
            self.sock.sendall(_HEADER.pack(len(payload)) + payload)
        except OSError:
            self.poison("the candidate's process ended")

    def poison(self, reason: str) -> None:
        self.failure = self.failure or reason
        raise _Poison(reason)

    def remote(self, item: Any) -> int | None:
        """The handle of one of this session's proxies (anything else is not sent)."""
        if type(item) is _Remote and object.__getattribute__(item, "_session") is self:
            handle: int = object.__getattribute__(item, "_handle")
            return handle
        return None

    def exchange(self, message: tuple[Any, ...] | None) -> Any:
        if self.failure is not None:
            raise _Poison(self.failure)
        if message is not None:
            try:
                payload = _wire.encode(message, self.kinds, self.remote)
            except _wire.NotPlain as exc:
                raise TypeError(f"argument is not plain data: {exc}") from None
            frame = _HEADER.pack(len(payload)) + payload
            try:
                self.sock.sendall(frame)
            except OSError:
                self.poison("the candidate's process ended")
            self.record(self.sent, frame)
        header = self._recv(4)
        (size,) = _HEADER.unpack(header)
        if size > _wire.MAX_BYTES:
            self.poison("oversized reply")
        data = self._recv(size)
        self.record(self.received, data)
        try:
            reply = _wire.decode(data, self.classes, handle=self.proxy, attributes=self.attributes)
        except _wire.WireError as exc:
            self.poison(f"malformed reply: {exc}")
        if type(reply) is not tuple or not reply or type(reply[0]) is not str:
            self.poison("malformed reply")
        if reply[0] == "lane_error":  # lane failures come on the server's channel, never from a session
            self.poison("a session claimed a lane failure")
        return reply

    def proxy(self, handle: int) -> _Remote:
        self.handles += 1
        return _Remote(self, handle)

    def request(self, message: tuple[Any, ...]) -> Any:
        if self.wrong is not None:
            raise _Shape(self.wrong)
        self.handles = 0
        reply = self.exchange(message)
        index = len(self.shapes)
        self.shapes.append(self.handles > 0)
        expected = self.expected
        if self.handles and expected is not None and index < len(expected) and not expected[index]:
            # The test code would ask the program's object what it asked the reference's plain value:
            # an object that answers ``in``, ``==`` or ``startswith`` for itself is not an answer.
            self.wrong = (
                f"request {index}: an object of the program's where the reference returned plain data"
            )
            raise _Shape(self.wrong)
        tag = reply[0]
        if tag == "v" and len(reply) == 2:
            return reply[1]
        if tag == "e" and len(reply) == 3 and type(reply[1]) is str and type(reply[2]) is str:
            if reply[1] == "NotPlain":
                self.poison(reply[2])
            raise CandidateError(reply[1], reply[2])
        if (
            tag == "p"
            and len(reply) == 3
            and type(reply[2]) is str
            and _PROTOCOL_OPS.get(message[0]) == reply[1]
        ):
            # Only for what a builtin asked of an object (never for a call of the program's function,
            # whose TypeError stays a CandidateError like any exception of the program's).
            raise _PROTOCOL_ERRORS[reply[1]](reply[2])
        if tag == "x":
            self.poison("the candidate called exit()")
        self.poison("malformed reply")
        raise AssertionError("unreachable")

    def load(self, judge_classes: dict[str, type]) -> tuple[dict[str, int], list[str]]:
        """Load the program: its callable top-level names (with their handles) and its names bound to
        modules."""
        self.classes = judge_classes
        self.kinds = {cls: name for name, cls in judge_classes.items()}
        self.attributes = {name: _fresh_attributes(cls) for name, cls in judge_classes.items()}
        reply = self.exchange(None)
        if (
            reply[0] == "ready"
            and len(reply) == 3
            and type(reply[1]) is dict
            and all(type(k) is str and type(v) is int for k, v in reply[1].items())
            and type(reply[2]) is list
            and all(type(name) is str for name in reply[2])
        ):
            return reply[1], reply[2]
        if reply[0] == "load_error" and len(reply) == 4 and reply[1] == "x":
            self.poison("the program called exit() while loading")
        if reply[0] == "load_error":
            self.poison(f"the program failed to load: {str(reply[2:])[:300]}")
        self.poison("malformed ready message")
        raise AssertionError("unreachable")


_GENERATOR = type(_wire._replay([], None))


class _Remote:
    """A function, class or object that lives in the candidate's process; every use is a request, and
    what comes back is plain data or another handle. Equality and hashing are by identity (an object of
    the candidate's is never equal to the judge's values), truth is refused."""

    __slots__ = ("_handle", "_session")

    def __init__(self, session: _Session, handle: int) -> None:
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_handle", handle)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._session.request(("call", self._handle, args, kwargs))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._session.request(("getattr", self._handle, name))

    def __setattr__(self, name: str, value: Any) -> None:
        if type(name) is not str or name.startswith("__"):
            raise AttributeError(name)
        self._session.request(("setattr", self._handle, name, value))

    def __setitem__(self, key: Any, value: Any) -> None:
        self._session.request(("setitem", self._handle, key, value))

    def __str__(self) -> str:
        text = self._session.request(("str", self._handle))
        if type(text) is not str:
            raise TypeError("__str__ returned a non-string")
        return text

    def __iter__(self) -> Any:
        items = self._session.request(("iter", self._handle))  # a generator over the drained items
        if type(items) is not _GENERATOR:
            raise TypeError("iter() returned a non-iterator")
        return items

    def __len__(self) -> int:
        size = self._session.request(("len", self._handle))
        if type(size) is not int or size < 0:
            raise TypeError("bad length")
        return size

    def __getitem__(self, key: Any) -> Any:
        return self._session.request(("getitem", self._handle, key))

    def __contains__(self, item: Any) -> bool:
        answer = self._session.request(("contains", self._handle, item))
        if type(answer) is not bool:
            raise TypeError("bad membership answer")
        return answer

    def __bool__(self) -> bool:
        raise TypeError("the truth value of an object of the candidate's is not decided by the judge")

    def __repr__(self) -> str:
        return "<candidate object>"


def _fresh_attributes(cls: type) -> frozenset[str]:
    """The attributes an instance of the judge's dataset class has: those of ``cls()`` where it can be
    made without arguments (``ListNode()``, ``TreeNode()``), else those its ``__init__`` methods assign
    to ``self`` (and its ``__slots__``)."""
    names: set[str] = set()
    try:
        names.update(vars(cls()))
    except Exception:  # noqa: BLE001 - needs arguments: read its __init__ methods instead
        import dis

        for klass in cls.__mro__:
            init = vars(klass).get("__init__")
            code = getattr(init, "__code__", None)
            if code is not None:
                names.update(i.argval for i in dis.get_instructions(code) if i.opname == "STORE_ATTR")
    for klass in cls.__mro__:
        slots = vars(klass).get("__slots__", ())
        names.update((slots,) if isinstance(slots, str) else slots)
    return frozenset(name for name in names if type(name) is str)


def _read_names(tree: _ast.AST) -> set[str]:
    """Every name the code reads anywhere (``Name`` nodes in a load context)."""
    return {n.id for n in _syntax.nodes(tree) if isinstance(n, _ast.Name) and isinstance(n.ctx, _ast.Load)}


_PASSED = "__judge_assert_passed__"


def _count_asserts(tree: _ast.Module) -> _ast.Module:
    """The test code with a call of ``__judge_assert_passed__()`` after every ``assert``: how many of the
    tests' asserts a program passed before the first that failed (the hardened profile pays AST
    similarity to a failing program in that proportion of the reference's count)."""
    for node, field in _syntax.statement_lists(tree):
        counted: list[_ast.AST] = []
        for statement in getattr(node, field):
            counted.append(statement)
            if isinstance(statement, _ast.Assert):
                name = _ast.Name(_PASSED, _ast.Load())
                value = _ast.Call(name, [], [])
                call = _ast.Expr(value)
                for item in (call, value, name):
                    for attribute in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
                        setattr(item, attribute, getattr(statement, attribute))
                counted.append(call)
        setattr(node, field, counted)
    return tree


def _called_names(tree: _ast.AST) -> set[str]:
    """Names the code calls directly (``Name(...)``)."""
    return {
        n.func.id for n in _syntax.nodes(tree) if isinstance(n, _ast.Call) and isinstance(n.func, _ast.Name)
    }


def _top_level(tree: _ast.AST, *, classes_only: bool = False) -> tuple[set[str], dict[str, str]]:
    """Names a module binds at its top level (also inside top-level ``if``/``try``): those it defines
    (``def``, ``class``, assignments) and those it imports (name -> the import statement binding it);
    ``classes_only``: only its ``class`` statements."""
    defined: set[str] = set()
    imported: dict[str, str] = {}
    pending = list(getattr(tree, "body", ()))
    while pending:
        node = pending.pop()
        if classes_only:
            if isinstance(node, _ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, (_ast.If, _ast.Try, _ast.With)):
                pending.extend(getattr(node, "body", ()))
            continue
        if isinstance(node, (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (_ast.Assign, _ast.AnnAssign, _ast.AugAssign)):
            targets = node.targets if isinstance(node, _ast.Assign) else [node.target]
            for target in targets:
                stack = [target]
                while stack:
                    item = stack.pop()
                    if isinstance(item, _ast.Name):
                        defined.add(item.id)
                    elif isinstance(item, (_ast.Tuple, _ast.List, _ast.Starred)):
                        stack.extend(item.elts if not isinstance(item, _ast.Starred) else [item.value])
        elif isinstance(node, _ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                imported[bound] = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
        elif isinstance(node, _ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                if alias.name != "*":
                    imported[alias.asname or alias.name] = f"from {node.module} import {alias.name}" + (
                        f" as {alias.asname}" if alias.asname else ""
                    )
        elif isinstance(node, (_ast.If, _ast.Try, _ast.With)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for item in getattr(node, field, ()):
                    pending.extend(item.body if isinstance(item, _ast.ExceptHandler) else [item])
    return defined, imported


def _parse(text: str, name: str) -> _ast.Module:
    tree = compile(text, name, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
    if not isinstance(tree, _ast.Module):
        raise TypeError("not a module")
    return tree


class _Job:
    def __init__(self, job: dict[str, Any], deadline: float) -> None:
        self.job = job
        self.kind = job.get("kind", "check")
        self.deadline = deadline
        self.entry_top = str(job.get("entry_top") or "")

    def compile_all(self, code: str) -> None:
        job = self.job
        self.prompt = compile(job.get("prompt") or "", "<prompt>", "exec", dont_inherit=True, optimize=0)
        compile(code, "<solution>", "exec", dont_inherit=True, optimize=0)
        if self.kind == "check":
            tree = _parse(job["test"], "<test>")
            self.test = compile(
                _count_asserts(_parse(job["test"], "<test>")), "<test>", "exec", dont_inherit=True, optimize=0
            )
            self.entry = compile(job["entry_point"], "<test>", "eval", dont_inherit=True, optimize=0)
            defined, imported = _top_level(tree)
            # The names the test code reads that neither it, the prompt nor the builtins provide: where
            # the dataset's convention calls the program's names directly (MBPP), these are them.
            self.wanted = _read_names(tree) - defined - set(imported) - _BUILTIN_NAMES
            self.reference: tuple[set[str], dict[str, str]] | None = None
            # Classes the test code builds itself (``Pair(5, 24)``): where the reference defines them, the
            # program's own class is the one its entry point expects.
            self.constructed = _called_names(tree)
            self.reference_classes: set[str] = set()
            self.reference_code: Any = None
            if job.get("reference"):
                try:
                    reference_tree = _parse(job["reference"], "<reference>")
                    self.reference = _top_level(reference_tree)
                    self.reference_classes = _top_level(reference_tree, classes_only=True)[0]
                    self.reference_code = compile(reference_tree, "<reference>", "exec", dont_inherit=True)
                except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
                    self.reference = None
        else:
            self.cases = [(str(case["input"]), str(case["output"])) for case in job["tests"]]
            stated = job.get("tolerance")
            self.tolerance = float(stated) if isinstance(stated, (int, float)) and stated > 0 else None

    def namespace(self, session: _Session) -> dict[str, Any]:
        """The test code's globals: the prompt's names and the real builtins, then the program's entry
        point, and of the other names the test code reads only those the dataset's convention gives the
        program. With a reference solution: a class it defines that the test code builds is the program's
        (a proxy); any other name it defines (a helper predicate such as ``is_sorted``) is the
        reference's, run here; a name it imports is imported here by the reference's own statement
        (never the program's module or function). Without one, nothing tells a helper the tests expect from an import (``isclose``)
        from one they expect the program to define: only a name the program binds to a module is
        imported here, by that name; no other name is bound."""
        prompt: dict[str, Any] = {"__name__": _MODULE, "__builtins__": builtins}
        exec(self.prompt, prompt)  # its helpers keep these globals: no program name ever reaches them
        names, modules = session.load(_wire.prompt_classes(prompt, _MODULE))
        namespace = dict(prompt)
        helpers: dict[str, Any] | None = None
        for name in sorted(self.wanted - set(prompt) - {self.entry_top}):
            if name.startswith("__"):
                continue
            if self.reference is not None:
                defined, imported = self.reference
                if name in imported:
                    try:
                        exec(compile(imported[name], "<reference>", "exec", dont_inherit=True), namespace)
                    except Exception:  # noqa: BLE001, S110 - the test then fails as it would for anyone
                        pass
                elif name in defined and (
                    (name in self.reference_classes and name in self.constructed)
                    or self.entry_top not in defined
                ):
                    # A class the test builds; or, where the entry point is not one of the reference's
                    # names (an MBPP verifier whose entry point is ``list`` from ``list(f(x))``), every
                    # name the reference defines, as before issue 34: then nothing tells the task's
                    # function from a helper, and a helper of the reference's would leave it untested.
                    if name in names:
                        namespace[name] = _Remote(session, names[name])
                elif name in defined:
                    helpers = self.reference_helpers() if helpers is None else helpers
                    if name in helpers:
                        namespace[name] = helpers[name]
            elif name in modules:
                try:
                    namespace[name] = __import__(name)
                except Exception:  # noqa: BLE001, S110 - not a module this judge has: left unbound
                    pass
        if self.entry_top in names:
            # The entry point may replace the prompt's definition (HumanEval's prompt holds its stub),
            # in the test code's globals only.
            namespace[self.entry_top] = _Remote(session, names[self.entry_top])
        return namespace

    def reference_helpers(self) -> dict[str, Any]:
        """The reference solution's own names, from a run of it here (the dataset's code, trusted as the
        test code is), with the prompt's names and the real builtins."""
        helpers: dict[str, Any] = {"__name__": "__reference__", "__builtins__": builtins}
        try:
            exec(self.prompt, helpers)
            exec(self.reference_code, helpers)
        except Exception:  # noqa: BLE001, S110 - what it defined before failing is still there
            pass
        return helpers

    def suite(self, server: _Server) -> tuple[list[_Session], Callable[[], float | None]]:
        """One round: a callable that opens a fresh session, loads the program and runs the tests, and the
        list that will hold the session. Loading is inside the round, so work moved to import time is
        timed too (both for the candidate and the reference)."""
        sessions: list[_Session] = []
        if self.kind != "check":
            return sessions, lambda: self.run_cases(server)

        def run() -> float | None:
            session = server.session("module")
            sessions.append(session)
            namespace = self.namespace(session)
            namespace[_PASSED] = session.count
            exec(self.test, namespace)
            candidate = eval(self.entry, namespace)
            namespace["check"](candidate)
            if session.failure is not None:
                raise _Poison(session.failure)
            if session.wrong is not None:
                raise _Shape(session.wrong)
            return None  # the session is still open: its processor time comes with end()

        return sessions, run

    def run_cases(self, server: _Server) -> float:
        cpu = 0.0
        for given, expected in self.cases:
            session = server.session("stdio")
            try:
                session.send_raw(given.encode())
                reply = session.exchange(None)
                if (
                    reply[0] != "out"
                    or len(reply) != 4
                    or type(reply[1]) is not bytes
                    or type(reply[3]) is not tuple
                ):
                    session.poison("malformed output message")
                status = reply[3]
                if status[:1] == ("e",):
                    raise CandidateError(str(status[1:2])[:100], str(status[2:])[:300])
                if status[:1] == ("x",) and status[1:] not in ((0,), (None,)):
                    raise CandidateError("SystemExit", f"the program exited with {status[1:]!r}")
                if reply[2] or not _same_output(
                    reply[1].decode("utf-8", "replace"), expected, self.tolerance
                ):
                    raise _WrongAnswer(f"wrong output for input {given[:80]!r}")
            finally:
                cpu += server.end(session)
        return cpu


def _classify(exc: BaseException) -> tuple[str, str]:
    text = f"{type(exc).__name__}: {exc}"[:500]
    if isinstance(exc, _LaneFault):
        return "lane", text
    if isinstance(exc, _Timeout):
        return "timeout", text
    if isinstance(exc, (_WrongAnswer, AssertionError, _Shape)):  # the program's own: CandidateError
        return "wrong_answer", text
    return "runtime_error", text


def _run_job(job_fd: int, candidate_fd: int, reference_fd: int) -> None:
    """One job, in a process of its own: the job arrives on a stream socket (until end-of-file), the
    records go back on it."""
    started = time.monotonic()
    channel = _socket.socket(fileno=job_fd)
    chunks = []
    while True:
        chunk = channel.recv(1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    job = _wire.loads(b"".join(chunks))
    del chunks

    def emit(record: dict[str, Any]) -> None:
        try:
            channel.sendall(_wire.dumps(record).encode() + b"\n")
        except Exception:  # noqa: BLE001, S110 - a closed channel just means no report
            pass

    deadline = started + float(job.get("seconds", 5.0))
    code = job["code"]
    try:
        if not code.strip():
            raise SyntaxError("empty program")
        tree = compile(code, "<unknown>", "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
        facts = _syntax.syntax_facts(tree, job)
        del tree
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        emit({"stage": "syntax", "ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]})
        return
    emit({"stage": "syntax", "ok": True, **facts})
    del facts
    runner = _Job(job, deadline)
    try:
        runner.compile_all(code)
    except BaseException as exc:  # noqa: BLE001 - any failure here is a compile failure
        emit({"stage": "compile", "ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]})
        return
    emit({"stage": "compile", "ok": True})

    saved_out, saved_err = sys.stdout, sys.stderr
    sink = io.StringIO()
    sys.stdout = sys.stderr = sink
    candidate = _Server(candidate_fd, deadline, job.get("prompt") or "", code)
    reference = None
    status, error, seconds = "passed", "", 0.0
    sessions: list[_Session] = []
    try:
        if runner.kind == "check" and job.get("reference"):
            reference = _Server(reference_fd, deadline, job.get("prompt") or "", job["reference"])
            candidate.expected = _reference_shapes(runner, reference, job, emit)
        sessions, suite = runner.suite(candidate)
        start = time.perf_counter()
        suite()
        seconds = time.perf_counter() - start
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt of test code included
        failure = next((s.failure for s in sessions if s.failure is not None), None)
        wrong = next((s.wrong for s in sessions if s.wrong is not None), None)
        if failure is not None and not isinstance(exc, (_Timeout, _LaneFault)):
            exc = _Poison(failure)
        elif wrong is not None and not isinstance(exc, (_Poison, _LaneFault)):
            exc = _Shape(wrong)
        status, error = _classify(exc)
    sys.stdout, sys.stderr = saved_out, saved_err
    if status == "lane":
        emit({"stage": "lane", "error": error})
        return
    passed = sessions[-1].passed if sessions else 0
    if job.get("record_shapes"):  # the reference as the program: what the scorer keeps per problem
        ok = status == "passed" and bool(sessions)
        emit(
            {
                "stage": "shapes",
                "shapes": sessions[-1].shapes if ok else None,
                "asserts": passed if ok else None,
            }
        )
    emit({"stage": "run", "status": status, "error": error, "seconds": seconds, "asserts": passed})
    timing = job.get("timing")
    if status != "passed" or not timing:
        return
    sys.stdout = sys.stderr = sink
    try:
        times = _time(runner, candidate, sessions, job, timing, reference)
    except BaseException as exc:  # noqa: BLE001 - a candidate that fails on a rerun gets no efficiency
        sys.stdout, sys.stderr = saved_out, saved_err
        text = f"{type(exc).__name__}: {exc}"[:500]
        emit({"stage": "lane" if isinstance(exc, _LaneFault) else "timing", "error": text})
        return
    sys.stdout, sys.stderr = saved_out, saved_err
    emit({"stage": "timing", **times})


def _reference_shapes(
    runner: _Job, reference: _Server, job: dict[str, Any], emit: Callable[[dict[str, Any]], None]
) -> list[bool] | None:
    """Which of the reference's answers held objects of its own, request by request, on the same tests:
    the job's (the scorer keeps them per problem), else from a run of the reference here (reported in a
    ``shapes`` record). None when the reference fails its own tests: then nothing is compared."""
    known = job.get("shapes")
    if isinstance(known, dict):
        shapes = known.get("shapes")
        return [bool(x) for x in shapes] if isinstance(shapes, list) else None
    sessions, suite = runner.suite(reference)
    result: list[bool] | None = None
    asserts = None
    try:
        suite()
        result = sessions[-1].shapes if sessions else None
        asserts = sessions[-1].passed if sessions else None
    except (_Timeout, _LaneFault):
        raise
    except BaseException:  # noqa: BLE001, S110 - a reference that fails its tests: no comparison
        pass
    for session in sessions:
        reference.end(session)
    emit({"stage": "shapes", "shapes": result, "asserts": asserts})
    return result


def _time(
    runner: _Job,
    candidate: _Server,
    sessions: list[_Session],
    job: dict[str, Any],
    timing: dict[str, Any],
    reference: _Server | None,
) -> dict[str, list[float] | None]:
    # A module suite's timed rounds replay its verdict run (``_Server.replay``); the stdio rounds rerun
    # the cases (each session gets its whole input before the program runs, and answers once).
    replays: dict[str, tuple[bytes, bytes] | None] = {"candidate": None, "reference": None}
    if runner.kind == "check":
        replays["candidate"] = sessions[-1].recording()
    for session in sessions:
        candidate.end(session)
    servers: dict[str, _Server | None] = {"candidate": candidate, "reference": None}
    if reference is not None:
        ref_sessions, ref_suite = runner.suite(reference)
        try:  # the reference must pass its own tests (this also warms it up, and is what it replays)
            ref_suite()
            if runner.kind == "check":
                replays["reference"] = ref_sessions[-1].recording()
            for session in ref_sessions:
                reference.end(session)
            servers["reference"] = reference
        except _LaneFault:
            raise
        except BaseException:  # noqa: BLE001 - without a working reference, the stored runtime is used
            servers["reference"] = None
    # Processor time of the session's processes, measured by each sandbox's server: socket round trips,
    # the judge's own work and other load on the machine stay out of it, which wall time would not.
    rounds, min_rounds, budget = int(timing["rounds"]), int(timing["min_rounds"]), float(timing["budget"])
    times: dict[str, list[float] | None] = {
        "candidate": [],
        "reference": [] if servers["reference"] is not None else None,
    }
    began = time.perf_counter()
    last_round = 0.0
    for index in range(rounds):
        if time.monotonic() + 2 * last_round + 0.05 > runner.deadline:
            break
        round_start = time.monotonic()
        order = ("candidate", "reference") if index % 2 == 0 else ("reference", "candidate")
        for who in order:
            server, bucket = servers[who], times[who]
            if server is None or bucket is None:
                continue
            recording = replays[who]
            if recording is not None:
                cpu = server.end(server.replay(recording))
            else:
                round_sessions, suite = runner.suite(server)
                cpu = suite() or 0.0
                for session in round_sessions:
                    cpu += server.end(session)
            bucket.append(cpu)
        last_round = time.monotonic() - round_start
        if index + 1 >= min_rounds and time.perf_counter() - began > budget:
            break
    return times


def _end_sessions(fds: tuple[int, ...]) -> bool:
    """Make sure no session of a finished job runs on (the job may have died before ending it)."""
    ok = True
    for fd in fds:
        server = _Server(fd, time.monotonic() + 3.0, "", "")
        try:
            nonce = os.urandom(8).hex()
            server.ctl.send(_wire.dumps({"op": "end", "nonce": nonce}).encode())
            while True:
                server._wait([server.ctl.fileno()])
                event = server._event()
                if event.get("event") == "clean" and event.get("nonce") == nonce:
                    break
        except (_Poison, OSError, ValueError):
            ok = False
        finally:
            server.ctl.detach()
    return ok


def _main() -> None:
    """The judge sandbox's PID 1: one forked process per job; after each, everything but itself is
    killed, ``/tmp`` emptied, the servers' sessions ended, and only then is the job reported done."""
    ctl = _socket.socket(fileno=int(os.environ["JUDGE_CTL_FD"]))
    servers = (int(os.environ["JUDGE_CANDIDATE_FD"]), int(os.environ["JUDGE_REFERENCE_FD"]))
    _zygote.nodump()
    _zygote.default_signals()
    import decimal  # noqa: F401 - for the stdin/stdout comparison, loaded once here rather than per job

    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    while True:
        message, fds = _zygote.recv_fds(ctl)
        if not message:
            return
        request = _wire.loads(message)
        if not fds:
            continue
        child = os.fork()
        if child == 0:
            ctl.close()
            try:
                _run_job(fds[0], *servers)
            finally:
                os._exit(0)
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(child)
        select.select([pidfd], [], [], float(request.get("seconds", 5.0)) + 1.0)
        os.close(pidfd)
        _zygote.clean(child)
        ok = _end_sessions(servers)
        ctl.send(_wire.dumps({"event": "done", "ok": ok}).encode())


if __name__ == "__main__":
    _main()
