"""The ``corrgrpo`` command: explain reward batches and show the estimators at work.

``corrgrpo explain FILE``   per-group denominators, correlations, c_q and advantages of a reward batch
``corrgrpo simulate``       a small multi-reward learning simulation, every estimator, several seeds
``corrgrpo demo``           ``explain --example`` and a short ``simulate``, plots written to a folder
``corrgrpo estimators``     the registered estimators

Other packages add sub-commands through the entry-point group ``corrgrpo.commands``
(:mod:`corrgrpo_core.cli.plugin`): the project's task package adds ``train``, ``evaluate``, ``recipe``
and ``pipeline``. A plugin's module is imported only when its command runs, or for ``corrgrpo --help``.

Call :func:`main` with an argument list (as the tests do) or run ``python -m corrgrpo_core.cli``.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import corrgrpo_core as cc

from . import plugin
from .facts import default_estimators
from .plugin import CliError
from .plugin import names as _names
from .plugin import progress as _progress
from .tables import markdown_table

if TYPE_CHECKING:
    from .explain import Explanation
    from .simulate import ScenarioResult

__all__ = ["main"]

CORE_COMMANDS = ("explain", "simulate", "demo", "estimators")


def _parser(plugins: Sequence[str] = ()) -> tuple[argparse.ArgumentParser, dict[str, plugin.Command]]:
    """The parser with the core's commands and the named plugin commands ("*": every installed one).

    Returns the parser and the plugin commands attached to it. A plugin that cannot be loaded is
    attached (for ``--help``) only when every plugin is asked for; it is an error when asked for by name.
    """
    parser = argparse.ArgumentParser(
        prog="corrgrpo",
        description="Explain multi-reward advantages (CorrGRPO, GRPO, GDPO, ...) and "
        "show them at work in a small learning simulation.",
    )
    parser.add_argument("--version", action="version", version=f"corrgrpo-core {cc.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ex = sub.add_parser(
        "explain",
        help="what each estimator does to a reward batch",
        description="Read a reward batch (one row per rollout: a group column and one column "
        "per reward component) and print, per group and for the batch, each "
        "component's share of GRPO's denominator, the correlation matrix, c_q, "
        "degenerate groups and the advantages under each estimator. Given a run (a folder of "
        "verl rollout dumps or logs, or a file with a step column), print the same per step, how "
        "much each estimator would change the run's advantages, and whether switching matters.",
    )
    _explain_options(ex)

    sim = sub.add_parser(
        "simulate",
        help="multi-reward learning simulation, every estimator",
        description="Train a softmax policy over candidate responses with each estimator in "
        "reward scenarios (see docs/simulation.md) and report learning curves, "
        "final values and steps to threshold per reward component.",
    )
    _simulate_options(sim)

    demo = sub.add_parser("demo", help="explain --example and a short simulate, plots into a folder")
    demo.add_argument(
        "--out", default="corrgrpo-demo", help="folder for the plots and tables [corrgrpo-demo]"
    )
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")

    sub.add_parser("estimators", help="list the registered estimators")
    commands = _attach_plugins(sub, plugins)
    return parser, commands


def _explain_options(ex: argparse.ArgumentParser) -> None:
    """The options of ``corrgrpo explain``."""
    ex.add_argument(
        "file",
        nargs="?",
        help="CSV, TSV, JSONL or Parquet file ('-': standard input, CSV unless --format says); a file with a step column, or a folder (verl rollout dumps "
        "<step>.jsonl, corrgrpo train logs, any CSV/TSV/JSONL/Parquet logs), is read as a run, step by step",
    )
    ex.add_argument(
        "--example", action="store_true", help="use the paper's Figure 2 example instead of a file"
    )
    ex.add_argument(
        "--group-col",
        default=None,
        help="column holding the group (prompt) id [group; input for verl rollout dumps]",
    )
    ex.add_argument("--step-col", default="step", help="column holding the training step of a run [step]")
    ex.add_argument(
        "--run-estimator",
        default=None,
        help="the estimator the run trained with, compared against (on score when it needs only the "
        "total) [from corrgrpo train's file names, else grpo]",
    )
    ex.add_argument("--max-steps", type=int, default=20, help="steps printed in a run's tables [20]")
    ex.add_argument(
        "--components",
        type=_names,
        default=None,
        help="comma-separated reward columns [every column but the group column; for a run, every "
        "numeric column but score and the step and group columns]",
    )
    ex.add_argument(
        "--weights",
        default=None,
        help="component weights, applied before any statistic: '0.05,0.6' or 'fmt=0.05,pass=0.6' [1]",
    )
    ex.add_argument(
        "--estimators",
        type=_names,
        default=None,
        help="comma-separated estimators to compare [every registered one: corrgrpo estimators]",
    )
    ex.add_argument(
        "--format",
        dest="file_format",
        choices=("csv", "tsv", "jsonl", "parquet"),
        default=None,
        help="file format [from the suffix]",
    )
    ex.add_argument(
        "--nan-policy",
        choices=("raise", "ignore"),
        default="raise",
        help="missing values: an error, or left out of their component's statistics [raise]",
    )
    ex.add_argument("--max-groups", type=int, default=10, help="groups printed in detail [10]")
    ex.add_argument(
        "--plot",
        default=None,
        metavar="PNG",
        help="draw the Figure 2 view of one group (a run: its trends over steps) to a .png/.pdf/.svg file",
    )
    ex.add_argument("--plot-group", default=None, metavar="LABEL", help="group to plot [the first]")


def _attach_plugins(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], plugins: Sequence[str]
) -> dict[str, plugin.Command]:
    """Load the named plugin commands ("*": every installed one) and attach them to ``sub``."""
    installed = plugin.entry_points() if plugins else {}  # (a core command reads no package index)
    wanted = sorted(set(installed) | set(plugin.INSTALL_HINTS)) if "*" in plugins else list(plugins)
    commands: dict[str, plugin.Command] = {}
    for name in wanted:
        if name in CORE_COMMANDS:
            continue
        try:
            commands[name] = plugin.load(name, installed.get(name))
        except CliError as err:
            if "*" not in plugins:
                raise
            sub.add_parser(name, help=f"(not available: {err})")
            continue
        commands[name].attach(sub)
    return commands


def _command_name(argv: Sequence[str]) -> str | None:
    """The sub-command ``argv`` asks for (the top-level parser has only flags), or None."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _simulate_options(sim: argparse.ArgumentParser) -> None:
    from .simulate import SCENARIOS, SimulationConfig

    d = SimulationConfig()
    sim.add_argument(
        "--scenarios",
        type=_names,
        default=list(SCENARIOS),
        help=f"comma-separated, from {', '.join(SCENARIOS)} [all]",
    )
    sim.add_argument(
        "--estimators",
        type=_names,
        default=list(default_estimators()),
        help=f"comma-separated [{','.join(default_estimators())}]",
    )
    sim.add_argument("--seeds", type=int, default=d.seeds, help=f"seeds per estimator [{d.seeds}]")
    sim.add_argument("--first-seed", type=int, default=d.first_seed, help=f"first seed [{d.first_seed}]")
    sim.add_argument("--steps", type=int, default=d.steps, help=f"policy-gradient steps [{d.steps}]")
    sim.add_argument(
        "--lr", type=float, default=d.learning_rate, help=f"Adam learning rate [{d.learning_rate}]"
    )
    sim.add_argument(
        "--threshold",
        type=float,
        default=d.threshold,
        help=f"steps-to-threshold level, as a fraction of the way from the uniform policy to the "
        f"best reachable value [{d.threshold}]",
    )
    sim.add_argument(
        "--eval-every", type=int, default=d.eval_every, help=f"evaluation interval [{d.eval_every}]"
    )
    sim.add_argument("--out", default=None, help="folder for report.md, summary.csv and one PNG per scenario")
    sim.add_argument("--no-progress", action="store_true", help="no progress bar")


