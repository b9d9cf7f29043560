"""The seven-component code reward: extraction, one judge job per sample (in a lane of sandboxes), stage assembly."""

from __future__ import annotations

import ast
import concurrent.futures
import dataclasses
import functools
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..sandbox import Sandbox, SandboxUnavailableError
from ._extract import _defines, entry_name, extract_code, parse_verifier
from ._lanes import run_job, sandbox_for
from .sandboxed._syntax import ast_tokens, prune, similarity

__all__ = [
    "COMPONENTS",
    "DEFAULT_WEIGHTS",
    "PROFILES",
    "CodeRewardConfig",
    "compute_score",
    "compute_score_batch",
    "score_batch",
]

COMPONENTS: tuple[str, ...] = (
    "format_reward",
    "syntax_reward",
    "compile_reward",
    "runtime_reward",
    "accuracy_reward",
    "ast_similarity_reward",
    "efficiency_reward",
)
#: ``CodeRewardConfig.profile`` values: the paper's definitions, or runtime paid only with accuracy.
PROFILES: tuple[str, ...] = ("paper", "hardened")
#: Weights of the paper's code launcher, aligned with ``COMPONENTS``.
DEFAULT_WEIGHTS: tuple[float, ...] = (0.05, 0.05, 0.05, 0.25, 0.60, 0.30, 0.20)
METADATA: tuple[str, ...] = (
    "timeout",
    "sandbox_error",
    "ast_reference_available",
    "ast_truncated",
    "efficiency_applied",
    "generated_runtime_seconds",
    "reference_runtime_seconds",
    "memory_cgroup",
)
# Keyword names the reference reward accepts for its weights (verl reward_kwargs), in COMPONENTS order.
_REFERENCE_WEIGHT_NAMES = (
    "format_weight",
    "syntax_weight",
    "compile_weight",
    "runtime_weight",
    "correctness_weight",
    "ast_similarity_weight",
    "efficiency_weight",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CodeRewardConfig:
    """Options of the code reward (all keyword-only; defaults follow the paper's code launcher).

    Parameters
    ----------
    weights
        Seven non-negative weights in ``COMPONENTS`` order, default ``DEFAULT_WEIGHTS``; ``score`` is the
        (unnormalised) weighted sum.
    timeout_seconds
        Wall-clock limit of the whole sandboxed run (tests and timing), default 5.0.
    memory_mb
        Address-space limit, default 1024.
    timing_rounds, timing_min_rounds, timing_budget_seconds
        Efficiency timing after all tests pass: up to ``timing_rounds`` (default 5) alternating runs of
        the test suite for the candidate and the reference, at least ``timing_min_rounds`` (2) when time
        allows, stopping once ``timing_budget_seconds`` (1.0) are spent.
    ast_token_cap
        AST similarity compares at most this many tokens of each node sequence (default 20000); a longer
        program is compared on its first ``ast_token_cap`` tokens and flagged ``ast_truncated``.
    max_code_chars
        Longer extracted programs are not run and score 0 beyond format (default 100000).
    allow_unsafe
        Allow the rlimits-only fallback when bubblewrap is unavailable (default False: refuse).
    python_paths
        Host directories put read-only on the sandbox's ``PYTHONPATH`` (e.g. a site-packages with
        ``sortedcontainers``); default none: the sandbox interpreter's own standard library only.
    sandbox_packages
        Names of installed packages exposed read-only inside the candidate's sandbox (e.g.
        ``("numpy",)``, as HumanEval's own harness allows), each with the libraries it bundles; default
        none. A name that is not an importable package is a ``ValueError``.
    keep_timing
        Attach the raw per-round times as ``"_timing": (candidate, reference)`` (for ``evaluate``).
    keep_error
        Attach ``"_error"``: the judge's text for the first stage that failed (syntax, compile, the run:
        the failed assertion or the program's exception, as ``Name: message``), ``""`` when none did
        (for ``evaluate``'s records).
    profile
        ``"paper"`` (default): the reference reward's definitions. ``"hardened"``: ``runtime_reward`` is
        paid only to a program that passes every test, so a program that gives up (``return None``) or
        swallows its own exceptions earns no more than an honest attempt that fails (docs/tasks/code.md,
        *Profiles*); every other component is the paper's.
    """

    weights: tuple[float, ...] = DEFAULT_WEIGHTS
    timeout_seconds: float = 5.0
    memory_mb: int = 1024
    timing_rounds: int = 5
    timing_min_rounds: int = 2
    timing_budget_seconds: float = 1.0
    ast_token_cap: int = 20_000
    max_code_chars: int = 100_000
    allow_unsafe: bool = False
    python_paths: tuple[str, ...] = ()
    sandbox_packages: tuple[str, ...] = ()
    keep_timing: bool = False
    keep_error: bool = False
    profile: str = "paper"

    def __post_init__(self) -> None:
        weights = tuple(float(w) for w in self.weights)
        if len(weights) != len(COMPONENTS):
            raise ValueError(
                f"weights needs {len(COMPONENTS)} entries ({', '.join(COMPONENTS)}), got {len(weights)}"
            )
        if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(f"weights must be finite, non-negative and not all zero, got {weights}")
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "python_paths", tuple(str(p) for p in self.python_paths))
        packages = (
            (self.sandbox_packages,) if isinstance(self.sandbox_packages, str) else self.sandbox_packages
        )
        object.__setattr__(self, "sandbox_packages", tuple(str(p) for p in packages))
        if not self.timeout_seconds > 0 or not math.isfinite(self.timeout_seconds):
            raise ValueError(f"timeout_seconds must be positive, got {self.timeout_seconds}")
        if self.profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, got {self.profile!r}")
        if self.ast_token_cap < 1:
            raise ValueError(f"ast_token_cap must be at least 1, got {self.ast_token_cap}")
        if self.timing_rounds < 1 or self.timing_min_rounds < 1:
            raise ValueError("timing_rounds and timing_min_rounds must be at least 1")

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> CodeRewardConfig:
        """Build from verl-style ``reward_kwargs``; also takes the reference reward's names."""
        options = dict(kwargs)
        weights = options.pop("weights", None)
        if isinstance(weights, Mapping):
            unknown = set(weights) - set(COMPONENTS)
            if unknown:
                raise ValueError(f"unknown weight names {sorted(unknown)}; known: {COMPONENTS}")
            weights = tuple(
                float(weights.get(name, d)) for name, d in zip(COMPONENTS, DEFAULT_WEIGHTS, strict=False)
            )
        named = [options.pop(name, None) for name in _REFERENCE_WEIGHT_NAMES]
        if any(value is not None for value in named):
            base = weights if weights is not None else DEFAULT_WEIGHTS
            weights = tuple(float(v) if v is not None else b for v, b in zip(named, base, strict=False))
        if "memory_limit_mb" in options:
            options["memory_mb"] = options.pop("memory_limit_mb")
        fields = {f.name for f in dataclasses.fields(cls)}
        config = {k: v for k, v in options.items() if k in fields}  # verl passes extra keys; ignore them
        if weights is not None:
            config["weights"] = tuple(weights)
        return cls(**config)


