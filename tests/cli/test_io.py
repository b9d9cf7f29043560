"""Reading reward batches: the four formats, byte-order marks, CRLF, and an error that names the row for every bad file."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from corrgrpo_core.cli.explain import EXAMPLE
from corrgrpo_core.cli.io import CliError, parse_weights, read_rewards
from corrgrpo_core.cli.tables import markdown_table


def test_csv_round_trip(write_csv, fig2_csv):
    batch = read_rewards(write_csv(fig2_csv), group_col="prompt")
    assert batch.components == ("r1", "r2", "r3")
    np.testing.assert_array_equal(batch.scores, EXAMPLE)
    assert batch.group_labels == ("p0",)
    np.testing.assert_array_equal(batch.group_ids, [0, 0, 0, 0])


def test_jsonl_groups_in_first_appearance_order_and_bools(write_jsonl):
    rows = [
        {"group": "b", "ok": True, "len": 3},
        {"group": "a", "ok": False, "len": 1},
        {"group": "b", "ok": False, "len": 2, "note": "ignored extra key"},
    ]
    batch = read_rewards(write_jsonl(rows), components=["ok", "len"])
    assert batch.group_labels == ("b", "a")
    np.testing.assert_array_equal(batch.group_ids, [0, 1, 0])
    np.testing.assert_array_equal(batch.scores, [[1, 3], [0, 1], [0, 2]])


def test_integer_group_ids_and_blank_lines(write_csv):
    batch = read_rewards(write_csv("group,r\n7,1\n\n7,2\n3,0\n"))
    assert batch.group_labels == ("7", "3")
    np.testing.assert_array_equal(batch.scores[:, 0], [1, 2, 0])


def test_nan_allowed_only_when_asked(write_csv):
    path = write_csv("group,r1,r2\ng,1,\ng,2,3\n")
    with pytest.raises(CliError, match=r"row 1 \(line 2\): column 'r2': missing value"):
        read_rewards(path)
    batch = read_rewards(path, allow_nan=True)
    assert math.isnan(batch.scores[0, 1])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("prompt,r1\np,1\n", r"group column 'group' not found; columns are \['prompt', 'r1'\]"),
        ("group,r1\ng,1\ng,abc\n", r"row 2 \(line 3\): column 'r1': 'abc' is not a number"),
        ("group,r1\ng,1\n,2\n", r"row 2 \(line 3\): empty group label in column 'group'"),
        ("group,r1\ng,1,5\n", r"row 1 \(line 2\): 3 fields, but the header has 2"),
        ("group,r1\ng,inf\n", r"row 1 \(line 2\): column 'r1': 'inf' is infinite"),
        ("group,r1\ng,nan\n", r"row 1 \(line 2\): column 'r1': NaN"),
        ("group,r1\ng,1e308\ng,1e308\ng,inf\n", r"row 3 \(line 4\): column 'r1': 'inf' is infinite"),
        ("group,r1\ng,1\ng,9007199254740993\n", r"column 'r1': cannot read as numbers"),
        ("group,r1\n", r"no data rows"),
        ("", r"the file is empty"),
        ("group\ng\n", r"no reward columns besides the group column 'group'"),
    ],
)
def test_csv_errors_name_the_row(write_csv, text, message):
    with pytest.raises(CliError, match=message):
        read_rewards(write_csv(text))


def test_numbers_of_every_plain_type_read_exactly(write_csv):
    path = write_csv(
        "group,f,i,b\ng,0.1,9007199254740992,true\ng,1e308,-3,false\nh,1e308,7,true\nh,2,0,false\n"
    )
    batch = read_rewards(path)
    np.testing.assert_array_equal(batch.scores[:, 0], [0.1, 1e308, 1e308, 2.0])  # (their sum is inf)
    np.testing.assert_array_equal(batch.scores[:, 1], [2.0**53, -3, 7, 0])
    np.testing.assert_array_equal(batch.scores[:, 2], [1, 0, 1, 0])


def test_missing_requested_component(write_csv):
    with pytest.raises(CliError, match=r"reward column\(s\) \['r9'\] not found"):
        read_rewards(write_csv("group,r1\ng,1\n"), components=["r1", "r9"])
    with pytest.raises(CliError, match="cannot also be a reward component"):
        read_rewards(write_csv("group,r1\ng,1\n"), components=["group"])


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"group": "g", "r": 1}', '{"group": "g", "r": '], r"row 2 \(line 2\): invalid JSON"),
        (['{"group": "g", "r": 1}', "[1, 2]"], r"row 2 \(line 2\): expected a JSON object, got list"),
        (['{"group": "g", "r": 1}', '{"group": "g"}'], r"row 2 \(line 2\): column 'r': missing value"),
        (['{"group": "g", "r": 1}', '{"group": null, "r": 1}'], r"row 2 \(line 2\): empty group label"),
        (
            ['{"group": "g", "r": 1}', '{"group": "g", "r": [1]}'],
            r"row 2 \(line 2\): column 'r': \[1\] is not a number",
        ),
        (['{"group": "g", "r": 1}', "", '{"group": "g", "r": "x"}'], r"row 2 \(line 3\): column 'r': 'x'"),
    ],
)
def test_jsonl_errors_name_the_row(tmp_path, lines, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CliError, match=message):
        read_rewards(path)


def test_unknown_suffix_and_missing_file(tmp_path):
    with pytest.raises(CliError, match="cannot tell the format"):
        read_rewards(tmp_path / "rewards.txt")
    with pytest.raises(CliError, match="no such file"):
        read_rewards(tmp_path / "absent.csv")
    (tmp_path / "rewards.txt").write_text("group,r\ng,1\n")
    assert read_rewards(tmp_path / "rewards.txt", file_format="csv").scores.shape == (1, 1)


def test_parquet_without_pyarrow_names_the_package(tmp_path, monkeypatch):
    path = tmp_path / "rewards.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(CliError, match=r"needs pyarrow.*pip install pyarrow"):
        read_rewards(path)


def test_parquet_with_pyarrow(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "rewards.parquet"
    pq.write_table(pa.table({"group": ["a", "a", "b"], "r": [1.0, 2.0, None]}), path)
    with pytest.raises(CliError, match=r"row 3: column 'r': missing value"):
        read_rewards(path)
    assert read_rewards(path, allow_nan=True).group_labels == ("a", "b")


def test_parse_weights():
    np.testing.assert_array_equal(parse_weights("0.5, 2", ["a", "b"]), [0.5, 2.0])
    np.testing.assert_array_equal(parse_weights("b=3", ["a", "b"]), [1.0, 3.0])
    assert parse_weights(None, ["a"]) is None
    for text, message in [
        ("1", "has 1 values but there are 2"),
        ("c=1", "names 'c'"),
        ("a=1,2", "mixes named"),
        ("a=x", "'x' is not a number"),
        (",", "empty"),
    ]:
        with pytest.raises(CliError, match=message):
            parse_weights(text, ["a", "b"])


def test_markdown_table_aligns_columns():
    text = markdown_table(["a", "long header"], [["1", "2"], ["333", "4"]])
    lines = text.splitlines()
    assert lines[0] == "| a   | long header |"
    assert lines[1] == "|-----|-------------|"
    assert len({len(line) for line in lines}) == 1


# What spreadsheet programs and Windows write: a UTF-8 byte-order mark, CRLF line ends, tabs.

_BOM = "\ufeff"


@pytest.mark.parametrize("bom", ["", _BOM])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_byte_order_mark_crlf_and_tabs(tmp_path, bom, newline, fmt):
    sep = "," if fmt == "csv" else "\t"
    rows = [sep.join(["prompt", "r1", "r2", "r3"])] + [
        sep.join(["p0", *map(str, r)]) for r in EXAMPLE.tolist()
    ]
    path = tmp_path / f"rewards.{fmt}"
    path.write_bytes((bom + newline.join(rows) + newline).encode("utf-8"))
    batch = read_rewards(path, group_col="prompt")
    assert batch.components == ("r1", "r2", "r3")
    assert batch.group_labels == ("p0",)
    np.testing.assert_array_equal(batch.scores, EXAMPLE)
    # a bad value is still named by its row and line
    path.write_bytes((bom + newline.join([*rows, sep.join(["p1", "1", "x", "2"])]) + newline).encode())
    with pytest.raises(CliError, match=r"row 5 \(line 6\): column 'r2': 'x' is not a number"):
        read_rewards(path, group_col="prompt")


@pytest.mark.parametrize("bom", ["", _BOM])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_jsonl_with_byte_order_mark_and_crlf(tmp_path, bom, newline):
    lines = ['{"group": "g", "r": 1}', '{"group": "g", "r": 3}', '{"group": "h", "r": 2}']
    path = tmp_path / "rewards.jsonl"
    path.write_bytes((bom + newline.join(lines) + newline).encode("utf-8"))
    batch = read_rewards(path)
    assert batch.group_labels == ("g", "h")
    np.testing.assert_array_equal(batch.scores[:, 0], [1, 3, 2])
    path.write_bytes((bom + newline.join([*lines, '{"group": "h", "r": "x"}']) + newline).encode())
    with pytest.raises(CliError, match=r"row 4 \(line 4\): column 'r': 'x' is not a number"):
        read_rewards(path)


def test_tsv_by_suffix_and_by_format(run_cli, tmp_path):
    text = "group\tr1\tr2\ng\t1\t0\ng\t2\t1\n"
    (tmp_path / "r.tsv").write_text(text)
    (tmp_path / "r.txt").write_text(text)
    code, out, err = run_cli("explain", str(tmp_path / "r.tsv"))
    assert code == 0, err
    assert "2 rollouts, 1 group(s), 2 components (r1, r2)" in out
    code, out2, err = run_cli("explain", str(tmp_path / "r.txt"), "--format", "tsv")
    assert code == 0, err
    assert out2.replace("r.txt", "r.tsv") == out
    # a tab-separated file read as CSV is one column: the error says which columns there are
    code, _, err = run_cli("explain", str(tmp_path / "r.txt"), "--format", "csv")
    assert code == 2
    assert "group column 'group' not found; columns are ['group\\tr1\\tr2']" in err


def test_jsonl_whole_numbers_then_a_fraction_stay_with_pyarrow(tmp_path, monkeypatch):
    # the schema comes from the first 200 lines: a reward of 0/1 there may be 0.5 further down
    import corrgrpo_core.cli.io as cio

    rows = [{"group": i // 4, "r": i % 2} for i in range(400)] + [{"group": 100, "r": 0.5}]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(cio, "_read_jsonl_lines", lambda *a, **k: pytest.fail("read line by line"))
    batch = read_rewards(path)
    assert batch.group_labels[:3] == ("0", "1", "2")  # whole-number labels stay whole
    assert batch.scores[-1, 0] == 0.5


def test_group_labels_read_as_a_tuple_of_the_labels(write_csv):
    batch = read_rewards(write_csv("group,r\n b ,1\na,2\nb,3\nc,0\n"))
    labels = batch.group_labels
    assert labels == ("b", "a", "c")
    assert (len(labels), batch.n_groups) == (3, 3)
    assert (labels[0], labels[-1], labels[1:]) == ("b", "c", ("a", "c"))
    assert list(labels) == ["b", "a", "c"]
    assert labels.index("c") == 2
    assert ("a" in labels, "d" in labels, 3 in labels) == (True, False, False)
    with pytest.raises(ValueError, match="'d' is not a group label"):
        labels.index("d")
    with pytest.raises(IndexError):
        labels[3]


def test_a_run_is_told_by_the_header_alone(write_csv, tmp_path):
    from corrgrpo_core.cli.io import column_names
    from corrgrpo_core.cli.runs import is_run

    run = write_csv("step, group ,r\n1,a,1\n1,a,oops\n", name="run.csv")  # a bad value after the header
    assert column_names(run) == ["step", "group", "r"]
    assert is_run(run, step_col="step", file_format=None)
    assert not is_run(write_csv("group,r\na,1\n"), step_col="step", file_format=None)
    assert not is_run(run, step_col="", file_format=None)
    assert not is_run(write_csv("", name="empty.csv"), step_col="step", file_format=None)
    (tmp_path / "r.jsonl").write_text('{"step": 1, "group": "a", "r": 1}\n')
    assert column_names(tmp_path / "r.jsonl") == ["step", "group", "r"]


def _label_shapes(rng: np.random.Generator, shape: int, groups: int) -> list[str]:
    """Zero-padded ids, plain integers, short names of several lengths (UTF-8 included), long names."""
    if shape == 0:
        return [f"p{int(v):06d}" for v in rng.integers(0, 10**6, groups)]
    if shape == 1:
        return [str(int(v)) for v in rng.integers(0, 10 ** int(rng.integers(1, 9)), groups)]
    if shape == 2:
        pieces = ["a", "b", "0", "9", "_", "é", "Ω"]
        return ["x" + "".join(rng.choice(pieces, size=int(rng.integers(0, 4)))) for _ in range(groups)]
    return ["".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz0123456789"), size=30)) for _ in range(groups)]


@pytest.mark.parametrize("shape", range(4))
def test_labels_grouped_by_a_sort_equal_pyarrows_dictionary_encoding(shape):
    import pyarrow as pa
    import pyarrow.compute as pc

    from corrgrpo_core.cli.io import GroupCodes, _label_runs

    rng = np.random.default_rng(shape)
    for trial in range(40):
        labels = _label_shapes(rng, shape, int(rng.integers(1 if shape < 3 else 5, 30)))
        arr = pa.array([labels[i] for i in rng.integers(0, len(labels), int(rng.integers(1, 300)))])
        if trial % 3 == 1:
            arr = arr.slice(1) if len(arr) > 1 else arr  # an array with an offset
        if trial % 3 == 2:
            arr = arr.cast(pa.large_string())
        encoded = pc.dictionary_encode(arr)
        runs = _label_runs(pa, arr)
        if shape == 3:  # 30 bytes of 36 values each: too varied for one 63-bit key
            assert runs is None
            continue
        assert runs is not None
        sizes, order, dictionary = runs
        codes = GroupCodes(dictionary, sizes, found_order=order)
        assert dictionary.to_pylist() == encoded.dictionary.to_pylist()  # first appearance order
        ids = encoded.indices.to_numpy()
        np.testing.assert_array_equal(codes.ids(), ids)
        np.testing.assert_array_equal(order, np.lexsort((np.arange(ids.size), ids)))  # stable


def test_a_batch_read_in_group_order_is_the_file_batch_sorted(write_csv):
    text = "group,r1,r2\nb,1,2\n a,3,4\nb,5,6\nc,7,8\na,9,10\n"
    batch = read_rewards(write_csv(text))
    sorted_batch = read_rewards(write_csv(text), group_order=True)
    assert sorted_batch.group_labels == batch.group_labels == ("b", "a", "c")
    np.testing.assert_array_equal(sorted_batch.rows, [0, 2, 1, 4, 3])
    np.testing.assert_array_equal(sorted_batch.group_ids, [0, 0, 1, 1, 2])
    np.testing.assert_array_equal(sorted_batch.scores, batch.scores[sorted_batch.rows])
    assert batch.rows is None


def test_one_blas_thread_inside_the_block_unless_the_environment_says(monkeypatch):
    from corrgrpo_core.cli.blas import one_blas_thread, openblas_threads

    libs = openblas_threads()
    if not libs:
        pytest.skip("no OpenBLAS loaded in this process (numpy built with another BLAS, or no /proc)")
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GOTO_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    get, put = libs[0]
    before = get()
    put(2)
    try:
        with one_blas_thread():
            assert get() == 1
        assert get() == 2
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
        with one_blas_thread():
            assert get() == 2
    finally:
        put(before)


def test_a_quoted_line_break_across_pyarrows_blocks(write_csv, monkeypatch):
    # a file without a double quote is split into blocks at every line end (no value can hold
    # one); with a quote, a line break inside a value stays in its value across a block boundary
    import corrgrpo_core.cli.io as cio

    monkeypatch.setattr(cio, "_BLOCK", 64)
    rows = [f"g{i % 3},{i}" for i in range(40)]
    plain = write_csv("group,r\n" + "\n".join(rows) + "\n", name="plain.csv")
    assert not cio._has_quote(plain)
    rows[20] = '"two\nlines",20'
    quoted = write_csv("group,r\n" + "\n".join(rows) + "\n", name="quoted.csv")
    assert cio._has_quote(quoted)
    batch = read_rewards(quoted)
    assert batch.group_labels == ("g0", "g1", "g2", "two\nlines")
    np.testing.assert_array_equal(batch.scores[:, 0], np.arange(40))
    np.testing.assert_array_equal(read_rewards(plain).scores[:, 0], np.arange(40))
