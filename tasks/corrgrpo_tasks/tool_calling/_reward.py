"""The RLLA tool-calling reward: output format plus function-name, parameter-name and value matches.

Every function here is total on model output: any text (malformed JSON, missing or repeated tags, wrong
JSON types, huge or deeply nested payloads) gets a defined score. Only a malformed *ground truth* (a
data bug, not a model error) raises ``ValueError``.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

COMPONENTS: tuple[str, ...] = ("function_name_reward", "parameter_reward", "values_reward", "format_reward")
"""Reward components in the order the paper's launcher passes them to the estimator."""

DEFAULT_WEIGHTS: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
"""The paper sets no component weights: every component counts once, so GRPO's scalar equals their sum."""

#: (min, max) of each component, as returned by :func:`compute_score`.
RANGES: Mapping[str, tuple[float, float]] = {
    "function_name_reward": (-0.5, 0.5),
    "parameter_reward": (-1.0, 1.0),
    "values_reward": (-1.5, 1.5),
    "format_reward": (0.0, 1.0),
    "accuracy_reward": (-3.0, 3.0),
    "score": (-3.0, 4.0),
    "exact_match": (0.0, 1.0),
}

_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_CALL_OPEN, _CALL_CLOSE = "<tool_call>", "</tool_call>"
_RESP_OPEN, _RESP_CLOSE = "<response>", "</response>"
# Chat-template turn markers that may survive decoding; the assistant's last turn is what gets scored.
_TURN_MARKERS: tuple[tuple[str, str], ...] = (
    ("<|im_start|>assistant", "<|im_end|>"),
    ("<|start_header_id|>assistant<|end_header_id|>", "<|eot_id|>"),
)


@dataclass(frozen=True)
class ParsedCalls:
    """Result of parsing one ``<tool_call>`` block.

    ``present`` is False when the text has no ``<tool_call>`` tag at all; ``calls`` is None when a tag is
    present but the block is malformed (no closing tag, no call line, a line that is not a JSON object
    with a string ``name`` and an object ``parameters``).
    """

    present: bool
    calls: tuple[dict[str, Any], ...] | None


def extract_prediction(text: str) -> str:
    """Return the assistant's final turn of ``text``, stripped (chat markers removed if any survived)."""
    for start, end in _TURN_MARKERS:
        if start in text:
            text = text.rsplit(start, 1)[1].split(end, 1)[0]
    return text.strip()


def _call_from_line(line: str) -> dict[str, Any] | None:
    try:
        call = json.loads(line)
    except (ValueError, RecursionError):  # JSONDecodeError, int-digit limits, nesting beyond the stack
        return None
    if not isinstance(call, dict):
        return None
    if not isinstance(call.get("name"), str) or not isinstance(call.get("parameters"), dict):
        return None
    return call


def parse_tool_calls(text: str) -> ParsedCalls:
    """Parse the first ``<tool_call>`` block of ``text``: one JSON call per non-blank line.

    >>> parse_tool_calls('<tool_call>\\n{"name": "f", "parameters": {"x": 1}}\\n</tool_call>').calls
    ({'name': 'f', 'parameters': {'x': 1}},)
    """
    if _CALL_OPEN not in text:
        return ParsedCalls(present=False, calls=None)
    after = text.split(_CALL_OPEN, 1)[1]
    if _CALL_CLOSE not in after:
        return ParsedCalls(present=True, calls=None)
    lines = [line for line in after.split(_CALL_CLOSE, 1)[0].split("\n") if line.strip()]
    calls = [_call_from_line(line) for line in lines]
    if not calls or any(call is None for call in calls):
        return ParsedCalls(present=True, calls=None)
    return ParsedCalls(present=True, calls=tuple(c for c in calls if c is not None))


@functools.lru_cache(maxsize=8)
def _format_pattern(*, tool_call: bool, response: bool, allow_missing_think_open: bool) -> re.Pattern[str]:
    head = "^(?:<think>)?" if allow_missing_think_open else "^<think>"
    body = head + r".*?</think>"
    if tool_call:
        body += r"\s*<tool_call>\n.*?\n</tool_call>"
    if response:
        body += r"\s*<response>.*?</response>"
    return re.compile(body + r"\Z", re.DOTALL)