def _reference_code(reference: str, name: str | None) -> str:
    """The reference solution's program: a fenced reference is extracted, any other is taken as it is."""
    code, fenced = extract_code(reference, entry_name=name) if "```" in reference else (reference, False)
    return code if fenced else reference.strip()


@functools.lru_cache(maxsize=4096)
def _reference_tokens(
    reference: str, name: str | None, cap: int, keep: tuple[str, ...] | None = None
) -> tuple[tuple[str, ...], bool] | None:
    """The reference's node sequence (at most ``cap`` tokens) and whether it was longer; None when the
    reference does not parse or is empty (no AST similarity then, as in the reference). With ``keep``
    (the hardened profile), the sequence of its live code (``_syntax.prune``)."""
    code = _reference_code(reference, name)
    if not code:
        return None
    try:
        tree = ast.parse(code)
        tokens = ast_tokens(prune(tree, set(keep)) if keep is not None else tree, cap + 1)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tuple(tokens[:cap]), len(tokens) > cap


def _finite_positive(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def _result(config: CodeRewardConfig, values: Mapping[str, float]) -> dict[str, float]:
    out = {name: float(values.get(name, 0.0)) for name in COMPONENTS}
    score = sum(w * out[name] for w, name in zip(config.weights, COMPONENTS, strict=False))
    return {"score": score, **out, **{name: float(values.get(name, 0.0)) for name in METADATA}}


def _score_one(
    solution_str: str, verifier: dict[str, Any], config: CodeRewardConfig, sandbox: Sandbox
) -> dict[str, float]:
    name = entry_name(verifier) if verifier["kind"] == "check" else None
    code, fenced = extract_code(solution_str or "", entry_name=name)
    values: dict[str, float] = {}
    values["memory_cgroup"] = float(sandbox.memory_mode == "cgroup")
    reference = verifier.get("reference_solution") or None
    keep = _kept_names(verifier) if config.profile == "hardened" else None
    ref = (
        _reference_tokens(reference, name, config.ast_token_cap, keep) if isinstance(reference, str) else None
    )
    values["ast_reference_available"] = float(ref is not None)
    if len(code) > config.max_code_chars:
        return _with_error(
            config, _result(config, values), f"program longer than {config.max_code_chars} characters"
        )
    ref_code = _reference_code(reference, name) if isinstance(reference, str) else None
    stored_ref_time = _finite_positive(verifier.get("reference_runtime_seconds"))
    prompt = verifier.get("prompt") or ""
    job = {
        "kind": verifier["kind"],
        "code": code,
        "prompt": prompt,
        "test": verifier.get("test"),
        "entry_point": verifier.get("entry_point"),
        "entry_top": name,
        "tests": verifier.get("tests"),
        "tolerance": verifier.get("tolerance"),
        "reference": ref_code,
        "seconds": config.timeout_seconds,
        "ast_token_cap": config.ast_token_cap if ref is not None else 0,
        "timing": None,
        "ast_prune": list(keep) if keep is not None and ref is not None else None,
    }
    if ref_code is not None or stored_ref_time is not None:
        job["timing"] = {
            "rounds": config.timing_rounds,
            "min_rounds": config.timing_min_rounds,
            "budget": config.timing_budget_seconds,
        }
    key = (prompt, str(verifier.get("test")), str(verifier.get("entry_point")), ref_code)
    if verifier["kind"] == "check" and ref_code:
        if key not in _SHAPES:  # the reference on the same tests, in a job (and time limit) of its own
            reference_job = {**job, "code": ref_code, "timing": None, "ast_token_cap": 0, "ast_prune": None}
            reference_job.update(shapes={"shapes": None}, record_shapes=True)
            found, _ = run_job(
                reference_job, sandbox=sandbox, memory_mb=config.memory_mb, seconds=config.timeout_seconds
            )
            _keep_shapes(key, found.get("shapes"))
        job["shapes"] = _SHAPES.get(key)  # None (a failed lane): the judge runs the reference itself
    records, clean = run_job(job, sandbox=sandbox, memory_mb=config.memory_mb, seconds=config.timeout_seconds)
    _keep_shapes(key, records.get("shapes"))
    total = (_SHAPES.get(key) or {}).get("asserts")
    result = _assemble(config, values, records, clean, fenced, code, name, ref, stored_ref_time, total)
    return _with_error(config, result, _first_error(records, clean))


# Per problem, which of the reference's answers held objects of its own (the judge's ``shapes`` record),
# so that the reference runs once per problem and process for it, not once per sample.
_SHAPES: dict[tuple[str, str, str, str | None], dict[str, Any]] = {}
_SHAPES_CAP = 4096


def _keep_shapes(key: tuple[str, str, str, str | None], record: Mapping[str, Any] | None) -> None:
    if record is None:
        return
    shapes = record.get("shapes")
    if shapes is not None and not (isinstance(shapes, list) and all(type(x) is bool for x in shapes)):
        return
    asserts = record.get("asserts")
    if len(_SHAPES) >= _SHAPES_CAP:
        _SHAPES.pop(next(iter(_SHAPES)), None)
    _SHAPES[key] = {"shapes": shapes, "asserts": asserts if type(asserts) is int and asserts >= 0 else None}


@functools.lru_cache(maxsize=4096)
def _kept_names_of(entry_point: str, test: str) -> tuple[str, ...]:
    return tuple(sorted(set(re.findall(r"[A-Za-z_]\w*", entry_point + "\n" + test))))


def _kept_names(verifier: Mapping[str, Any]) -> tuple[str, ...]:
    """Names the tests may read (the entry point's and every identifier of the test code): definitions
    of these are never pruned as unused."""
    return _kept_names_of(str(verifier.get("entry_point") or ""), str(verifier.get("test") or ""))


def _with_error(config: CodeRewardConfig, result: dict[str, Any], error: str) -> dict[str, Any]:
    if config.keep_error:
        result["_error"] = error
    return result


def _first_error(records: Mapping[str, Mapping[str, Any]], clean: bool) -> str:
    """The judge's text for the first stage that failed, ``""`` when none did."""
    if not records:
        return "" if clean else "no record from the judge (a sandbox failure)"
    for stage in ("syntax", "compile"):
        record = records.get(stage)
        if record is None:
            return f"no {stage} record"
        if record.get("ok") is not True:
            return str(record.get("error") or f"{stage} failed")[:2000]
    run = records.get("run")
    if run is None:
        return "no run record (the job did not finish)"
    if run.get("status") != "passed":
        return f"{run.get('status')}: {run.get('error') or ''}".rstrip(": ")[:2000]
    timing = records.get("timing") or {}
    if timing.get("error"):  # passed, but no efficiency (a timed round failed, or its answers differed)
        return f"timing: {timing.get('error')}"[:2000]
    return ""


def _assemble(
    config: CodeRewardConfig,
    values: dict[str, float],
    records: Mapping[str, Mapping[str, Any]],
    clean: bool,
    fenced: bool,
    code: str,
    name: str | None,
    ref: tuple[tuple[str, ...], bool] | None,
    stored_ref_time: float | None,
    total_asserts: int | None = None,
) -> dict[str, Any]:
    """The components from the judge's records (stages chain: each needs the one before)."""
    values["sandbox_error"] = float(not records and not clean)
    syntax = records.get("syntax", {})
    values["format_reward"] = _format(fenced, code, name, syntax)
    if not syntax.get("ok"):
        return _result(config, values)
    values["syntax_reward"] = 1.0
    if ref is not None:
        hardened = config.profile == "hardened"
        tokens = syntax.get("tokens_pruned" if hardened else "tokens")
        tokens = [t for t in tokens if isinstance(t, str)] if isinstance(tokens, list) else []
        values["ast_similarity_reward"], cut = similarity(tokens, ref[0])
        values["ast_truncated"] = float(cut or ref[1] or syntax.get("tokens_truncated") is True)
        if hardened:
            values["ast_similarity_reward"] *= _share_passed(records, total_asserts)
    if records.get("compile", {}).get("ok") is not True:
        return _result(config, values)
    values["compile_reward"] = 1.0
    outcome = records.get("run")
    if outcome is None or outcome.get("status") == "timeout":
        values["timeout"] = float(outcome is not None or not clean)
        return _result(config, values)
    values["accuracy_reward"] = float(outcome.get("status") == "passed")
    ran = ("passed",) if config.profile == "hardened" else ("passed", "wrong_answer")
    values["runtime_reward"] = float(outcome.get("status") in ran)
    if not values["accuracy_reward"]:
        return _result(config, values)
    timing = records.get("timing", {})
    candidate = _times(timing.get("candidate"))
    references = _times(timing.get("reference"))
    ref_time = min(references) if references else stored_ref_time
    if candidate and ref_time is not None:
        generated = min(candidate)
        values["efficiency_applied"] = 1.0
        values["generated_runtime_seconds"] = generated
        values["reference_runtime_seconds"] = ref_time
        values["efficiency_reward"] = efficiency(candidate, references, ref_time)
    result: dict[str, Any] = _result(config, values)
    if config.keep_timing and candidate and references:
        result["_timing"] = (candidate, references)
    return result


# One-sided 95% quantiles of Student's t by degrees of freedom (beyond the table: the normal's).
_T95 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761)


