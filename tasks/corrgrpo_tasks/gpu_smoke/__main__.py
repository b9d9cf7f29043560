"""``python -m corrgrpo_tasks.gpu_smoke [DOMAIN ...] [--device auto|cuda|cpu] [--steps N]``.

Prints one JSON summary per domain; exits non-zero if any run fails (the others still run).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback

from corrgrpo_tasks.domains import parse_domain
from corrgrpo_tasks.gpu_smoke._run import run, smoke_domains


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "domains", nargs="*", metavar="DOMAIN", help=f"any of {', '.join(smoke_domains())} (default: all)"
    )
    parser.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--estimator", default="corrgrpo")
    args = parser.parse_args(argv)
    known = smoke_domains()
    try:
        domains = [parse_domain(d, note=lambda line: print(line, file=sys.stderr)) for d in args.domains]
    except ValueError as exc:
        parser.error(str(exc))
    unknown = [d for d in domains if d not in known]
    if unknown:
        parser.error(f"no smoke run for {unknown}; known: {list(known)}")
    failed = 0
    for domain in domains or known:
        try:
            (summary,) = run([domain], device=args.device, steps=args.steps, estimator=args.estimator)
        except Exception:  # noqa: BLE001 -- report every domain, then fail
            failed += 1
            summary = {"domain": domain, "error": traceback.format_exc(limit=5)}
        print(json.dumps(summary), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