def _cmd_explain(args: argparse.Namespace, out: TextIO) -> int:
    from .explain import example_batch, explain_file, explain_shown, render_explanation
    from .io import parse_weights

    if args.example == (args.file is not None):
        raise CliError("give a reward file or --example (not both)")
    if args.file == "-":
        return _explain_stdin(args, out)
    if args.max_groups < 0:
        raise CliError("--max-groups must be >= 0")
    if args.plot:
        from .plots import check_plot_path

        check_plot_path(args.plot)
    if args.file is not None and not args.example:
        from .runs import is_run

        if is_run(Path(args.file), step_col=args.step_col, file_format=args.file_format):
            return _cmd_explain_run(args, out)
    estimators = args.estimators or None  # None: every registered estimator
    if args.example:
        report, shown = explain_shown(
            example_batch(),
            estimators=estimators,
            weights=parse_weights(args.weights, example_batch().components),
            nan_policy=args.nan_policy,
            max_groups=args.max_groups,
            plot_group=args.plot_group,
        )
    else:
        report, shown = explain_file(
            args.file,
            group_col=args.group_col or "group",
            components=args.components,
            file_format=args.file_format,
            nan_policy=args.nan_policy,
            estimators=estimators,
            weights=lambda names: parse_weights(args.weights, names),
            max_groups=args.max_groups,
            plot_group=args.plot_group,
            keep_advantages=False,  # the shown groups' rows and the magnitudes are all it prints
        )
    out.write(render_explanation(report, max_groups=args.max_groups) + "\n")
    if args.plot:
        from .plots import plot_explanation

        path = plot_explanation(report, args.plot, group=shown)
        out.write(f"plot written to {path}\n")
    return 0