def efficiency(candidate: Sequence[float], references: Sequence[float], stored: float | None = None) -> float:
    """``clip(1 - t_gen / t_ref, 0, 1)`` paid only for what the rounds show beyond their own noise.

    With paired rounds (round k of the candidate against round k of the reference, measured in the
    same run), the speed-up of each pair ``d_k = 1 - c_k / r_k`` and the one-sided 95% lower confidence
    bound of their mean, ``mean(d) - t * sd(d) / sqrt(n)``, clipped to [0, 1]: a program that only
    equals the reference scores about 0 on average (the minimum over rounds paid symmetric noise, 0.04
    of 1 for a 10% spread), a twice-as-fast one about 0.4-0.45 of its 0.5. One pair gives no noise
    estimate and pays 0. Without reference rounds (a stored reference runtime), the paper's
    ``clip(1 - min(c) / stored, 0, 1)``.
    """
    if not references:
        if not candidate or stored is None or not stored > 0:
            return 0.0
        return min(1.0, max(0.0, 1.0 - min(candidate) / stored))
    gains = [1.0 - c / r for c, r in zip(candidate, references, strict=False) if r > 0]
    n = len(gains)
    if n < 2:
        return 0.0
    mean = sum(gains) / n
    spread = math.sqrt(sum((g - mean) ** 2 for g in gains) / (n - 1))
    quantile = _T95[n - 2] if n - 2 < len(_T95) else 1.645
    return min(1.0, max(0.0, mean - quantile * spread / math.sqrt(n)))