def format_reward(prediction: str, ground_truth: str, *, allow_missing_think_open: bool = False) -> float:
    """1.0 when ``prediction`` has the layout the ground truth has, else 0.0.

    The layout is ``<think>...</think>`` followed by the ``<tool_call>`` block (tags on their own lines)
    and/or the ``<response>...</response>`` block, whichever the ground truth contains, each tag exactly
    once and nothing after the last block.
    """
    tool_call = _CALL_OPEN in ground_truth
    response = _RESP_OPEN in ground_truth
    for tags, wanted in (((_CALL_OPEN, _CALL_CLOSE), tool_call), ((_RESP_OPEN, _RESP_CLOSE), response)):
        # Counting first keeps the regex linear: with at most one of each block tag there is at most one
        # place the lazy groups can stop.
        if wanted and any(prediction.count(tag) != 1 for tag in tags):
            return 0.0
    pattern = _format_pattern(
        tool_call=tool_call, response=response, allow_missing_think_open=allow_missing_think_open
    )
    return 1.0 if pattern.search(prediction) else 0.0


def _multiset_jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    """Multiset Jaccard index: shared items over all items, counted with multiplicity; two empty lists match fully, one empty list not at all."""
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    inter = sum((Counter(a) & Counter(b)).values())
    return inter / (len(a) + len(b) - inter)


def _scale(score: float, local_max: float, low: float, high: float) -> float:
    """Map ``score`` in [0, local_max] linearly onto [low, high]; a vacuous component (max 0) gets ``high``."""
    if local_max == 0:
        return high
    return min(high, max(low, (high - low) * score / local_max + low))


def _values_equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except RecursionError:  # pathological nesting: treat as different rather than fail the batch
        return False


def _match_calls(
    gt_calls: Sequence[dict[str, Any]], pd_calls: Sequence[dict[str, Any]]
) -> tuple[float, float]:
    """Greedy one-to-one matching of ground-truth calls to predicted calls with the same name.

    Returns (sum of parameter-name Jaccard scores, number of exactly matching parameter values) over the
    matched ground-truth calls. Each ground-truth call takes the unused prediction maximising
    name-Jaccard + value count (the first on ties); a pairing scoring 0 is not a match.
    """
    used: set[int] = set()
    name_total = value_total = 0.0
    for gt in gt_calls:
        gt_params: dict[str, Any] = gt["parameters"]
        best: tuple[float, float, int] | None = None
        for j, pd in enumerate(pd_calls):
            if j in used or pd["name"] != gt["name"]:
                continue
            pd_params: dict[str, Any] = pd["parameters"]
            names = _multiset_jaccard(list(gt_params), list(pd_params))
            values = float(
                sum(1 for k, v in gt_params.items() if k in pd_params and _values_equal(pd_params[k], v))
            )
            if names + values > (best[0] + best[1] if best else 0.0):
                best = (names, values, j)
        if best is not None:
            used.add(best[2])
            name_total += best[0]
            value_total += best[1]
    return name_total, value_total


def _tool_components(gt: ParsedCalls, pd: ParsedCalls) -> tuple[float, float, float, bool]:
    """(function-name, parameter-name, parameter-value rewards, exact match) for one prediction."""
    if not gt.present or gt.calls is None:
        return 0.0, 0.0, 0.0, not pd.present
    if pd.calls is None:
        return -0.5, -1.0, -1.5, False
    if _values_equal(list(gt.calls), list(pd.calls)):
        return 0.5, 1.0, 1.5, True
    s_fn = _multiset_jaccard([c["name"] for c in gt.calls], [c["name"] for c in pd.calls])
    s_pn, s_pv = _match_calls(gt.calls, pd.calls)
    n_values = sum(len(c["parameters"]) for c in gt.calls)
    return (
        _scale(s_fn, 1, -0.5, 0.5),
        _scale(s_pn, len(gt.calls), -1.0, 1.0),
        _scale(s_pv, n_values, -1.5, 1.5),
        False,
    )