def _explain_stdin(args: argparse.Namespace, out: TextIO) -> int:
    """``explain -``: standard input, saved to a temporary file of the ``--format`` given (CSV by default)."""
    import tempfile
    from io import StringIO

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"stdin.{args.file_format or 'csv'}"
        with path.open("wb") as handle:
            handle.write(sys.stdin.buffer.read())
        args.file = str(path)
        text = StringIO()
        try:
            code = _cmd_explain(args, text)
        except CliError as err:
            raise CliError(str(err).replace(str(path), "<stdin>")) from None
        out.write(text.getvalue().replace(str(path), "<stdin>"))
        return code


def _cmd_explain_run(args: argparse.Namespace, out: TextIO) -> int:
    from .runs import train_runs

    if args.max_steps < 1:
        raise CliError("--max-steps must be >= 1")
    runs = train_runs(Path(args.file))
    if not runs:
        return _explain_one_run(args, Path(args.file), args.run_estimator or "grpo", args.plot, out)
    out.write(
        f"{args.file}: corrgrpo train's rollouts, {len(runs)} run(s): one table per estimator and seed, each "
        "compared with the estimator it trained with\n\n"
    )
    for run in runs:
        out.write(f"# run {run.label} ({run.path})\n\n")
        plot = None
        if args.plot:
            plot = str(Path(args.plot).with_stem(f"{Path(args.plot).stem}-{run.estimator}-seed{run.seed}"))
        _explain_one_run(args, run.path, args.run_estimator or run.estimator, plot, out)
        out.write("\n")
    return 0


def _explain_one_run(
    args: argparse.Namespace, path: Path, run_estimator: str, plot: str | None, out: TextIO
) -> int:
    from .io import parse_weights
    from .runs import analyse_run, find_run, render_run

    source = find_run(path, group_col=args.group_col, step_col=args.step_col, file_format=args.file_format)
    report = analyse_run(
        source,
        components=args.components,
        estimators=args.estimators or default_estimators(),
        run_estimator=run_estimator,
        nan_policy=args.nan_policy,
        parse_weights=lambda names: parse_weights(args.weights, names),
    )
    out.write(render_run(report, max_steps=args.max_steps) + "\n")
    if plot:
        from .plots import plot_run

        out.write(f"plot written to {plot_run(report, plot)}\n")
    return 0


def _run_simulation(args: argparse.Namespace, out: TextIO) -> int:
    _simulate(args, out)
    return 0