def _share_passed(records: Mapping[str, Mapping[str, Any]], total: int | None) -> float:
    """The hardened profile's weight on a program's AST similarity: 1 when it passes every test, else the
    share of the reference's asserts it passed before the first that failed (0 without a count)."""
    run = records.get("run") or {}
    if records.get("compile", {}).get("ok") is True and run.get("status") == "passed":
        return 1.0
    passed = run.get("asserts")
    if type(passed) is not int or not total or passed <= 0:
        return 0.0
    return min(1.0, passed / total)


def _format(fenced: bool, code: str, name: str | None, syntax: Mapping[str, Any]) -> float:
    """Fenced, non-empty, and the entry point a top-level ``class``/``def`` of the parsed program (the
    judge's ``entry_defined``). A program that does not parse has no tree: there the reference's rule
    (``class name`` / ``def name`` anywhere in the code) decides; it earns nothing else."""
    if not fenced or not code.strip():
        return 0.0
    if name is None:
        return 1.0
    if syntax.get("ok") is True:
        return float(syntax.get("entry_defined") is True)
    return float(syntax.get("ok") is False and _defines(code, name))


def _times(values: Any) -> list[float]:
    """The rounds' processor times, in round order (round k pairs with the other side's round k): a
    time of 0 is a round faster than the server can tell from an empty session, not a missing one; a
    list with any value that is not a finite time >= 0 is no measurement at all (dropping the value
    alone would pair the rounds after it with the wrong ones)."""
    if not isinstance(values, list):
        return []
    times = [_finite_non_negative(v) for v in values[:1000]]
    return [] if None in times else [t for t in times if t is not None]


