"""``python -m corrgrpo_tasks.gpu_smoke [DOMAIN ...] [--device auto|cuda|cpu] [--steps N]``.

Prints one JSON summary per domain; exits non-zero if any run fails (the others still run).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback

from corrgrpo_tasks.gpu_smoke._run import run

DOMAINS = ("tool_calling", "code", "agent_security")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "domains", nargs="*", metavar="DOMAIN", help=f"any of {', '.join(DOMAINS)} (default: all)"
    )
    parser.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--estimator", default="corrgrpo")
    args = parser.parse_args(argv)
    unknown = [d for d in args.domains if d not in DOMAINS]
    if unknown:
        parser.error(f"unknown domain(s) {unknown}; known: {list(DOMAINS)}")
    failed = 0
    for domain in args.domains or DOMAINS:
        try:
            (summary,) = run([domain], device=args.device, steps=args.steps, estimator=args.estimator)
        except Exception:  # noqa: BLE001 -- report every domain, then fail
            failed += 1
            summary = {"domain": domain, "error": traceback.format_exc(limit=5)}
        print(json.dumps(summary), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
