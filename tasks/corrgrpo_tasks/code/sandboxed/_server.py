"""Candidate (or reference) server: runs as ``/sandbox/main.py`` in a sandbox of its own, PID 1 of it.

Only the program's own files are in this sandbox (``prompt.py``, ``program.py``, ``_wire.py``): no test,
no expected output, no reference, no verdict channel. The judge (another sandbox) talks to it over two
Unix sockets the scorer created:

* a control socket (``SERVER_FD``, ``SOCK_SEQPACKET``, JSON messages) held by this process only. The
  judge sends ``{"op": "start", "mode": "module" | "stdio"}`` with a fresh stream socket attached, and
  ``{"op": "end", "nonce": ...}``; this process answers ``{"event": "exit", "code": ...}`` when a session's
  process ends by itself and ``{"event": "clean", "nonce": ..., "cpu": seconds}`` once a session is wiped:
  ``cpu`` is the processor time (user + system) that every process of the session used, from the fork to
  the last one reaped -- this process reaps them all, being the namespace's init, and measures it with
  ``getrusage(RUSAGE_CHILDREN)``, which the program cannot reach, less the time of a session that runs
  nothing (measured at start-up). This is what efficiency compares.
* per session, that fresh stream socket, carrying length-prefixed ``_wire`` frames between the judge and a
  session process forked from here.

A timed round (``"mode": "replay"``) is the verdict run's requests again, with no traffic per call: this
process reads the program's texts and the whole batch of requests from the session's socket *before* it
forks the session (and decodes those that need neither the program's classes nor its handles), so none
is pending while the program runs and none of that work is the session's processor time; the session
answers them in order from memory (``_replay``) and sends every answer, one per line, in one frame after
the last call. The judge compares them with the verdict run's, byte for byte.

A session process is forked from this pristine process (nothing of the program has ever run here), runs
the prompt and the program in a fresh namespace and serves the judge's requests: calls on handles (the
program's top-level functions and classes, and every object it returns that is not plain data), with
plain data and handles in and out. Before any of that, the session is confined (``_zygote.Confinement``):
it is PID 1 of a PID namespace of its own (it cannot name, signal, trace or ``prlimit`` this server or
anything else), with its own fresh ``/tmp``, ``/dev/shm`` and ``/proc``, no capabilities, and a seccomp
filter that refuses creating processes (threads are allowed), ``execve``, sockets, pipes and sending
descriptors. So every instruction of a session runs in that one process, and its processor time reaches
this server's ``RUSAGE_CHILDREN`` when it is reaped -- threads, work at import time or after the last
call included -- and nothing of it is left for the next session. ``end`` kills every other process in the
namespace (``kill(-1)``), reaps them and only then reports ``clean``. This process makes itself
non-dumpable, sets every signal to its default action (so, as its namespace's init, nothing inside can
signal it) and runs as PID 1 of a PID namespace of its own, below the sandbox's, so that it may create one
per session.
"""

# Running the candidate is this file's purpose; the sandbox around it is the security boundary.
# No contextlib here (start-up cost): try/except/pass it is.
# ruff: noqa: S102, SIM105

from __future__ import annotations

import _socket
import builtins
import io
import os
import resource
import select
import struct
import sys
import types

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing, json and socket cost every server start-up more than the rest
    from typing import Any

sys.path.insert(0, os.path.dirname(__file__))  # /sandbox, or the unsafe mode's directory
import _wire  # type: ignore[import-not-found]
import _zygote  # type: ignore[import-not-found]

sys.path.pop(0)

_MODULE = "__solution__"
_WARM = (
    "typing",
    "collections",
    "heapq",
    "math",
    "bisect",
    "itertools",
    "functools",
    "string",
    "re",
    "random",
    "operator",
)
_STDOUT_CAP = 4 << 20
_HEADER = struct.Struct(">I")
_SMALL = 1 << 53  # _wire's bound on an int sent as one token
_CONFIG = "session.json"  # beside this file: {"confine": bool, "tmp_bytes", "shm_bytes", "tmp_inodes", "shm_inodes"}
_FILTER = "session.bpf"  # the session seccomp filter (struct sock_filter array); empty: none


