"""``python -m corrgrpo_tasks.tool_calling RAW_JSON OUT_DIR``: write RLLA train/test parquet files."""

from __future__ import annotations

import argparse

from corrgrpo_tasks.tool_calling._data import prepare


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("raw", help="ToolRL's rlla_rl.json (or a prepared directory)")
    parser.add_argument("out_dir", help="where train.parquet and test.parquet go")
    args = parser.parse_args(argv)
    for name, path in prepare(args.raw, args.out_dir).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
