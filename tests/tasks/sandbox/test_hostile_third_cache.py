"""The third adversary's page-cache family (issue 34): a later sample reads what an earlier one left in the
host's page cache, without timing, and passes without solving anything.

The writer is honest (it returns the answer, which it knows) and, in every session, also marks the answer
in a rarely read shared file: it touches one page per 1 bit (``MADV_RANDOM``: no read-ahead, exactly that
page is loaded). A reader solves nothing: it finds the writer's marks by one residency probe per page --
fault-around after touching the page before (``/proc/self/statm``, ``/proc/self/smaps``, or
``/proc/self/pagemap`` after making itself dumpable again), legacy AIO with ``RWF_NOWAIT``, the major-fault
counter, the storage bytes of ``/proc/self/io``, the time of a touch, or the direct probes the first
filter already refuses (``mincore``, ``preadv2(RWF_NOWAIT)``) -- and returns what it found. Against the tree before the private file view,
the statm, smaps and pagemap readers passed both later samples, the timing, AIO and major-fault readers
the first (docs/tasks/code.md, "Residual risk"); now the session's files are copies in memory, every page
is always resident, and each reader gets 0. Honest programs importing the standard library's extension
modules (and numpy, when named) keep their score.
"""

from __future__ import annotations

import pytest

from corrgrpo_tasks.code import compute_score, score_batch
from corrgrpo_tasks.sandbox import Sandbox

SECRET = 4321  # 13 bits; only a program that computes it (the reference does) or finds it passes
NUMBER = {
    "prompt": "",
    "entry_point": "Solution().solve",
    "test": f"def check(candidate):\n    assert candidate() == {SECRET}\n",
    "reference_solution": f"class Solution:\n    def solve(self):\n        return {SECRET}\n",
}

# Shared by writer and readers: the largest library every sandbox can map, cut into regions of 15 slots
# (a flag, then 14 bits), each slot a sacrificial page and the data page after it. Writer and reader of a
# case meet in the region of the current five minutes for that case: bits once set stay set until the host
# evicts them, so each window of each case starts clean (pages nobody else reads).
COMMON = """
import mmap, os, resource, time
P = 4096
DIR = '/usr/lib/x86_64-linux-gnu'
NAME = max(sorted(os.listdir(DIR)), key=lambda n: os.stat(DIR + '/' + n).st_size if os.path.isfile(DIR + '/' + n) else 0)
PATH = os.path.realpath(DIR + '/' + NAME)
FD = os.open(PATH, os.O_RDONLY)
PAGES = os.fstat(FD).st_size // P
BASE = PAGES // 4
REGIONS = min(144, (PAGES - BASE) // 30)
REGION = (int(time.time()) // 300 * {cases} + {index}) % REGIONS

def window(page, count):
    m = mmap.mmap(FD, count * P, prot=mmap.PROT_READ, offset=page * P)
    m.madvise(mmap.MADV_RANDOM)
    return m

def address(page):
    offset = '%08x' % (page * P)
    for line in open('/proc/self/maps'):
        f = line.split()
        if len(f) >= 6 and f[1] == 'r--s' and f[2] == offset and f[5] == PATH:
            return int(f[0].split('-')[0], 16)
    raise OSError('no such mapping')

def mark(page):
    m = window(page, 1)
    m[0]
    m.close()

def statm_cached(page):
    m = window(page - 1, 2)
    before = int(open('/proc/self/statm').read().split()[2])
    m[0]
    after = int(open('/proc/self/statm').read().split()[2])
    m.close()
    return after - before >= 2

def slot(region, k):
    return BASE + 30 * region + 2 * k + 1

def read(cached):
    if not cached(slot(REGION, 0)):
        return 0
    return sum(1 << (k - 1) for k in range(1, 15) if cached(slot(REGION, k)))
"""

WRITER = """
v = {secret}
try:
{common}
    if read(statm_cached) != v:
        for k in range(1, 15):
            if v >> (k - 1) & 1:
                mark(slot(REGION, k))
        mark(slot(REGION, 0))
except Exception:
    pass
return v
"""

READER = """
try:
{common}
{probe}
    return read(cached)
except Exception:
    return 0
"""

