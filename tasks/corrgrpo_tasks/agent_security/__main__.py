"""``python -m corrgrpo_tasks.agent_security OUT_DIR``: build AgentDojo cases and write the split parquet."""

from __future__ import annotations

import argparse

from corrgrpo_tasks.agent_security._data import BENCHMARK_VERSION, EVAL_RATIO, prepare


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir")
    parser.add_argument("--benchmark-version", default=BENCHMARK_VERSION)
    parser.add_argument("--eval-ratio", type=float, default=EVAL_RATIO)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    written = prepare(
        args.out_dir, benchmark_version=args.benchmark_version, eval_ratio=args.eval_ratio, seed=args.seed
    )
    for name, path in written.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