def _frame(sock: _socket.socket, payload: bytes) -> None:
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def _recv_exact(sock: _socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(min(size - len(chunks), 1 << 20))
        if not chunk:
            raise EOFError
        chunks += chunk
    return bytes(chunks)


def _read_frame(sock: _socket.socket, limit: int = _wire.MAX_BYTES) -> bytes:
    (size,) = _HEADER.unpack(_recv_exact(sock, 4))
    if size > limit:
        raise EOFError
    return _recv_exact(sock, size)


# A request of at most this many bytes is decoded by the server before the session's fork; a bigger one
# (rare: its call's own work dwarfs its decoding) stays bytes, decoded by the session when its turn comes.
_PREDECODE = 1 << 16


def _receive_replay(fd: int) -> tuple[bytes, list[Any]] | None:
    """A timed round's texts and requests, read from its socket by the server *before* the session is
    forked: the program's texts, and the verdict run's requests as one batch (frames back to back),
    decoded here where they need neither the program's classes nor its handles (everything else is
    decoded by the session in turn). None when the judge's frames do not arrive in time."""
    sock = _socket.socket(fileno=fd)
    try:
        sock.settimeout(10.0)
        texts = _read_frame(sock)
        batch = _read_frame(sock, _wire.MAX_BATCH)
        sock.setblocking(True)
    except (OSError, EOFError):
        return None
    finally:
        sock.detach()
    requests: list[Any] = []
    position, end = 0, len(batch)
    while position + 4 <= end:
        (size,) = _HEADER.unpack_from(batch, position)
        frame = batch[position + 4 : position + 4 + size]
        position += 4 + size
        if size <= _PREDECODE:
            try:
                request = _wire.decode(frame)
            except _wire.WireError:
                request = frame  # a handle or a dataset object among the arguments: the session decodes it
            if (
                type(request) is tuple
                and len(request) == 4
                and request[0] == "call"
                and type(request[1]) is int
                and request[1] >= 0
                and type(request[2]) is tuple
                and request[3] == {}
            ):
                request = [request[1], request[2]]  # a plain call: _replay's short path
            requests.append(request)
            continue
        requests.append(frame)
    return texts, requests


class _Sink(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, chunk: Any) -> int:
        return len(chunk)


def _quiet() -> None:
    sys.stdout = sys.stderr = io.TextIOWrapper(
        io.BufferedWriter(_Sink()), encoding="utf-8", errors="replace", write_through=True
    )


# Requests whose builtin raises TypeError when the type lacks every one of these slots.
_PROTOCOL = {
    "len": (("__len__",), "has no len()"),
    "iter": (("__iter__", "__getitem__"), "is not iterable"),
    "contains": (("__contains__", "__iter__", "__getitem__"), "is not a container"),
    "getitem": (("__getitem__", "__class_getitem__"), "is not subscriptable"),
    "setitem": (("__setitem__",), "does not support item assignment"),
}


def _text(exc: BaseException) -> str:
    try:
        return str(exc)[:500]
    except BaseException:  # noqa: BLE001 - the program's exception may refuse str()
        return ""


def _error(exc: BaseException) -> tuple[Any, ...]:
    if isinstance(exc, SystemExit):
        code = exc.code
        return ("x", code if type(code) is int else (0 if code is None else 1))
    return ("e", type(exc).__name__[:100], _text(exc))


class _Session:
    def __init__(self, sock: _socket.socket, prompt: types.CodeType, program: types.CodeType) -> None:
        self.sock = sock
        self.handles: list[Any] = []
        self.namespace: dict[str, Any] = {"__name__": _MODULE, "__builtins__": builtins}
        self.prompt, self.program = prompt, program
        self.kinds: dict[type, str] = {}
        self.classes: dict[str, type] = {}
        self.outbox: list[bytes] | None = None  # replay mode: the answers, sent after the last call

    def send(self, message: tuple[Any, ...]) -> None:
        try:  # anything that is not plain data goes as a handle: the judge only ever holds a number
            payload = _wire.encode(message, self.kinds, self.handle)
        except _wire.NotPlain as exc:
            payload = _wire.encode(("e", "NotPlain", str(exc)[:200]))
        if self.outbox is None:
            _frame(self.sock, payload)
        else:  # payloads are ASCII JSON: a newline never occurs in one
            self.outbox.append(payload)

    def handle(self, value: Any) -> int:
        self.handles.append(value)
        return len(self.handles) - 1

    def target(self, index: int) -> Any:
        if type(index) is not int or not 0 <= index < len(self.handles):
            raise EOFError  # the judge never sends a handle it was not given
        return self.handles[index]

    def load(self) -> None:
        namespace = self.namespace
        exec(self.prompt, namespace)
        prompt_classes = _wire.prompt_classes(namespace, _MODULE)
        before = dict(namespace)
        exec(self.program, namespace)
        # Dataset classes (ListNode, TreeNode) travel by value: the prompt's class and the program's own
        # class of that name (solutions often define them again) both encode under the name.
        for name, cls in prompt_classes.items():
            self.kinds[cls] = name
            current = namespace.get(name)
            if isinstance(current, type):
                self.kinds[current] = name
                self.classes[name] = current
            else:
                self.classes[name] = cls
        # The judge binds only the names its test code uses (the entry point, and for MBPP-style tests the
        # names the dataset's reference defines): it gets a handle per callable name and the names bound to
        # modules (which it imports itself, never taking the program's).
        names, modules = {}, []
        for name, value in list(namespace.items()):
            if name.startswith("__") or (name in before and before[name] is value):
                continue
            if isinstance(value, types.ModuleType):
                modules.append(name)
            elif callable(value):
                names[name] = self.handle(value)
        self.send(("ready", names, modules))

    def serve(self) -> None:
        while True:
            try:
                frame = _read_frame(self.sock)
                request = _wire.decode(frame, self.classes, handle=self.target)
                if type(request) is not tuple or len(request) < 2:
                    return
                target = self.target(request[1])
            except (EOFError, _wire.WireError):
                return  # the judge closed the session (or, impossibly, sent garbage)
            self.send(_answer(request[0], target, request[2:]))

    def request(self, item: Any) -> bool:
        """One request of a timed round that is not a plain call (``_replay``'s general path)."""
        request = item
        try:
            if type(item) is bytes:
                request = _wire.decode(item, self.classes, handle=self.target)
            if type(request) is not tuple or len(request) < 2:
                return False
            target = self.target(request[1])
        except (EOFError, _wire.WireError):
            return False  # the answers stop here, and differ from the verdict run's
        self.send(_answer(request[0], target, request[2:]))
        return True

    def run_stdio(self) -> None:
        data = _read_frame(self.sock)
        # Input and output go through files in /tmp (capped by its size and RLIMIT_FSIZE), opened then
        # unlinked: raw descriptor reads and writes work too, and nothing else can open them.
        stdin_fd = os.open("/tmp/.stdin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.unlink("/tmp/.stdin")
        view = memoryview(data)
        while view:
            view = view[os.write(stdin_fd, view) :]
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        out_fd = os.open("/tmp/.stdout", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.unlink("/tmp/.stdout")
        os.dup2(stdin_fd, 0)
        os.dup2(out_fd, 1)
        os.close(stdin_fd)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="replace")
        status: tuple[Any, ...] = ("ok",)
        namespace = {"__name__": "__main__", "__builtins__": builtins}
        try:
            exec(self.prompt, namespace)
            exec(self.program, namespace)
        except BaseException as exc:  # noqa: BLE001
            status = _error(exc)
        try:
            sys.stdout.flush()
        except BaseException:  # noqa: BLE001, S110 - a closed stdout is the program's doing
            pass
        size = os.lseek(out_fd, 0, os.SEEK_END)
        os.lseek(out_fd, 0, os.SEEK_SET)
        output = os.read(out_fd, min(size, _STDOUT_CAP))
        _frame(self.sock, _wire.encode(("out", output, size > _STDOUT_CAP, status)))


def _answer(op: str, target: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """One request, in a frame of its own that holds no session: ``sys._getframe(1)`` of the
    program's function sees the request and its target only."""
    missing = _PROTOCOL.get(op)
    if missing is not None and not any(hasattr(type(target), slot) for slot in missing[0]):
        # The builtin the test code used (len, iter, in, []) would raise its own TypeError
        # here: so does the judge, rather than the program's CandidateError.
        return ("p", "TypeError", f"{type(target).__name__[:100]!r} object {missing[1]}")
    try:
        if op == "call":
            result = target(*args[0], **args[1])
        elif op == "getattr":
            result = getattr(target, args[0])
        elif op == "setattr":
            setattr(target, args[0], args[1])
            result = None
        elif op == "iter":
            result = iter(target)  # drained by the encoder
        elif op == "len":
            result = len(target)
        elif op == "getitem":
            result = target[args[0]]
        elif op == "setitem":
            target[args[0]] = args[1]
            result = None
        elif op == "contains":
            result = args[0] in target
        elif op == "str":
            result = str(target)
        else:
            return ("e", "ProtocolError", "unknown request")
    except AttributeError as exc:
        if op == "getattr" and type(exc) is AttributeError:  # hasattr() and getattr(x, n, d) see it
            return ("p", "AttributeError", _text(exc))
        return _error(exc)
    except BaseException as exc:  # noqa: BLE001 - the program's failures are reported, not fatal
        return _error(exc)
    return ("v", result)  # send() turns what is not plain data into handles


def _replay(session: _Session, requests: list[Any]) -> None:
    """A timed round: the verdict run's requests, in order, from memory; each answer goes to the
    session's outbox, which ``_session`` sends after the last one. A plain call (``[handle, args]``,
    decoded by the server) takes the shortest path Python has -- look the handle up, call, and for a
    small ``int`` format the answer -- so that a program that takes the loop over (it can: the batch is
    in its memory) has no cheaper loop to replace it with; every other request takes ``_answer``'s.
    The answers are the same bytes either way (``_wire.encode``'s own short path)."""
    handles = session.handles
    answer = session.outbox.append  # type: ignore[union-attr]
    small = _SMALL
    for item in requests:
        if type(item) is list:
            target = handles[item[0]]  # the server made [handle, args] only for a valid-looking handle
            try:
                result = target(*item[1])
            except BaseException as exc:  # noqa: BLE001 - reported, as _answer does
                session.send(_error(exc))
                continue
            if type(result) is int and -small < result < small:
                answer(b'["t",2,"s","v","i",%d]' % result)
            else:
                session.send(("v", result))
        elif not session.request(item):
            return


def _session(
    sock_fd: int, mode: str, confinement: Any, ctl: _socket.socket, preload: tuple[bytes, list[Any]] | None
) -> None:
    sock = _socket.socket(fileno=sock_fd)
    try:  # first of all, before the judge's texts are even read
        if confinement is not None:
            confinement.enter()
    except OSError as exc:
        # The sandbox's doing, not the program's: said on the server's control socket, which no session
        # holds once it is confined (a "lane_error" on the session's own socket is the program's forgery
        # and poisons the sample). The judge retries on a fresh lane.
        ctl.send(
            _wire.dumps({"event": "lane_error", "error": f"session confinement failed: {exc}"[:300]}).encode()
        )
        return
    ctl.close()
    # Nothing a session writes reaches the sandbox's own output (which outlives it): descriptors 1 and 2
    # go nowhere (stdio mode puts a file on 1).
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    try:  # the judge sends the texts first; they are compiled here, never in the server itself
        prompt_text, program_text = _wire.decode(_read_frame(sock) if preload is None else preload[0])
        prompt = compile(prompt_text, "<prompt>", "exec", dont_inherit=True, optimize=0)
        program = compile(program_text, "<solution>", "exec", dont_inherit=True, optimize=0)
    except BaseException as exc:  # noqa: BLE001
        _frame(sock, _wire.encode(("load_error", *_error(exc))))
        return
    session = _Session(sock, prompt, program)
    if mode == "stdio":
        session.run_stdio()
        return
    _quiet()
    # The harness's modules are not the program's to find by name (the server keeps its own references).
    for name in ("_wire", "_zygote"):
        sys.modules.pop(name, None)
    sys.modules["__main__"] = types.ModuleType("__main__")
    if preload is not None:  # a timed round: every request is already in memory
        session.outbox = []
    try:
        session.load()
    except BaseException as exc:  # noqa: BLE001
        session.send(("load_error", *_error(exc)))
    else:
        if preload is None:
            session.serve()
            return
        _replay(session, preload[1])
    if session.outbox is not None:
        _frame(sock, b"\n".join(session.outbox))
        session.outbox = None
        while sock.recv(1 << 16):  # until the judge ends the round, as after the verdict run's last call
            pass


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class _Restrict:
    """Where no namespace can be made (the rlimits-only mode): the capability drop and the filter only."""

    def __init__(self, confinement: Any) -> None:
        self.confinement = confinement

    def before_fork(self) -> None:
        pass

    def after_fork(self) -> None:
        pass

    def enter(self) -> None:
        self.confinement.restrict()

    def take(self) -> int:
        return -1


def _null_session(confinement: Any) -> float:
    """Processor time of a session that runs nothing (confined fork, exit, reap): subtracted from every
    session's, so that efficiency compares the programs rather than the start-up of a session."""
    costs = []
    for _ in range(5):
        before = _cpu()
        if confinement is not None:
            confinement.before_fork()
        pid = os.fork()
        if pid == 0:
            try:
                if confinement is not None:
                    confinement.enter()
            finally:
                os._exit(0)
        if confinement is not None:
            confinement.after_fork()
        os.waitpid(pid, 0)
        costs.append(_cpu() - before)
        if confinement is not None and (namespace := confinement.take()) >= 0:
            os.close(namespace)  # as after a real session: the file systems go after the measurement
    return min(costs)


def _confinement(config: dict[str, Any]) -> Any:
    here = os.path.dirname(__file__)
    with open(os.path.join(here, _FILTER), "rb") as handle:
        bpf = handle.read()
    if not config.get("confine"):
        if not bpf:
            return None
        return _Restrict(
            _zygote.Confinement(bpf, tmp_bytes=0, shm_bytes=0, tmp_inodes=0, shm_inodes=0, namespaces=False)
        )
    sizes = {key: int(config[key]) for key in ("tmp_bytes", "shm_bytes", "tmp_inodes", "shm_inodes")}
    return _zygote.Confinement(bpf, **sizes)


def _main() -> None:
    ctl = _socket.socket(fileno=int(os.environ["SERVER_FD"]))
    with open(os.path.join(os.path.dirname(__file__), _CONFIG), "rb") as handle:
        config = _wire.loads(handle.read())
    try:
        if config.get("confine"):
            _zygote.own_pid_namespace()  # from here on, PID 1 of a namespace of our own
        confinement = _confinement(config)
    except OSError:
        os._exit(3)  # no confinement, no sessions: the lane fails and the scorer starts another
    os.chdir("/")
    _zygote.nodump()
    _zygote.default_signals()
    for module in _WARM:  # what prompts import: loaded once here, not in every session
        try:
            __import__(module)
        except ImportError:
            pass
    used = 0.0
    try:
        baseline = _null_session(confinement)
    except OSError:
        os._exit(3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    child = 0
    pidfd = -1
    while True:
        waiting = [ctl.fileno()] + ([pidfd] if pidfd >= 0 else [])
        ready, _, _ = select.select(waiting, [], [])
        if pidfd >= 0 and pidfd in ready:
            _, status = os.waitpid(child, 0)
            os.close(pidfd)
            pidfd = -1
            ctl.send(_wire.dumps({"event": "exit", "code": os.waitstatus_to_exitcode(status)}).encode())
            continue
        message, fds = _zygote.recv_fds(ctl)
        if not message:
            return
        request = _wire.loads(message)
        if request.get("op") == "start" and fds:
            mode = str(request.get("mode"))
            preload = _receive_replay(fds[0]) if mode == "replay" else None
            if mode == "replay" and preload is None:
                for fd in fds:
                    os.close(fd)  # the judge reads end-of-file: no round
                continue
            used = _cpu()
            try:
                if confinement is not None:
                    confinement.before_fork()
                child = os.fork()
            except OSError:
                os._exit(3)  # the sandbox cannot start sessions any more: the lane is replaced
            if child == 0:
                try:
                    # A session (and process group) of its own: kill(0, ...) reaches only itself, and so
                    # does a change of its scheduler autogroup (/proc/self/autogroup).
                    os.setsid()
                    _session(fds[0], mode, confinement, ctl, preload)
                finally:
                    os._exit(0)
            for fd in fds:
                os.close(fd)
            del preload  # the session has its own copy
            if confinement is not None:
                confinement.after_fork()
            pidfd = os.pidfd_open(child)
        elif request.get("op") == "end":
            for fd in fds:
                os.close(fd)
            if pidfd >= 0:
                os.close(pidfd)
                pidfd = -1
            _zygote.clean(child, wipe_tmp=not config.get("confine"))
            # Its mount namespace is still held by our descriptor: the session's file systems outlive it
            # until the close below.
            namespace = confinement.take() if confinement is not None and child else -1
            child = 0
            cpu = max(0.0, _cpu() - used - baseline)
            ctl.send(_wire.dumps({"event": "clean", "nonce": request.get("nonce"), "cpu": cpu}).encode())
            if namespace >= 0:
                os.close(namespace)  # the session's file systems go now, off the judge's critical path


if __name__ == "__main__":
    _main()
