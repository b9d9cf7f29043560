"""Random reward files (odd values, missing cells, truncated lines, random bytes) through
``corrgrpo explain``: exit 0 or one error line, never a traceback, a warning or a NaN table."""

from __future__ import annotations

import json
import os
import random

import pytest

VALUES = [0, 1, -1, 1.5, 1e308, -1e308, 1e-320, 5e-324, "x", "", " ", None, True, False, [1], {"a": 1},
          "1e999", "inf", "-inf", "NaN", 10**30, "1,5", "\u00e9", "  2 ", "true", "yes"]  # fmt: skip
OPTIONS = [
    [],
    ["--nan-policy", "ignore"],
    ["--components", "r0"],
    ["--estimators", "grpo,corrgrpo,gdpo,dara,rloo,mo_grpo,gdpo_corr,dr_grpo"],
    ["--weights", "r0=2"],
]


def _write(path, kind, rows, columns, rng):
    if kind == "csv":
        lines = [",".join(columns)]
        lines += [
            ",".join(str(r.get(c, "")) for c in columns) + ("" if rng.random() < 0.9 else ",") for r in rows
        ]
        path.write_text("\n".join(lines) + "\n")
    elif kind == "jsonl":
        text = [json.dumps(r) for r in rows]
        text = [t[: rng.randint(0, len(t))] if rng.random() < 0.05 else t for t in text]
        path.write_text("".join(t + "\n" for t in text))
    elif kind == "parquet":
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        try:
            table = pa.Table.from_pylist(rows)
        except (pa.ArrowException, TypeError, OverflowError):
            return False
        pq.write_table(table, path)
    else:
        path.write_bytes(os.urandom(rng.randint(0, 300)))
    return True


@pytest.mark.parametrize("seed", range(6))
def test_random_files_never_give_a_traceback(run_cli, tmp_path, seed):
    rng = random.Random(seed)
    for case in range(25):
        kind = rng.choice(["csv", "jsonl", "parquet", "bytes"])
        suffix = kind if kind != "bytes" else rng.choice(["csv", "jsonl", "parquet"])
        columns = ["group", *(f"r{i}" for i in range(rng.randint(0, 3)))] + (
            ["step"] if rng.random() < 0.3 else []
        )
        rows = [
            {
                c: rng.choice(["a", "b", 1, None, ""])
                if c == "group"
                else rng.choice([1, 2])
                if c == "step"
                else rng.choice(VALUES)
                for c in columns
                if rng.random() < 0.95
            }
            for _ in range(rng.randint(0, 12))
        ]
        path = tmp_path / f"f{case}.{suffix}"
        if not _write(path, kind, rows, columns, rng):
            continue
        argv = ["explain", str(path), *rng.choice(OPTIONS)]
        code, out, err = run_cli(*argv)  # a traceback or a warning (an error under pytest) fails here
        assert code in (0, 2), (argv, err)
        if code == 2:
            assert len(err.strip().splitlines()) == 1, (argv, err)
            assert out == ""
        elif "--nan-policy" not in argv:
            assert " nan " not in out, (argv, out)
