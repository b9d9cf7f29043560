"""Issue 17: files no reward batch should be, read by ``corrgrpo explain``.

Each one gives one line naming the file and the problem, and exit status 2; never a traceback,
never a NaN table or a numpy warning (the test suite turns warnings into errors).
"""

from __future__ import annotations

import json
import os

import pytest


def _check_one_line(run_cli, path, *extra, message):
    code, out, err = run_cli("explain", str(path), *extra)
    assert code == 2, out
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"corrgrpo explain: error: {path}")
    assert message in lines[0]
    assert "Traceback" not in err


def test_binary_file(run_cli, tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(bytes(range(256)) * 4)
    _check_one_line(run_cli, path, message="binary data")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_utf16_file(run_cli, tmp_path, encoding):
    path = tmp_path / "r.csv"
    text = "group,r\ng,1\ng,2\n".encode(encoding)
    path.write_bytes(text if text[:2] in (b"\xff\xfe", b"\xfe\xff") else b"\xfe\xff" + text)
    _check_one_line(run_cli, path, message="UTF-16")


def test_latin1_file(run_cli, tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes("group,r\ncaf\u00e9,1\ng,2\n".encode("latin-1"))
    _check_one_line(run_cli, path, message="not UTF-8")


def test_garbage_parquet(run_cli, tmp_path):
    path = tmp_path / "r.parquet"
    path.write_bytes(b"PAR1" + os.urandom(300) + b"PAR1")
    _check_one_line(run_cli, path, message="unreadable Parquet file")


def test_csv_read_as_parquet(run_cli, write_csv):
    path = write_csv("group,r\ng,1\n")
    _check_one_line(run_cli, path, "--format", "parquet", message="is not a Parquet file")


def test_parquet_read_as_csv(run_cli, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "r.csv"
    pq.write_table(pa.table({"group": ["a"], "r": [1.0]}), path)
    _check_one_line(run_cli, path, message="is a Parquet file")


@pytest.mark.parametrize("digits", [400, 5000])
def test_huge_integers_in_jsonl(run_cli, tmp_path, digits):
    path = tmp_path / "r.jsonl"
    path.write_text('{"group": "g", "r": 1}\n{"group": "g", "r": ' + "9" * digits + "}\n")
    _check_one_line(run_cli, path, message="row 2 (line 2)")
    _code, _, err = run_cli("explain", str(path))
    assert "too large for a 64-bit float" in err


def test_deeply_nested_json(run_cli, tmp_path):
    # pyarrow infers nested types recursively (a line nested 20,000 deep crashes the process); the
    # reader always gives it a schema, under which it skips the keys it is not asked for
    path = tmp_path / "r.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    path.write_text('{"group": "g", "r": 1}\n{"group": "g", "r": 2, "x": ' + deep + "}\n")
    code, out, err = run_cli("explain", str(path))
    assert code == 0, err
    assert "2 rollouts, 1 group(s), 1 components (r)" in out
    path.write_text('{"group": "g", "r": 1}\n{"group": "g", "r": ' + deep + "}\n")
    _check_one_line(run_cli, path, message="row 2 (line 2): JSON nested too deeply")


def test_moderately_nested_json_and_brackets_in_strings_are_fine(run_cli, tmp_path):
    path = tmp_path / "r.jsonl"
    rows = [{"group": "g", "r": i, "x": json.loads("[" * 50 + "]" * 50), "s": "[" * 5000} for i in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _out, err = run_cli("explain", str(path), "--components", "r")
    assert code == 0, err


def test_200kb_csv_field(run_cli, write_csv):
    path = write_csv("group,r,note\ng,1," + "x" * 200_000 + "\ng,2,y\n")
    code, out, err = run_cli("explain", str(path), "--components", "r")
    assert code == 0, err
    assert "2 rollouts, 1 group(s)" in out
    _check_one_line(run_cli, path, message="row 1 (line 2): column 'note'")


def test_directory_named_csv(run_cli, tmp_path):
    path = tmp_path / "r.csv"
    path.mkdir()
    # a folder is read as a run; an empty one (or one holding no logs) is named as such
    _check_one_line(run_cli, path, message="is a folder with no verl rollout dumps")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_named_csv(run_cli, tmp_path):
    path = tmp_path / "r.csv"
    os.mkfifo(path)
    _check_one_line(run_cli, path, message="is a FIFO")


@pytest.mark.parametrize("value", ["1e308", "-1.7e308", "1e200"])
def test_values_that_overflow_the_statistics(run_cli, write_csv, value):
    path = write_csv(f"group,r1,r2\ng,{value},1\ng,0,2\ng,1,0\n")
    _check_one_line(run_cli, path, message="overflow the float64 statistics")
    _code, _, err = run_cli("explain", str(path))
    assert "component 'r1', row 1" in err


def test_large_but_safe_values_are_fine(run_cli, write_csv):
    code, out, err = run_cli("explain", str(write_csv("group,r1,r2\ng,1e100,1\ng,0,2\ng,1,0\n")))
    assert code == 0, err
    assert "nan" not in out


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("{tmp}/file.csv/plot.png", "cannot create the folder"),
        ("{tmp}/plot.xyz", "use a .png, .pdf or .svg"),
        ("{tmp}", "is a folder"),
    ],
)
def test_bad_plot_targets_fail_before_any_work(run_cli, tmp_path, target, message):
    (tmp_path / "file.csv").write_text("x")
    code, out, err = run_cli("explain", "--example", "--plot", target.format(tmp=tmp_path))
    assert code == 2
    assert out == ""
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_plot_into_a_missing_folder_creates_it(run_cli, tmp_path):
    png = tmp_path / "new" / "deeper" / "fig.png"
    code, _out, err = run_cli("explain", "--example", "--plot", str(png))
    assert code == 0, err
    assert png.is_file()