PROBES = {
    "statm_fault_around": "cached = statm_cached",
    "smaps_rss": """
def cached(page):
    m = window(page - 1, 2)
    m[0]
    head = '%x-' % address(page - 1)
    lines = open('/proc/self/smaps').read().splitlines()
    m.close()
    at = next(i for i, line in enumerate(lines) if line.startswith(head))
    return next(line for line in lines[at + 1:] if line.startswith('Rss:')).split()[1] == '8'
""",
    "pagemap_after_dumpable": """
import ctypes
ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE, 1
MAP = os.open('/proc/self/pagemap', os.O_RDONLY)

def cached(page):
    m = window(page - 1, 2)
    m[0]
    entry = int.from_bytes(os.pread(MAP, 8, (address(page - 1) // P + 1) * 8), 'little')
    m.close()
    return bool(entry >> 63)
""",
    "legacy_aio_nowait": """
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
CTX = ctypes.c_ulong(0)
if libc.syscall(206, 8, ctypes.byref(CTX)) != 0:  # io_setup
    raise OSError('io_setup refused')
BUF = ctypes.create_string_buffer(P)

def cached(page):
    iocb = ctypes.create_string_buffer(struct.pack('<QIIHhIQQqQII', 0, 0, 8, 0, 0, FD,
        ctypes.addressof(BUF), P, page * P, 0, 0, 0), 64)  # IOCB_CMD_PREAD, RWF_NOWAIT
    pointer = ctypes.c_void_p(ctypes.addressof(iocb))
    if libc.syscall(209, CTX, 1, ctypes.byref(pointer)) != 1:  # io_submit
        return False
    event = ctypes.create_string_buffer(32)
    libc.syscall(208, CTX, 1, 1, event, None)  # io_getevents
    return struct.unpack('<QQqq', event.raw)[2] == P
""",
    "major_fault_counter": """
def cached(page):
    m = window(page, 1)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    m[0]
    after = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    m.close()
    return after == before
""",
    "proc_self_io_read_bytes": """
def cached(page):
    m = window(page, 1)
    before = open('/proc/self/io').read().split('read_bytes:')[1].split()[0]
    m[0]
    after = open('/proc/self/io').read().split('read_bytes:')[1].split()[0]
    m.close()
    return after == before
""",
    "touch_timing": """
def cached(page):
    m = window(page, 1)
    start = time.perf_counter_ns()
    m[0]
    spent = time.perf_counter_ns() - start
    m.close()
    return spent < 10_000
""",
    "mincore": """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
VEC = ctypes.create_string_buffer(1)

def cached(page):
    m = window(page, 1)
    found = libc.mincore(ctypes.c_void_p(address(page)), P, VEC)
    m.close()
    if found != 0:
        raise OSError('mincore refused')
    return bool(VEC.raw[0] & 1)
""",
    "preadv2_nowait": """
def cached(page):
    try:
        return len(os.preadv(FD, [bytearray(P)], page * P, os.RWF_NOWAIT)) == P
    except BlockingIOError:
        return False
""",
}


def _indent(text: str) -> str:
    return "\n".join("    " + line if line else line for line in text.strip("\n").splitlines())


def _program(body: str) -> str:
    method = "\n".join("        " + line if line else line for line in body.strip("\n").splitlines())
    return f"```python\nclass Solution:\n    def solve(self):\n{method}\n```"


def _common(name: str) -> str:
    return _indent(
        COMMON.replace("{cases}", str(len(PROBES))).replace("{index}", str(sorted(PROBES).index(name)))
    )


def writer(name: str) -> str:
    return _program(WRITER.format(secret=SECRET, common=_common(name)))


def reader(name: str) -> str:
    return _program(READER.format(common=_common(name), probe=_indent(PROBES[name])))


HONEST = _program(
    "import bz2, decimal, fractions, hashlib, json, lzma, sqlite3, statistics, zlib, ctypes, ssl\n"
    "db = sqlite3.connect(':memory:')\n"
    "value = db.execute('select ?', (int(decimal.Decimal(4321)) * fractions.Fraction(1).numerator,)).fetchone()[0]\n"
    "blob = lzma.compress(bz2.compress(zlib.compress(json.dumps(value).encode())))\n"
    "assert hashlib.sha256(blob).hexdigest() and statistics.mean([value]) == value\n"
    "return json.loads(zlib.decompress(bz2.decompress(lzma.decompress(blob))))"
)


