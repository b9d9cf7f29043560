"""The pre-registered estimator study (docs/experiments.md, "The pre-registered study"): its design as data,
the parts it runs in, the per-arm learning rate chosen on tuning seeds, and the pre-registered test.

Every part is a block of seeds of one configuration; every seed is one ``corrgrpo train`` invocation with
all arms (paired: the same seed is the same sampling stream and prompt order for every arm), written to
``ROOT/parts/PART/seed-S``, so an interrupted part resumes at its first unfinished seed and parts merge
whatever machine or sitting ran them. ``benchmarks/training_study.py`` is the command line.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ARMS",
    "CONFIGS",
    "LR_GRID",
    "TEST_SEEDS",
    "TUNING_SEEDS",
    "Part",
    "choose_lr",
    "holm",
    "paired_test",
    "parts",
    "sign_flip_p",
    "t_two_sided_p",
]

ARMS = ("grpo", "corrgrpo", "corrgrpo_floor1", "dr_grpo", "grpo_batch_std", "gdpo")
LR_GRID = (1e-4, 2e-4, 4e-4)
TUNING_SEEDS = (100, 101)  # never test seeds; on warm start A
TEST_SEEDS = {"A": tuple(range(8)), "B": tuple(range(8, 16))}  # 16 paired seeds over two warm starts
PRIMARY = ("corrgrpo", "grpo")  # the primary comparison: corrgrpo minus grpo, per configuration
METRIC = "exact_match"


@dataclass(frozen=True)
class StudyConfig:
    """One task configuration of the study: the options every one of its runs takes."""

    task: str
    generations: int
    prompts: int
    steps: int
    eval_size: int
    warm: Mapping[str, tuple[str, ...]]  # warm start id -> its options
    block: int  # test seeds per part
    run_seconds: float  # measured core-seconds of one run (one arm, one seed), for the plan's cost

    def options(self) -> list[str]:
        return [
            f"--task={self.task}",
            f"--generations={self.generations}",
            f"--prompts-per-step={self.prompts}",
            f"--steps={self.steps}",
            "--eval-every=25",
            f"--eval-size={self.eval_size}",
        ]


_SCALES_WARM = {"A": ("--warm-seed=0",), "B": ("--warm-seed=1",)}
# Tool calling: A is the default warm start (demonstrations normalise 15%, chosen on GRPO seed 0); B was not
# tuned on any estimator (30%).
_TOOL_WARM = {"A": ("--warm-normalise=0.15",), "B": ("--warm-normalise=0.3", "--warm-seed=1")}
CONFIGS: dict[str, StudyConfig] = {
    "scales_n8": StudyConfig("scales", 8, 8, 250, 512, _SCALES_WARM, 4, 70.0),
    "scales_n4": StudyConfig("scales", 4, 16, 250, 512, _SCALES_WARM, 4, 70.0),
    "mirror_n8": StudyConfig("scales_mirror", 8, 8, 250, 512, _SCALES_WARM, 4, 70.0),
    "mirror_n4": StudyConfig("scales_mirror", 4, 16, 250, 512, _SCALES_WARM, 4, 70.0),
    "tool_n4": StudyConfig("tool_calling", 4, 16, 300, 1024, _TOOL_WARM, 2, 420.0),
}


@dataclass(frozen=True)
class Part:
    """A block of seeds of one configuration: tuning (one lr for every arm) or test (the frozen lrs)."""

    name: str
    config: str
    warm: str
    seeds: tuple[int, ...]
    lr: float | None  # tuning parts: the grid point; test parts: None (lr.json)

    @property
    def core_hours(self) -> float:
        return len(self.seeds) * len(ARMS) * CONFIGS[self.config].run_seconds / 3600


def parts() -> list[Part]:
    """Every part of the study, tuning parts first (their lrs are frozen before any test part runs)."""
    out = [
        Part(f"tune-{name}-lr{lr:.0e}".replace("e-0", "e-"), name, "A", TUNING_SEEDS, lr)
        for name in CONFIGS
        for lr in LR_GRID
    ]
    for name, cfg in CONFIGS.items():
        for warm, seeds in TEST_SEEDS.items():
            for i in range(0, len(seeds), cfg.block):
                block = seeds[i : i + cfg.block]
                out.append(Part(f"test-{name}-{warm}-s{block[0]}", name, warm, block, None))
    return out


def _find(name: str) -> Part:
    found = [p for p in parts() if p.name == name]
    if not found:
        raise ValueError(f"no part {name!r}; `plan` lists them")
    return found[0]


def seed_folder(root: Path, part: Part, seed: int) -> Path:
    return root / "parts" / part.name / f"seed-{seed}"


def finished(folder: Path) -> bool:
    """Whether a ``corrgrpo train`` folder holds a completed invocation (run.json's wall time is set last)."""
    try:
        return float(json.loads((folder / "run.json").read_text()).get("wall_seconds") or 0) > 0
    except (FileNotFoundError, json.JSONDecodeError):
        return False


def load_lrs(root: Path) -> dict[str, dict[str, float]]:
    path = root / "lr.json"
    chosen: dict[str, dict[str, float]] = json.loads(path.read_text()) if path.is_file() else {}
    return chosen


def part_command(root: Path, part: Part, seed: int) -> list[str]:
    """The ``corrgrpo train`` invocation of one seed of ``part``."""
    cfg = CONFIGS[part.config]
    if part.lr is not None:
        lr = [f"--lr={part.lr:g}", f"--arm-lr={','.join(f'{a}={part.lr:g}' for a in ARMS)}"]
    else:
        chosen = load_lrs(root).get(part.config)
        if not chosen or set(chosen) != set(ARMS):
            raise ValueError(
                f"{part.name}: no frozen lr for {part.config} yet: run its tuning parts, then choose-lr"
            )
        lr = [f"--arm-lr={','.join(f'{a}={chosen[a]:g}' for a in ARMS)}"]
    return [
        sys.executable,
        "-m",
        "corrgrpo_core.cli",
        "train",
        *cfg.options(),
        *cfg.warm[part.warm],
        f"--estimators={','.join(ARMS)}",
        *lr,
        f"--first-seed={seed}",
        "--seeds=1",
        "--threads=1",
        f"--cache-dir={root / 'cache'}",
        f"--out={seed_folder(root, part, seed)}",
        "--no-progress",
    ]


#: The packages whose versions decide a run's numbers (the published runs stopped reproducing when
#: an unpinned transformers moved), recorded beside every seed a part runs.
_PACKAGES = ("torch", "transformers", "trl", "accelerate", "datasets", "numpy", "corrgrpo-core")


def _provenance() -> dict[str, Any]:
    """Date (UTC), load average, git tree and the versions of ``_PACKAGES``, as a part's seed starts or ends."""
    from datetime import datetime, timezone
    from importlib import metadata

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    here = Path(__file__).resolve().parent
    tree = subprocess.run(
        ["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "load": " ".join(f"{v:.2f}" for v in os.getloadavg()),
        "tree": tree or None,
        "tree_dirty": bool(dirty),
        "versions": {name: version(name) for name in _PACKAGES},
    }


def run_part(root: Path, name: str, *, dry_run: bool = False) -> int:
    """Run every unfinished seed of part ``name``, one process at a time under ``nice -n 10``."""
    part = _find(name)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    for seed in part.seeds:
        folder = seed_folder(root, part, seed)
        if finished(folder):
            continue
        command = ["nice", "-n", "10", *part_command(root, part, seed)]
        print(" ".join(command), flush=True)
        if dry_run:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        started = _provenance()
        with (folder.parent / f"seed-{seed}.log").open("w") as log:
            code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        record = {"started": started, "ended": _provenance(), "exit": code}
        (folder.parent / f"seed-{seed}.provenance.json").write_text(json.dumps(record, indent=1) + "\n")
        if code:
            print(
                f"{name} seed {seed} failed (exit {code}); see {folder.parent}/seed-{seed}.log",
                file=sys.stderr,
            )
            return code
    return 0


def _load_part(root: Path, part: Part) -> list[Any]:
    from ._run import load_records

    return [
        load_records(seed_folder(root, part, s)) for s in part.seeds if finished(seed_folder(root, part, s))
    ]


def plan_lines(root: Path) -> list[str]:
    """One line per part: name, seeds done, cost estimate."""
    lines, total, left = [], 0.0, 0.0
    for part in parts():
        done = sum(finished(seed_folder(root, part, s)) for s in part.seeds)
        total += part.core_hours
        left += part.core_hours * (1 - done / len(part.seeds))
        lines.append(f"{part.name:28s} seeds {done}/{len(part.seeds)}  ~{part.core_hours:.1f} core-h")
    return [*lines, f"total ~{total:.1f} core-hours, ~{left:.1f} left"]


def _auc_by_arm(records: Sequence[Any]) -> dict[str, dict[int, float]]:
    """{arm: {seed: held-out AUC of the metric}} over finished invocations."""
    from ._report import _by_run, area_under_curve

    out: dict[str, dict[int, float]] = {}
    for rec in records:
        for (arm, seed), rows in _by_run(rec.evals).items():
            out.setdefault(arm, {})[seed] = area_under_curve(rows, METRIC)
    return out


def choose_lr(root: Path) -> dict[str, dict[str, float]]:
    """Per configuration whose tuning parts all finished: per arm the grid lr with the highest mean
    held-out AUC over the tuning seeds (ties: the lr nearest 2e-4, then the smaller). Written to lr.json
    and never changed after the configuration's first test part has run."""
    chosen = load_lrs(root)
    for name in CONFIGS:
        tuning = [p for p in parts() if p.config == name and p.lr is not None]
        if name in chosen or not all(finished(seed_folder(root, p, s)) for p in tuning for s in p.seeds):
            continue
        score: dict[str, list[tuple[float, float, float]]] = {}
        for p in tuning:
            assert p.lr is not None
            for arm, by_seed in _auc_by_arm(_load_part(root, p)).items():
                mean = sum(by_seed.values()) / len(by_seed)
                score.setdefault(arm, []).append((mean, -abs(math.log(p.lr / 2e-4)), -p.lr))
        chosen[name] = {arm: -max(s)[2] for arm, s in score.items()}
    (root / "lr.json").write_text(json.dumps(chosen, indent=1, sort_keys=True) + "\n")
    return chosen


def merge_config(root: Path, name: str, out: Path) -> Any:
    """The test parts of configuration ``name`` merged into one ``corrgrpo train`` folder at ``out``."""
    from ._report import write_outputs
    from ._run import merge_records, write_run_file

    records = [r for p in parts() if p.config == name and p.lr is None for r in _load_part(root, p)]
    if not records:
        raise ValueError(f"{name}: no finished test seed yet")
    merged = merge_records(records)
    out.mkdir(parents=True, exist_ok=True)
    write_run_file(out, merged)
    write_outputs(merged, out)
    return merged


def t_two_sided_p(t: float, df: int) -> float:
    """Two-sided p-value of Student's t with ``df`` degrees of freedom (regularised incomplete beta).

    >>> round(t_two_sided_p(2.365, 7), 3), round(t_two_sided_p(0.0, 5), 3)
    (0.05, 1.0)
    """
    x = df / (df + t * t)
    return _betainc(df / 2, 0.5, x)


def _betainc(a: float, b: float, x: float) -> float:
    """I_x(a, b) by Lentz's continued fraction (Numerical Recipes' betacf)."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1 - x)
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    c, d, f = 1.0, 0.0, 1.0
    for i in range(400):
        m = i // 2
        if i == 0:
            num = 1.0
        elif i % 2 == 0:
            num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + num / (c if abs(c) > 1e-300 else 1e-300)
        f *= c * d
        if abs(1.0 - c * d) < 1e-14:
            break
    return front * (f - 1.0) / a


def sign_flip_p(diffs: Sequence[float]) -> float:
    """Exact two-sided sign-flip p-value of the mean of paired ``diffs`` (all 2^n sign patterns).

    >>> sign_flip_p([1.0] * 8)
    0.0078125
    """
    obs = abs(sum(diffs)) - 1e-12
    hits = sum(
        abs(sum(s * d for s, d in zip(signs, diffs, strict=True))) >= obs
        for signs in itertools.product((1, -1), repeat=len(diffs))
    )
    return hits / (1 << len(diffs))


def paired_test(diffs: Sequence[float]) -> dict[str, float]:
    """Mean, 95% t half-width, paired t p-value and exact sign-flip p-value of ``diffs``."""
    from ._report import interval

    n = len(diffs)
    mean, half = interval(list(diffs))
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else math.nan
    p = t_two_sided_p(mean / (sd / math.sqrt(n)), n - 1) if n > 1 and sd > 0 else math.nan
    return {
        "n": n,
        "mean": mean,
        "half": half,
        "sd": sd,
        "p_t": p,
        "p_flip": sign_flip_p(diffs),
        "up": sum(d > 0 for d in diffs),
        "down": sum(d < 0 for d in diffs),
    }


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    """Holm-adjusted p-values.

    >>> holm({"a": 0.01, "b": 0.04, "c": 0.03})
    {'a': 0.03, 'c': 0.06, 'b': 0.06}
    """
    order = sorted(pvalues, key=lambda k: pvalues[k])
    out, running = {}, 0.0
    for i, key in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * pvalues[key]))
        out[key] = round(running, 12)
    return out


def analyse(root: Path) -> list[dict[str, Any]]:
    """The pre-registered test per configuration (corrgrpo - grpo, held-out exact-match AUC, paired over
    the seeds both finished), Holm over the configurations; ``complete`` says whether all 16 seeds are in
    (an incomplete test is progress, never a result)."""
    rows: list[dict[str, Any]] = []
    for name in CONFIGS:
        records = [r for p in parts() if p.config == name and p.lr is None for r in _load_part(root, p)]
        auc = _auc_by_arm(records)
        a, b = (auc.get(arm, {}) for arm in PRIMARY)
        seeds = sorted(set(a) & set(b))
        if len(seeds) < 2:
            continue
        test = paired_test([a[s] - b[s] for s in seeds])
        rows.append({"config": name, **test, "complete": len(seeds) == sum(map(len, TEST_SEEDS.values()))})
    adjusted = holm({r["config"]: r["p_t"] for r in rows if not math.isnan(r["p_t"])})
    for r in rows:
        r["holm_t"] = adjusted.get(r["config"], math.nan)
    return rows


def render_analysis(rows: Sequence[Mapping[str, Any]]) -> str:
    """The analysis as a markdown table; an incomplete configuration is marked as progress, not a result."""
    lines = [
        (
            "| configuration | seeds | corrgrpo - grpo AUC, mean ± 95% t | (n+ m-) | paired sd | p (t) | p (sign-flip) "
            "| Holm p (t) | status |"
        ),
        "|---" * 9 + "|",
    ]
    for r in rows:
        status = "complete" if r["complete"] else "INCOMPLETE: progress, not a result"
        lines.append(
            f"| {r['config']} | {r['n']} | {r['mean']:+.4f} ± {r['half']:.4f} | ({r['up']}+ {r['down']}-) | "
            f"{r['sd']:.4f} | {r['p_t']:.4g} | {r['p_flip']:.4g} | {r['holm_t']:.4g} | {status} |"
        )
    return "\n".join(lines)


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t with ``df`` degrees of freedom, by bisection.

    >>> round(t_quantile(0.975, 7), 3)
    2.365
    """
    lo, hi = 0.0, 1000.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_two_sided_p(mid, df) > 2 * (1 - p):
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def mde80(sd: float, n: int, alpha: float) -> float:
    """The paired difference a two-sided t-test over ``n`` seeds detects with 80% power at ``alpha``
    (central-t approximation: (t_{1-alpha/2} + t_{0.8}) sd / sqrt(n))."""
    return (t_quantile(1 - alpha / 2, n - 1) + t_quantile(0.8, n - 1)) * sd / math.sqrt(n)


def published_tests(folders: Sequence[Path], *, metric: str = METRIC) -> list[dict[str, Any]]:
    """Every estimator minus grpo, final value and AUC of ``metric``, in each published study folder:
    paired t, exact sign-flip, Holm over all of them, MDE at 80% power (alpha 0.05 and Holm's first
    threshold)."""
    from ._records import load_csv
    from ._report import _by_run, area_under_curve

    rows: list[dict[str, Any]] = []
    for folder in folders:
        runs = _by_run(load_csv(folder / "evals.csv"))
        for family in ("final", "auc"):
            value = {
                run: float(r[-1][metric]) if family == "final" else area_under_curve(r, metric)
                for run, r in runs.items()
            }
            arms = list(dict.fromkeys(arm for arm, _ in runs))
            base = {s: v for (a, s), v in value.items() if a == "grpo"}
            for arm in arms:
                if arm == "grpo":
                    continue
                diffs = [v - base[s] for (a, s), v in sorted(value.items()) if a == arm and s in base]
                rows.append({"task": folder.name, "estimator": arm, "metric": family, **paired_test(diffs)})
    adjusted = holm({str(i): r["p_t"] for i, r in enumerate(rows)})
    for i, r in enumerate(rows):
        r["holm_t"] = adjusted[str(i)]
        r["mde80"] = mde80(r["sd"], r["n"], 0.05)
        r["mde80_holm"] = mde80(r["sd"], r["n"], 0.05 / len(rows))
    return rows


def render_published(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = [
        (
            "| task | estimator - grpo | metric | mean ± 95% t | (n+ m-) | p (t) | p (sign-flip) | Holm p (t) "
            "| paired sd | MDE80, alpha .05 | MDE80, Holm worst |"
        ),
        "|---" * 11 + "|",
    ]
    lines += [
        f"| {r['task']} | {r['estimator']} | {r['metric']} | {r['mean']:+.3f} ± {r['half']:.3f} | "
        f"({r['up']}+ {r['down']}-) | {r['p_t']:.2g} | {r['p_flip']:.2g} | {r['holm_t']:.2g} | {r['sd']:.3f} | "
        f"{r['mde80']:.3f} | {r['mde80_holm']:.3f} |"
        for r in rows
    ]
    return "\n".join(lines)
