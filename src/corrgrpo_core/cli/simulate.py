"""A small multi-reward learning simulation: which estimator teaches which reward component fastest.

The model
---------
Each scenario draws ``n_prompts`` prompts with ``n_candidates`` candidate responses each. A candidate
has a feature vector ``phi`` (``n_features`` standard normals) and a vector of reward components whose
distribution depends on ``phi`` through fixed directions (so components can be correlated,
anti-correlated, duplicated, or gated by one another). The policy is a softmax over a prompt's
candidates with logits ``phi @ theta``; ``theta`` is shared by all prompts, as an LLM's weights are,
so how an estimator weighs one group against another changes what is learned.

One training step samples ``batch_prompts`` prompts, ``group_size`` rollouts per prompt from the
policy, draws their rewards, asks the core for the advantages (:func:`corrgrpo_core.compute_advantages`
-- the simulation has no estimator maths of its own) and takes an Adam step on the REINFORCE
gradient ``mean_i A_i * grad log pi(y_i)``. Adam, as in LLM training, removes the estimators'
overall scale differences, so what remains is how each estimator distributes credit within and across
groups. Every ``eval_every`` steps the exact expected value of each component under the policy is
recorded (an average over all prompts, no sampling noise).

Everything is drawn from ``numpy.random.default_rng`` seeded with ``(seed, scenario index)``: the same
seed gives the same environment and the same random stream for every estimator (paired comparisons),
and the same numbers on every run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

import corrgrpo_core as cc

__all__ = [
    "SCENARIOS",
    "Environment",
    "RunCurves",
    "Scenario",
    "ScenarioResult",
    "SimulationConfig",
    "build_environment",
    "run_scenario",
    "run_simulation",
    "train_once",
]

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SimulationConfig:
    """Knobs of a simulation run; the defaults are the documented default run (< 1 minute)."""

    steps: int = 200
    seeds: int = 8
    n_prompts: int = 64
    n_candidates: int = 16
    n_features: int = 12
    batch_prompts: int = 16
    learning_rate: float = 0.02
    eval_every: int = 5
    threshold: float = 0.5
    first_seed: int = 0

    def __post_init__(self) -> None:
        for name in (
            "steps",
            "seeds",
            "n_prompts",
            "n_candidates",
            "n_features",
            "batch_prompts",
            "eval_every",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.batch_prompts > self.n_prompts:
            raise ValueError(f"batch_prompts ({self.batch_prompts}) exceeds n_prompts ({self.n_prompts})")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")

    @property
    def eval_steps(self) -> npt.NDArray[np.int64]:
        """Steps at which the policy is evaluated: 0, eval_every, ..., and always the last step."""
        steps = [*list(range(0, self.steps, self.eval_every)), self.steps]
        return np.array(sorted(set(steps)), dtype=np.int64)


@dataclass(frozen=True)
class Environment:
    """One drawn instance of a scenario.

    ``features`` ``(P, M, D)``; ``expected`` ``(P, M, K)`` the mean reward vector of each candidate;
    ``sample(rng, prompts, candidates)`` draws the ``(n, K)`` rewards of the chosen candidates.
    """

    features: Array
    expected: Array
    sample: Callable[[np.random.Generator, npt.NDArray[np.int64], npt.NDArray[np.int64]], Array]


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    components: tuple[str, ...]
    weights: tuple[float, ...]
    group_size: int
    build: Callable[[np.random.Generator, SimulationConfig], Environment] = field(repr=False)


# --------------------------------------------------------------------------- scenario construction


def _sigmoid(x: Array) -> Array:
    return 1.0 / (1.0 + np.exp(-x))


def _directions(rng: np.random.Generator, dim: int, count: int, *, shared: float) -> Array:
    """``count`` unit vectors whose pairwise cosine is about ``shared**2`` (a common skill part)."""
    common = rng.standard_normal(dim)
    common /= np.linalg.norm(common)
    own = rng.standard_normal((count, dim))
    own /= np.linalg.norm(own, axis=1, keepdims=True)
    dirs = shared * common + math.sqrt(1.0 - shared**2) * own
    return np.asarray(dirs / np.linalg.norm(dirs, axis=1, keepdims=True), dtype=np.float64)


def _features(rng: np.random.Generator, cfg: SimulationConfig) -> Array:
    return rng.standard_normal((cfg.n_prompts, cfg.n_candidates, cfg.n_features))


def _build_code_chain(rng: np.random.Generator, cfg: SimulationConfig) -> Environment:
    # Five nested pass/fail stages (format -> syntax -> compile -> runtime -> all tests pass), each
    # passed with probability q_k given the previous one, then AST similarity (continuous, noisy)
    # and efficiency (only counted when the tests pass). Noise is unclipped so that ``expected`` is
    # exactly the mean of ``sample``.
    phi = _features(rng, cfg)
    dirs = _directions(rng, cfg.n_features, 7, shared=0.5)
    logits = 1.5 * np.einsum("pmd,kd->pmk", phi, dirs)
    offsets = np.array([1.0, 1.5, 1.5, 0.0, -1.5])
    q = _sigmoid(logits[..., :5] + offsets)
    ast = _sigmoid(logits[..., 5] - 0.5)
    eff = _sigmoid(logits[..., 6])
    chain = np.cumprod(q, axis=-1)
    expected = np.concatenate([chain, ast[..., None], (chain[..., 4] * eff)[..., None]], axis=-1)

    def sample(rng: np.random.Generator, p: npt.NDArray[np.int64], m: npt.NDArray[np.int64]) -> Array:
        stages = np.cumprod(rng.random((p.size, 5)) < q[p, m], axis=-1).astype(np.float64)
        ast_draw = ast[p, m] + 0.1 * rng.standard_normal(p.size)
        return np.column_stack([stages, ast_draw, stages[:, 4] * eff[p, m]])

    return Environment(phi, expected, sample)


def _bernoulli_env(phi: Array, probs: Array, values: Array) -> Environment:
    """Independent pass/fail components: component k is ``values[k, 1]`` w.p. ``probs[..., k]``."""
    expected = values[:, 0] + probs * (values[:, 1] - values[:, 0])

    def sample(rng: np.random.Generator, p: npt.NDArray[np.int64], m: npt.NDArray[np.int64]) -> Array:
        hit = rng.random((p.size, probs.shape[-1])) < probs[p, m]
        return np.where(hit, values[:, 1], values[:, 0])

    return Environment(phi, expected, sample)


def _build_utility_security(rng: np.random.Generator, cfg: SimulationConfig) -> Environment:
    # The more a candidate complies with the task, the likelier it also follows an injected
    # instruction: security's direction leans against utility's.
    phi = _features(rng, cfg)
    u, other = _directions(rng, cfg.n_features, 2, shared=0.0)
    s = -0.6 * u + 0.8 * other
    probs = _sigmoid(np.stack([1.5 * phi @ u, 1.5 * phi @ s + 0.5], axis=-1))
    return _bernoulli_env(phi, probs, np.array([[0.0, 1.0], [0.0, 1.0]]))


def _build_duplicated(rng: np.random.Generator, cfg: SimulationConfig) -> Environment:
    # A correctness reward logged twice (e.g. by two reward functions that check the same thing)
    # next to an independent style reward.
    phi = _features(rng, cfg)
    acc, style = _directions(rng, cfg.n_features, 2, shared=0.0)
    probs = _sigmoid(np.stack([1.5 * phi @ acc - 0.5, 1.5 * phi @ style], axis=-1))
    base = _bernoulli_env(phi, probs, np.array([[0.0, 1.0], [0.0, 1.0]]))

    def sample(rng: np.random.Generator, p: npt.NDArray[np.int64], m: npt.NDArray[np.int64]) -> Array:
        draw = base.sample(rng, p, m)
        return draw[:, [0, 0, 1]]

    return Environment(phi, base.expected[..., [0, 0, 1]], sample)


def _build_anticorrelated(rng: np.random.Generator, cfg: SimulationConfig) -> Environment:
    # Tool calling: parameter values in [-1.5, 1.5] and format in {0, 1}. Candidates that get the
    # values right tend to break the format (and the reverse), so within a group of 4 the two are
    # often perfectly anti-correlated -- the case where CorrGRPO's correlation sum collapses.
    phi = _features(rng, cfg)
    (v,) = _directions(rng, cfg.n_features, 1, shared=0.0)
    probs = _sigmoid(np.stack([1.5 * phi @ v, -1.5 * phi @ v + 1.0], axis=-1))
    return _bernoulli_env(phi, probs, np.array([[-1.5, 1.5], [0.0, 1.0]]))


def _build_dominant_scale(rng: np.random.Generator, cfg: SimulationConfig) -> Environment:
    # A reward-model score on a 0..10 scale next to two independent 0/1 checks: the score's variance
    # is most of GRPO's denominator in every group, the setting the paper's Figure 2 illustrates.
    phi = _features(rng, cfg)
    score_dir, fmt_dir, lang_dir = _directions(rng, cfg.n_features, 3, shared=0.0)
    score = 10.0 * _sigmoid(1.5 * phi @ score_dir)
    probs = _sigmoid(np.stack([1.5 * phi @ fmt_dir, 1.5 * phi @ lang_dir - 0.5], axis=-1))
    checks = _bernoulli_env(phi, probs, np.array([[0.0, 1.0], [0.0, 1.0]]))

    def sample(rng: np.random.Generator, p: npt.NDArray[np.int64], m: npt.NDArray[np.int64]) -> Array:
        noisy = score[p, m] + rng.standard_normal(p.size)
        return np.column_stack([noisy, checks.sample(rng, p, m)])

    return Environment(phi, np.concatenate([score[..., None], checks.expected], axis=-1), sample)


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "code_chain",
            "seven code rewards gated in a chain (format > syntax > compile > runtime > pass) plus "
            "AST similarity and efficiency, weighted .05/.05/.05/.25/.60/.30/.20 as in the paper's "
            "code launcher; groups of 8",
            ("format", "syntax", "compile", "runtime", "pass", "ast_similarity", "efficiency"),
            (0.05, 0.05, 0.05, 0.25, 0.60, 0.30, 0.20),
            8,
            _build_code_chain,
        ),
        Scenario(
            "utility_security",
            "agent security: utility 0/1 and security 0/1 with opposed directions (helpful "
            "candidates tend to follow injections), equal weights; groups of 8",
            ("utility", "security"),
            (1.0, 1.0),
            8,
            _build_utility_security,
        ),
        Scenario(
            "duplicated",
            "a correctness reward logged twice next to an independent style reward, all 0/1 with "
            "weight 1; groups of 8",
            ("correct", "correct_copy", "style"),
            (1.0, 1.0, 1.0),
            8,
            _build_duplicated,
        ),
        Scenario(
            "anticorrelated",
            "tool calling: parameter values in {-1.5, +1.5} against format in {0, 1}, anti-correlated "
            "across candidates, weight 1; groups of 4",
            ("values", "format"),
            (1.0, 1.0),
            4,
            _build_anticorrelated,
        ),
        Scenario(
            "dominant_scale",
            "a 0-10 reward-model score (Gaussian noise, sd 1) next to two independent 0/1 checks "
            "(format, language), weight 1; groups of 8",
            ("score", "format", "language"),
            (1.0, 1.0, 1.0),
            8,
            _build_dominant_scale,
        ),
    )
}


# --------------------------------------------------------------------------- training


@dataclass(frozen=True)
class RunCurves:
    """One training run: ``values`` ``(n_evals, K + 1)`` expected components then the weighted total."""

    values: Array
    max_abs_advantage: float


def _scenario_index(scenario: Scenario) -> int:
    # A custom scenario (not in SCENARIOS) shares stream 0 with the first built-in one.
    return list(SCENARIOS).index(scenario.name) if scenario.name in SCENARIOS else 0


def build_environment(scenario: Scenario, cfg: SimulationConfig, seed: int) -> Environment:
    """The environment every estimator trains in for ``seed`` (the same for all of them)."""
    return scenario.build(np.random.default_rng([seed, _scenario_index(scenario), 0]), cfg)


def _expected_under_policy(theta: Array, env: Environment) -> Array:
    logits = env.features @ theta
    logits -= logits.max(axis=1, keepdims=True)
    pi = np.exp(logits)
    pi /= pi.sum(axis=1, keepdims=True)
    return np.asarray(np.einsum("pm,pmk->k", pi, env.expected) / env.expected.shape[0], dtype=np.float64)


def train_once(
    scenario: Scenario,
    estimator: str,
    cfg: SimulationConfig,
    seed: int,
    *,
    env: Environment | None = None,
    on_step: Callable[[], None] | None = None,
) -> RunCurves:
    """Train one policy with one estimator and return its evaluation curve (deterministic in ``seed``)."""
    if env is None:
        env = build_environment(scenario, cfg, seed)
    rng = np.random.default_rng([seed, _scenario_index(scenario), 1])
    weights = np.asarray(scenario.weights, dtype=np.float64)
    n, d = scenario.group_size, cfg.n_features
    theta = np.zeros(d)
    m1, m2 = np.zeros(d), np.zeros(d)
    beta1, beta2 = 0.9, 0.999
    eval_steps = set(cfg.eval_steps.tolist())
    rows: list[Array] = []
    max_abs = 0.0

    def record() -> None:
        comp = _expected_under_policy(theta, env)
        rows.append(np.append(comp, comp @ weights))

    record()
    for step in range(1, cfg.steps + 1):
        prompts = rng.choice(cfg.n_prompts, size=cfg.batch_prompts, replace=False)
        phi = env.features[prompts]  # (B, M, D)
        logits = phi @ theta
        pi = np.exp(logits - logits.max(axis=1, keepdims=True))
        pi /= pi.sum(axis=1, keepdims=True)
        cdf = np.cumsum(pi, axis=1)
        draws = rng.random((cfg.batch_prompts, n))
        cand = np.minimum((draws[:, :, None] > cdf[:, None, :]).sum(-1), cfg.n_candidates - 1)
        p_rows = np.repeat(prompts, n)
        rewards = env.sample(rng, p_rows, cand.reshape(-1))
        # Groups are dense (B prompts x n rollouts), the core's fastest layout.
        groups = rewards.reshape(cfg.batch_prompts, n, -1)
        adv = np.asarray(
            cc.compute_advantages(groups, estimator=estimator, weights=weights), dtype=np.float64
        )
        max_abs = max(max_abs, float(np.max(np.abs(adv))))
        # grad log pi(m | p) = phi[p, m] - E_pi[phi[p, .]]
        chosen = np.take_along_axis(phi, cand[:, :, None], axis=1)  # (B, n, D)
        mean_phi = np.einsum("bm,bmd->bd", pi, phi)
        score = chosen - mean_phi[:, None, :]
        grad = np.einsum("bn,bnd->d", adv.reshape(cfg.batch_prompts, n), score) / adv.size
        m1 = beta1 * m1 + (1 - beta1) * grad
        m2 = beta2 * m2 + (1 - beta2) * grad**2
        theta = theta + cfg.learning_rate * (m1 / (1 - beta1**step)) / (
            np.sqrt(m2 / (1 - beta2**step)) + 1e-8
        )
        if step in eval_steps:
            record()
        if on_step is not None:
            on_step()
    return RunCurves(np.stack(rows), max_abs)


# --------------------------------------------------------------------------- aggregation


@dataclass(frozen=True)
class ScenarioResult:
    """All runs of one scenario.

    ``curves[estimator]`` is ``(seeds, n_evals, K + 1)``; the last column is the weighted total.
    ``initial`` / ``oracle`` ``(K + 1,)``: value under the uniform policy and the best value a policy
    could reach for that column alone (the per-prompt best candidate), both averaged over seeds.
    """

    scenario: Scenario
    steps: npt.NDArray[np.int64]
    curves: dict[str, Array]
    max_abs_advantage: dict[str, float]
    initial: Array
    oracle: Array
    threshold: float

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.scenario.components, "total")

    @property
    def threshold_values(self) -> Array:
        return np.asarray(self.initial + self.threshold * (self.oracle - self.initial), dtype=np.float64)

    def final(self, estimator: str) -> tuple[Array, Array]:
        """Mean over seeds of the last evaluation, and the half-width of its 95% normal interval."""
        last = self.curves[estimator][:, -1, :]
        return last.mean(axis=0), _ci_half_width(last)

    def steps_to_threshold(self, estimator: str) -> tuple[Array, npt.NDArray[np.int64]]:
        """Per column: the median over seeds of the first evaluated step at or above the threshold
        (a seed that never gets there counts as infinitely slow, so the median is ``inf`` when at
        most half the seeds get there), and how many seeds got there."""
        hit = self.curves[estimator] >= self.threshold_values
        reached = hit.any(axis=1)
        first = np.where(reached, self.steps[np.argmax(hit, axis=1)].astype(np.float64), np.inf)
        return np.asarray(np.median(first, axis=0), dtype=np.float64), reached.sum(axis=0).astype(np.int64)

    def paired_difference(self, estimator: str, baseline: str) -> tuple[Array, Array]:
        """Final ``estimator - baseline`` per column (same seeds, same environments): mean and CI."""
        diff = self.curves[estimator][:, -1, :] - self.curves[baseline][:, -1, :]
        return diff.mean(axis=0), _ci_half_width(diff)


def _ci_half_width(samples: Array) -> Array:
    if samples.shape[0] < 2:
        return np.full(samples.shape[1:], np.nan)
    return np.asarray(1.96 * samples.std(axis=0, ddof=1) / math.sqrt(samples.shape[0]), dtype=np.float64)


def _reference_values(env: Environment, weights: Array) -> tuple[Array, Array]:
    cols = np.concatenate([env.expected, (env.expected @ weights)[..., None]], axis=-1)
    return cols.mean(axis=(0, 1)), cols.max(axis=1).mean(axis=0)


def run_scenario(
    scenario: Scenario,
    estimators: Sequence[str],
    cfg: SimulationConfig,
    *,
    on_step: Callable[[], None] | None = None,
) -> ScenarioResult:
    weights = np.asarray(scenario.weights, dtype=np.float64)
    curves: dict[str, list[Array]] = {e: [] for e in estimators}
    max_abs = dict.fromkeys(estimators, 0.0)
    initial, oracle = [], []
    for seed in range(cfg.first_seed, cfg.first_seed + cfg.seeds):
        env = build_environment(scenario, cfg, seed)
        init, best = _reference_values(env, weights)
        initial.append(init)
        oracle.append(best)
        for name in estimators:
            run = train_once(scenario, name, cfg, seed, env=env, on_step=on_step)
            curves[name].append(run.values)
            max_abs[name] = max(max_abs[name], run.max_abs_advantage)
    return ScenarioResult(
        scenario,
        cfg.eval_steps,
        {e: np.stack(v) for e, v in curves.items()},
        max_abs,
        np.mean(initial, axis=0),
        np.mean(oracle, axis=0),
        cfg.threshold,
    )


def run_simulation(
    scenarios: Iterable[str],
    estimators: Sequence[str],
    cfg: SimulationConfig,
    *,
    on_step: Callable[[], None] | None = None,
) -> list[ScenarioResult]:
    return [run_scenario(SCENARIOS[name], estimators, cfg, on_step=on_step) for name in scenarios]


# --------------------------------------------------------------------------- reporting


def _steps_text(median: float, reached: int, seeds: int) -> str:
    if not np.isfinite(median):
        return f"not reached ({reached}/{seeds})"
    return f"{median:.0f}" if reached == seeds else f"{median:.0f} ({reached}/{seeds})"


def verdict(
    result: ScenarioResult, column: int, *, estimator: str = "corrgrpo", baseline: str = "grpo"
) -> str:
    """``better`` / ``worse`` when the paired 95% interval of the final difference excludes 0,
    otherwise ``no clear difference``; a column that should go down is not treated specially."""
    diff, half = result.paired_difference(estimator, baseline)
    if np.isnan(half[column]) or abs(diff[column]) <= half[column]:
        return "no clear difference"
    return "better" if diff[column] > 0 else "worse"


def comparison_rows(
    result: ScenarioResult, *, estimator: str = "corrgrpo", baseline: str = "grpo"
) -> list[list[str]]:
    """One row per column: baseline and estimator final values and steps, the paired difference,
    the verdict, and the estimator with the best final value."""
    seeds = next(iter(result.curves.values())).shape[0]
    base_final, _ = result.final(baseline)
    est_final, _ = result.final(estimator)
    diff, half = result.paired_difference(estimator, baseline)
    base_steps, base_hits = result.steps_to_threshold(baseline)
    est_steps, est_hits = result.steps_to_threshold(estimator)
    finals = {name: result.final(name)[0] for name in result.curves}
    rows = []
    for j, column in enumerate(result.columns):
        best = max(finals, key=lambda n: finals[n][j])
        rows.append(
            [
                result.scenario.name,
                column,
                f"{base_final[j]:.3f}",
                f"{est_final[j]:.3f}",
                f"{diff[j]:+.3f} ± {half[j]:.3f}",
                verdict(result, j, estimator=estimator, baseline=baseline),
                _steps_text(base_steps[j], int(base_hits[j]), seeds),
                _steps_text(est_steps[j], int(est_hits[j]), seeds),
                f"{best} ({finals[best][j]:.3f})",
            ]
        )
    return rows


COMPARISON_HEADERS = (
    "scenario",
    "component",
    "grpo final",
    "corrgrpo final",
    "corrgrpo - grpo (95% CI)",
    "verdict",
    "grpo steps",
    "corrgrpo steps",
    "best final",
)


def verdict_words(
    results: Sequence[ScenarioResult], *, estimator: str = "corrgrpo", baseline: str = "grpo"
) -> list[str]:
    """The comparison table in words: per scenario, the components where ``estimator`` ends better,
    worse or not clearly different from ``baseline``, and its largest |advantage| against the
    baseline's, with what a large one means."""
    lines = []
    for r in results:
        if not {estimator, baseline} <= set(r.curves):
            continue
        verdicts = [verdict(r, j, estimator=estimator, baseline=baseline) for j in range(len(r.columns))]
        by = {v: [c for c, w in zip(r.columns, verdicts, strict=True) if w == v] for v in set(verdicts)}
        parts = [
            f"{word} on {', '.join(by[key])}"
            for key, word in (
                ("better", "better"),
                ("worse", "WORSE"),
                ("no clear difference", "no clear difference"),
            )
            if by.get(key)
        ]
        top, base = r.max_abs_advantage[estimator], r.max_abs_advantage[baseline]
        n = r.scenario.group_size
        line = f"- {r.scenario.name}: {estimator} {'; '.join(parts)}; largest |A| {top:.3g} ({baseline} {base:.3g})"
        if top > 10 * (n - 1) / math.sqrt(n):
            line += (
                f": degenerate groups (components that cancel, correlation sum ~0) make {estimator}'s advantage "
                "up to 1000x the centred total; min_correlation_sum=1 bounds it (docs/method.md)"
            )
        lines.append(line)
    if lines:
        worse = sum("WORSE" in line for line in lines)
        lines.insert(
            0,
            f"In words ({estimator} against {baseline}, final values paired over seeds; "
            f"{estimator} is worse somewhere in {worse} of {len(lines)} scenarios; |A| of {estimator} is in "
            f"reward units, {baseline}'s is at most (n-1)/sqrt(n)):",
        )
    return lines


