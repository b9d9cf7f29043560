"""``python -m corrgrpo_tasks.tool_calling RAW_JSON OUT_DIR``: write RLLA train/test parquet files."""

from __future__ import annotations

import argparse

from corrgrpo_tasks.tool_calling._data import RLLA_TEST_FRACTION, prepare


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("raw", help="ToolRL's rlla_rl.json (or a prepared directory)")
    parser.add_argument("out_dir", help="where train.parquet and test.parquet go")
    parser.add_argument(
        "--test-fraction",
        type=float,
        default=RLLA_TEST_FRACTION,
        help=f"share of records held out (default {RLLA_TEST_FRACTION}: the paper's 80 of 4,000)",
    )
    args = parser.parse_args(argv)
    for name, path in prepare(args.raw, args.out_dir, test_fraction=args.test_fraction).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