@pytest.mark.parametrize("name", sorted(PROBES))
def test_a_later_sample_reads_nothing_an_earlier_one_left_in_the_page_cache(name: str, box: Sandbox) -> None:
    """One worker, so one lane: the writer marks the answer, two readers look (in that lane, and again
    in the next sessions of it)."""
    del box
    scores = score_batch([writer(name), reader(name), reader(name)], [NUMBER] * 3, max_workers=1)
    assert [s["accuracy_reward"] for s in scores] == [1.0, 0.0, 0.0], scores
    assert [s["sandbox_error"] for s in scores] == [0.0, 0.0, 0.0], scores


def test_honest_programs_using_the_standard_librarys_extension_modules_keep_their_score(box: Sandbox) -> None:
    del box
    result = compute_score("x", HONEST, NUMBER)
    assert result["accuracy_reward"] == 1.0, result


def test_an_honest_numpy_program_keeps_its_score_with_the_package_named(box: Sandbox) -> None:
    del box
    pytest.importorskip("numpy")
    program = _program("import numpy\nreturn int(numpy.arange(4322).sum() * 2 // 4322)")
    result = compute_score("x", program, NUMBER, sandbox_packages=("numpy",))
    assert result["accuracy_reward"] == 1.0, result


def test_a_session_sees_only_memory_backed_files_and_cannot_become_dumpable(box: Sandbox) -> None:
    """What the readers meet, from inside a session: /usr and the linker's cache are copies in memory
    (tmpfs), nothing of /usr beyond the interpreter's view, PR_SET_DUMPABLE and legacy AIO refused."""
    del box
    body = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.syscall.restype = ctypes.c_long\n"
        "top = {}\n"
        "for line in open('/proc/self/mountinfo'):\n"
        "    f = line.split()\n"
        "    top[f[4]] = f[f.index('-') + 1]\n"
        "ctx = ctypes.c_ulong(0)\n"
        "refused = libc.prctl(4, 1, 0, 0, 0) != 0 and libc.syscall(206, 1, ctypes.byref(ctx)) != 0\n"
        "refused = refused and libc.prctl(3, 0, 0, 0, 0) == 0 and libc.prctl(4, 0, 0, 0, 0) == 0\n"
        "view = top.get('/usr') == 'tmpfs' and top.get('/etc/ld.so.cache') == 'tmpfs'\n"
        "hidden = not os.path.exists('/usr/bin/env') and os.path.exists(os.__file__)\n"
        "return 4321 if refused and view and hidden else (refused, view, hidden)"
    )
    result = compute_score("x", _program(body), NUMBER)
    assert result["accuracy_reward"] == 1.0, result


def test_a_private_view_holds_only_memory_and_keeps_no_capability_it_was_not_asked_for(box: Sandbox) -> None:
    """``Sandbox.start(private_files=True)`` outside the judge: the pre-stage's ``CAP_SYS_ADMIN`` is gone,
    every host bind is covered by a tmpfs copy, the interpreter runs from it, legacy AIO is refused."""
    show = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.syscall.restype = ctypes.c_long\n"
        "top = {}\n"
        "for line in open('/proc/self/mountinfo'):\n"
        "    f = line.split()\n"
        "    top[f[4]] = f[f.index('-') + 1]\n"
        "exe = [l.split()[-1] for l in open('/proc/self/maps') if l.split()[-1] == os.path.realpath('/proc/self/exe')]\n"
        "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0], top['/usr'],\n"
        "      top['/etc/ld.so.cache'], os.path.exists('/usr/bin/env'), bool(exe),\n"
        "      libc.syscall(206, 1, ctypes.byref(ctypes.c_ulong(0))) != 0)\n"
    )
    plain = box.run(show)
    private = box.start(show, private_files=True).wait()
    assert plain.ok, plain.stderr
    assert plain.stdout.split()[3] == "True", plain  # the host's /usr, without the view
    assert private.ok, private.stderr
    assert private.stdout.split() == ["0000000000000000", "tmpfs", "tmpfs", "False", "True", "True"], private