def _simulate(args: argparse.Namespace, out: TextIO) -> list[ScenarioResult]:
    """Run ``corrgrpo simulate``: the report to ``out``, files into ``--out``; returns the results."""
    from .simulate import SCENARIOS, SimulationConfig, render_report, run_simulation, summary_records

    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown or not args.scenarios:
        raise CliError(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}")
    known = cc.estimator_names()
    bad = [e for e in args.estimators if e not in known]
    if bad or not args.estimators:
        raise CliError(f"unknown estimator(s) {bad}; known: {', '.join(known)}")
    try:
        cfg = SimulationConfig(
            steps=args.steps,
            seeds=args.seeds,
            learning_rate=args.lr,
            threshold=args.threshold,
            eval_every=args.eval_every,
            first_seed=args.first_seed,
        )
    except ValueError as err:
        raise CliError(str(err)) from None
    total = cfg.steps * cfg.seeds * len(args.estimators) * len(args.scenarios)
    start = time.monotonic()
    with _progress(total, enabled=not args.no_progress, label="simulating") as tick:
        results = run_simulation(args.scenarios, args.estimators, cfg, on_step=tick)
    report = render_report(results, cfg)
    out.write(report + f"\n(simulated in {time.monotonic() - start:.1f} s)\n")
    if args.out:
        from .plots import plot_scenario

        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.md").write_text(report + "\n")
        records = summary_records(results)
        with (folder / "summary.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(records[0]))
            writer.writeheader()
            writer.writerows(records)
        plots = []
        for result in results:
            plots.append(plot_scenario(result, folder / f"{result.scenario.name}.png"))
            if "grpo" in result.curves and len(result.curves) > 1:
                plots.append(
                    plot_scenario(result, folder / f"{result.scenario.name}_vs_grpo.png", baseline="grpo")
                )
        out.write(f"report.md, summary.csv and {len(plots)} plot(s) written to {folder}\n")
    return results


def _figure2_summary(report: Explanation) -> str:
    """The paper's Figure 2 numbers in a dozen lines: the two denominators, c_q, the advantages."""
    view = report.groups[0]
    top = max(range(len(report.components)), key=lambda i: float(view.variance_share[i]))
    names = report.components
    rows = [
        [
            str(i + 1),
            *(f"{v:g}" for v in view.scores[i]),
            *(f"{view.advantages[e][i]:+.4f}" for e in ("grpo", "corrgrpo")),
        ]
        for i in range(view.rows.size)
    ]
    return "\n".join(
        [
            "# The paper's Figure 2: one prompt, four rollouts, three rewards on different scales",
            "",
            markdown_table(["rollout", *names, "GRPO A", "CorrGRPO A"], rows),
            "",
            (
                f"GRPO divides by sqrt(covariance sum {view.covariance_sum:.4f}); {names[top]} alone is "
                f"{100 * view.variance_share[top]:.1f}% of it, so the small rewards barely move GRPO's denominator."
            ),
            (
                f"CorrGRPO divides by sqrt(correlation sum {view.correlation_sum:.4f}), which counts each reward once "
                f"whatever its scale: c_q = {view.c_q:.4f}, CorrGRPO = c_q x GRPO in this group (same signs and order)."
            ),
        ]
    )


def _wrap(line: str, width: int = 100) -> str:
    """One paragraph (a list item keeps its hanging indent) wrapped to ``width`` columns."""
    import textwrap

    return textwrap.fill(line, width, subsequent_indent="  " if line.startswith("- ") else "")


def _cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    """Figure 2 first, then a short simulation's verdict in words; everything else goes to files.
    Both parts go through the parser, so the demo uses exactly the commands' own defaults."""
    from io import StringIO

    from .explain import example_batch, explain_shown
    from .simulate import verdict_words

    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    quiet = ["--no-progress"] if args.no_progress else []
    parser, _ = _parser()
    full = StringIO()
    _cmd_explain(
        parser.parse_args(["explain", "--example", "--plot", str(folder / "explain_fig2.png")]), full
    )
    (folder / "explain.md").write_text(full.getvalue())
    report, _ = explain_shown(example_batch(), estimators=("grpo", "corrgrpo"))
    out.write("\n".join(_wrap(line) for line in _figure2_summary(report).splitlines()) + "\n\n")
    simulate_args = ["simulate", "--seeds", "3", "--steps", "100", "--out", str(folder / "simulate"), *quiet]
    captured = StringIO()
    results = _simulate(parser.parse_args(simulate_args), captured)
    out.write(
        "# A short learning simulation (3 seeds x 100 steps; `corrgrpo simulate` runs the full one)\n\n"
    )
    out.write("\n".join(_wrap(line) for line in verdict_words(results)) + "\n\n")
    files = (
        f"Files in {folder}/: explain.md (every number of Figure 2, every estimator), explain_fig2.png, "
        "simulate/report.md (the tables), simulate/summary.csv, simulate/*.png (learning curves)"
    )
    out.write(_wrap(files) + "\n")
    return 0


def _cmd_estimators(out: TextIO) -> int:
    rows = [[name, cc.get_estimator(name).summary] for name in cc.estimator_names()]
    out.write(markdown_table(["estimator", "what it does"], rows) + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``corrgrpo`` command; returns the exit status (0 ok, 2 a usage or input error).

    Output cut short by its reader (``corrgrpo explain FILE | head``) is not an error.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv, sys.stdout)
    except BrokenPipeError:
        # The reader has gone: send whatever Python still flushes at exit nowhere, and stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _main(argv: list[str], out: TextIO) -> int:
    name = _command_name(argv)
    try:
        wanted = () if name in CORE_COMMANDS else ["*"] if name is None else [name]
        try:
            parser, commands = _parser(wanted)
        except CliError:
            if name in plugin.INSTALL_HINTS or name in plugin.entry_points():
                raise
            parser, commands = _parser(["*"])  # an unknown command: argparse lists what there is
        args = parser.parse_args(argv)
    except CliError as err:
        print(f"corrgrpo {name}: error: {err}", file=sys.stderr)
        return 2
    try:
        if args.command in commands:
            return commands[args.command].run(args, out)
        if args.command == "explain":
            return _cmd_explain(args, out)
        if args.command == "simulate":
            return _run_simulation(args, out)
        if args.command == "demo":
            return _cmd_demo(args, out)
        return _cmd_estimators(out)
    except CliError as err:
        print(f"corrgrpo {args.command}: error: {err}", file=sys.stderr)
        return 2
    except MemoryError:
        print(
            f"corrgrpo {args.command}: error: out of memory; read fewer columns (--components)",
            file=sys.stderr,
        )
        return 2
