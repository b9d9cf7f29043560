"""Print or run the launch command of one domain on one framework.

Examples::

    python -m corrgrpo_tasks.recipes tool_calling verl --dry-run
    python -m corrgrpo_tasks.recipes code trl --estimator grpo lr=2e-6 group_size=16
    python -m corrgrpo_tasks.recipes agent_security verl max_turns=12 -- trainer.nnodes=2
    python -m corrgrpo_tasks.recipes tool_calling trl --profile hardened
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from corrgrpo_tasks.domains import domain_argument, domain_metavar, framework_names
from corrgrpo_tasks.recipes import build_recipe, estimator_names


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        # The console script shows its own name; `python -m` shows how it was run.
        prog="corrgrpo-recipe"
        if os.path.basename(sys.argv[0]) == "corrgrpo-recipe"
        else "python -m corrgrpo_tasks.recipes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("domain", type=domain_argument, metavar=domain_metavar())
    parser.add_argument("framework", choices=framework_names())
    parser.add_argument(
        "--estimator",
        default="corrgrpo",
        choices=estimator_names(),
        help="advantage estimator (default: corrgrpo)",
    )
    parser.add_argument(
        "--profile",
        choices=("paper", "hardened"),
        default=None,
        help="reward definition: the paper's (default) or the hardened one (docs/tasks.md)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the resolved command and config only")
    parser.add_argument("overrides", nargs="*", metavar="name=value", help="hyperparameter overrides")
    args = parser.parse_intermixed_args(argv)
    try:
        recipe = build_recipe(
            args.domain,
            args.framework,
            estimator=args.estimator,
            overrides=args.overrides,
            extra=extra,
            profile=args.profile,
        )
    except ValueError as exc:
        parser.error(str(exc))
    if args.dry_run:
        print(recipe.describe())
        return 0
    if recipe.missing:
        parser.error("cannot launch yet; set " + "; ".join(recipe.missing))
    for note in recipe.notes:
        print(f"note: {note}", file=sys.stderr)
    return subprocess.call(list(recipe.argv), env={**os.environ, **recipe.env})


if __name__ == "__main__":
    raise SystemExit(main())