def _parse_ground_truth(ground_truth: str) -> ParsedCalls:
    gt = parse_tool_calls(ground_truth)
    if gt.present and gt.calls is None:
        raise ValueError(
            "ground truth has a <tool_call> block that is not one JSON object per line with a string "
            f"'name' and an object 'parameters': {ground_truth[:200]!r}"
        )
    return gt


def _as_text(solution: Any) -> str:
    """Model output as text; chat-format completions (a list of messages) give their last content."""
    if isinstance(solution, str):
        return solution
    if isinstance(solution, bytes):
        return solution.decode("utf-8", errors="replace")
    if isinstance(solution, Sequence) and solution and isinstance(solution[-1], Mapping):
        content = solution[-1].get("content")
        return content if isinstance(content, str) else ""
    return ""


def _wants_missing_think_open(extra_info: Mapping[str, Any] | None) -> bool:
    if not isinstance(extra_info, Mapping):
        return False
    names = (extra_info.get("model_name"), extra_info.get("experiment_name"))
    return any(isinstance(n, str) and "think" in n.lower() for n in names)


def compute_score(
    data_source: str,
    solution_str: Any,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    *,
    allow_missing_think_open: bool | None = None,
    **_: Any,
) -> dict[str, float]:
    """Score one tool-calling completion against its ground truth (the RLLA reward).

    With S_fn the multiset Jaccard of called function names, S_pn the summed parameter-name Jaccard of
    greedily matched calls over the number of ground-truth calls, and S_pv the number of exactly equal
    parameter values over the number of ground-truth parameters:

        function_name_reward = 0.5 (2 S_fn - 1)        in [-0.5, 0.5]
        parameter_reward     =     (2 S_pn - 1)        in [-1, 1]
        values_reward        = 1.5 (2 S_pv - 1)        in [-1.5, 1.5]   (+1.5 if the calls have no parameters)
        format_reward        = 1 if the layout matches the ground truth's, else 0
        accuracy_reward      = sum of the three tool components   in [-3, 3]
        score                = format_reward + accuracy_reward     in [-3, 4]

    An identical call list scores the maxima; a prediction whose ``<tool_call>`` block is missing or
    malformed scores the minima; a ground truth without a tool call gives 0 to the tool components.
    ``exact_match`` is 1 when the format is right and the call list equals the ground truth's (the
    RLLA "all-exact" metric).

    Parameters
    ----------
    data_source, extra_info
        As verl passes them; ``data_source`` is not checked (RLLA and API-Bank share the reward).
    solution_str
        The decoded completion. Non-text values score as empty text; a list of chat messages scores
        its last message's content.
    ground_truth
        The target text, e.g. ``<think>...</think>\\n<tool_call>\\n{"name": ..., "parameters": {...}}\\n</tool_call>``.
    allow_missing_think_open
        Accept completions that start inside the thought (templates that pre-fill ``<think>``).
        Default: True when ``extra_info["model_name"]`` or ``["experiment_name"]`` contains "think".

    Examples
    --------
    >>> gt = '<think>x</think>\\n<tool_call>\\n{"name": "f", "parameters": {"a": 1}}\\n</tool_call>'
    >>> compute_score("rlla", gt, gt)["score"]
    4.0
    >>> compute_score("rlla", "no tags", gt)["accuracy_reward"]
    -3.0
    """
    if isinstance(ground_truth, bytes):
        ground_truth = ground_truth.decode("utf-8")
    if not isinstance(ground_truth, str):
        raise TypeError(f"ground_truth must be a string, got {type(ground_truth).__name__}")
    if allow_missing_think_open is None:
        allow_missing_think_open = _wants_missing_think_open(extra_info)
    gt_text = ground_truth.strip()
    gt = _parse_ground_truth(gt_text)
    prediction = extract_prediction(_as_text(solution_str))
    fmt = format_reward(prediction, gt_text, allow_missing_think_open=allow_missing_think_open)
    fn, pn, pv, same_calls = _tool_components(gt, parse_tool_calls(prediction))
    accuracy = fn + pn + pv
    return {
        "score": fmt + accuracy,
        "format_reward": fmt,
        "function_name_reward": fn,
        "parameter_reward": pn,
        "values_reward": pv,
        "accuracy_reward": accuracy,
        "exact_match": 1.0 if same_calls and fmt == 1.0 else 0.0,
    }