def render_report(results: Sequence[ScenarioResult], cfg: SimulationConfig) -> str:
    """Markdown tables: CorrGRPO against GRPO over all scenarios, then per scenario every estimator's
    final values, steps to threshold and largest advantage."""
    from .tables import markdown_table

    if not results:
        return ""
    has_pair = all({"grpo", "corrgrpo"} <= set(r.curves) for r in results)
    out = [
        (
            f"Simulation: {cfg.seeds} seeds x {cfg.steps} steps, {cfg.n_prompts} prompts x "
            f"{cfg.n_candidates} candidates, {cfg.batch_prompts} prompts per step, Adam lr {cfg.learning_rate}; threshold = "
            f"{cfg.threshold:g} of the way from the uniform policy to the best single-column value."
        ),
        "",
    ]
    if has_pair:
        rows = [row for r in results for row in comparison_rows(r)]
        out += [
            "## CorrGRPO against GRPO (final values, paired over seeds)",
            "",
            markdown_table(COMPARISON_HEADERS, rows),
            "",
            *verdict_words(results),
            "",
        ]
    for r in results:
        seeds = next(iter(r.curves.values())).shape[0]
        cols = list(r.columns)
        final_rows, step_rows = [], []
        for name in r.curves:
            mean, half = r.final(name)
            final_rows.append(
                [
                    name,
                    *(f"{m:.3f} ± {h:.3f}" for m, h in zip(mean, half, strict=False)),
                    f"{r.max_abs_advantage[name]:.3g}",
                ]
            )
            med, hits = r.steps_to_threshold(name)
            step_rows.append(
                [name, *(_steps_text(m, int(h), seeds) for m, h in zip(med, hits, strict=False))]
            )
        out += [
            f"## {r.scenario.name}",
            "",
            r.scenario.summary + ".",
            "",
            "uniform policy: " + ", ".join(f"{c} {v:.3f}" for c, v in zip(cols, r.initial, strict=False)),
            "best single-column value: "
            + ", ".join(f"{c} {v:.3f}" for c, v in zip(cols, r.oracle, strict=False)),
            "",
            "final expected value (mean ± 95% CI over seeds) and the largest |advantage| seen:",
            "",
            markdown_table(["estimator", *cols, "max abs(A)"], final_rows),
            "",
            "steps to threshold (median over seeds; seeds that got there):",
            "",
            markdown_table(["estimator", *cols], step_rows),
            "",
        ]
    return "\n".join(out)


def summary_records(results: Sequence[ScenarioResult]) -> list[dict[str, object]]:
    """Long-format rows (scenario, estimator, component, ...) for ``summary.csv``."""
    records: list[dict[str, object]] = []
    for r in results:
        for name in r.curves:
            mean, half = r.final(name)
            med, hits = r.steps_to_threshold(name)
            for j, column in enumerate(r.columns):
                records.append(
                    {
                        "scenario": r.scenario.name,
                        "estimator": name,
                        "component": column,
                        "final_mean": float(mean[j]),
                        "final_ci95": float(half[j]),
                        "steps_to_threshold_median": float(med[j]),
                        "seeds_reached": int(hits[j]),
                        "initial": float(r.initial[j]),
                        "oracle": float(r.oracle[j]),
                        "max_abs_advantage": r.max_abs_advantage[name],
                    }
                )
    return records