def _finite_non_negative(value: Any) -> float | None:
    if type(value) not in (int, float):  # the judge's records are plain numbers: no bool, str or object
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def compute_score(
    data_source: str | None,
    solution_str: str,
    ground_truth: str | bytes | Mapping[str, Any],
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """Seven-component reward of one completion, in verl's ``compute_score`` dict convention.

    ``score = sum_k w_k r_k`` over ``COMPONENTS`` with ``DEFAULT_WEIGHTS`` (0.05, 0.05, 0.05, 0.25,
    0.60, 0.30, 0.20). Stages chain: compile needs syntax, runtime needs compile, accuracy needs a run
    without error, efficiency ``clip(1 - t_gen / t_ref, 0, 1)`` needs accuracy; format (fenced code that
    defines the entry point) and AST similarity to the reference stand on their own (the latter needs
    valid syntax). The program runs in the bubblewrap ``Sandbox``; without it this raises
    ``SandboxUnavailableError`` unless ``allow_unsafe=True``.

    ``ground_truth`` is a verifier (JSON text or mapping): ``{"kind": "check", "prompt", "test",
    "entry_point", "reference_solution"?, "reference_runtime_seconds"?}`` (the LeetCodeDataset /
    reference layout; ``test`` defines ``check(candidate)``) or ``{"kind": "stdio", "tests": [{"input",
    "output"}, ...]}``. ``kwargs`` are ``CodeRewardConfig`` fields (verl ``reward_kwargs``; unknown
    keys are ignored).

    Examples
    --------
    >>> gt = {"prompt": "", "test": "def check(candidate):\\n    assert candidate(1) == 2\\n",
    ...       "entry_point": "Solution().solve",
    ...       "reference_solution": "class Solution:\\n    def solve(self, v):\\n        return v + 1\\n"}
    >>> text = "```python\\nclass Solution:\\n    def solve(self, v):\\n        return v + 1\\n```"
    >>> compute_score("leetcodedataset", text, gt)["accuracy_reward"]      # doctest: +SKIP
    1.0
    """
    config = CodeRewardConfig.from_kwargs(kwargs)
    verifier = parse_verifier(ground_truth)
    return _score_one(
        solution_str,
        verifier,
        config,
        sandbox_for(config.allow_unsafe, config.python_paths, config.sandbox_packages),
    )


def _zero(config: CodeRewardConfig, **flags: float) -> dict[str, float]:
    return _result(config, flags)


def score_batch(
    solution_strs: Sequence[str],
    ground_truths: Sequence[str | bytes | Mapping[str, Any]],
    *,
    max_workers: int | None = None,
    **kwargs: Any,
) -> list[dict[str, float]]:
    """Score many completions in parallel (a bounded thread pool; each worker scores in a lane of sandboxes).

    A sample whose scoring fails for any reason (bad verifier, sandbox start failure) gets all-zero
    components with ``sandbox_error = 1``; only a missing sandbox (``SandboxUnavailableError``) is
    raised, before any program runs. ``max_workers`` defaults to the number of usable cores.
    """
    if len(solution_strs) != len(ground_truths):
        raise ValueError(f"{len(solution_strs)} solutions but {len(ground_truths)} ground truths")
    config = CodeRewardConfig.from_kwargs(kwargs)
    sandbox = sandbox_for(config.allow_unsafe, config.python_paths, config.sandbox_packages)
    workers = max_workers if max_workers is not None else len(os.sched_getaffinity(0))
    if workers < 1:
        raise ValueError(f"max_workers must be at least 1, got {workers}")

    def one(index: int) -> dict[str, float]:
        try:
            return _score_one(solution_strs[index], parse_verifier(ground_truths[index]), config, sandbox)
        except SandboxUnavailableError:
            raise
        except Exception:  # noqa: BLE001 - one bad sample must not stop the batch
            return _zero(config, sandbox_error=1.0)

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(workers, max(1, len(solution_strs)))) as pool:
        return list(pool.map(one, range(len(solution_strs))))


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    **kwargs: Any,
) -> list[dict[str, float]]:
    """verl ``BatchRewardManager`` entry point: ``score_batch`` with verl's argument names."""
    del data_sources, extra_infos
    return score_batch(solution_strs, ground_truths, **kwargs)
