"""The RLLA tool-calling reward: output format plus function-name, parameter-name and value matches.

Two profiles. ``"paper"`` (the default) is the authors' reward as their code computes it, malformed
output included; ``"hardened"`` closes the ways that definition can be gamed (see :func:`compute_score`).

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

PROFILES: tuple[str, ...] = ("paper", "hardened")
"""``profile=`` values: the paper's definition (default) and the one closing its loopholes."""

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
# The assistant turn's markers per chat-template family; the reference picks Llama's when the
# experiment name says "llama" and Qwen's otherwise.
_QWEN_TURN = ("<|im_start|>assistant", "<|im_end|>")
_LLAMA_TURN = ("<|start_header_id|>assistant<|end_header_id|>", "<|eot_id|>")
_MAXIMA = (0.5, 1.0, 1.5)
_MINIMA = (-0.5, -1.0, -1.5)
_WORD = re.compile(r"\w+")
_TOKEN = re.compile(r"[^\W_][\w'-]*")
_NUMBER = re.compile(r"\d+(?:[.,:/]\d+)*")
_QUOTED = re.compile(r"[\"\u201c]([^\"\u201d\n]{1,80})[\"\u201d]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_OBS = re.compile(r"<obs>.*?(?:</obs>|\Z)", re.DOTALL)


@dataclass(frozen=True)
class ParsedCalls:
    """Result of parsing the first ``<tool_call>`` block.

    ``present`` is False when the text has no ``<tool_call>`` tag at all. ``calls`` holds one decoded
    JSON value per line of the block; it is None when the block cannot be read (either tag missing, or
    a line, blank ones included, that is not JSON). Whether each value is a call (an object with a
    ``name`` and, where it is compared, an object ``parameters``) is decided when scoring.
    """

    present: bool
    calls: tuple[Any, ...] | None


def extract_prediction(text: str, *, llama: bool = False) -> str:
    """The assistant's final turn of ``text``, stripped: what follows the last turn header, up to the
    first end-of-turn marker after it (Qwen's markers, or Llama's with ``llama=True``).

    The end marker cuts the text even when no header precedes it: the model ended its turn there.

    >>> extract_prediction("<think>a</think><|im_end|>junk")
    '<think>a</think>'
    """
    start, end = _LLAMA_TURN if llama else _QWEN_TURN
    return text.rsplit(start, 1)[-1].split(end, 1)[0].strip()


def _block(text: str) -> str | None:
    """The text of the first call block as the reference reads it: after the first opening tag, cut at
    the next opening tag and then at the first closing tag; None unless both tags occur somewhere."""
    if _CALL_OPEN not in text or _CALL_CLOSE not in text:
        return None
    return text.split(_CALL_OPEN, 2)[1].split(_CALL_CLOSE, 1)[0].strip()


def parse_tool_calls(text: str) -> ParsedCalls:
    """Parse the first ``<tool_call>`` block of ``text``: one JSON value per line.

    >>> parse_tool_calls('<tool_call>\\n{"name": "f", "parameters": {"x": 1}}\\n</tool_call>').calls
    ({'name': 'f', 'parameters': {'x': 1}},)
    """
    block = _block(text)
    if block is None:
        return ParsedCalls(present=_CALL_OPEN in text, calls=None)
    calls = []
    for line in block.split("\n"):
        try:
            calls.append(json.loads(line))
        except (ValueError, RecursionError):  # JSONDecodeError, int-digit limits, nesting beyond the stack
            return ParsedCalls(present=True, calls=None)
    return ParsedCalls(present=True, calls=tuple(calls))


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
    and/or the ``<response>...</response>`` block, whichever the ground truth contains, each of those
    tags exactly once and nothing after the last block.
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


def _match_score(a: list[Any], b: list[Any]) -> float:
    """Multiset Jaccard index of two lists (the reference's ``match_score``): 1 for equal lists, 0 when
    one is empty, else shared items over all items with multiplicity. Raises TypeError on unhashable
    items, as the reference does (the caller turns that into the minima)."""
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    shared = sum((Counter(a) & Counter(b)).values())
    return shared / (len(a) + len(b) - shared)


def _scale(score: float, local_max: float, low: float, high: float) -> float:
    """Map ``score`` in [0, local_max] linearly onto [low, high]; a vacuous component (max 0) gets ``high``."""
    if local_max == 0:
        return high
    return (high - low) * score / local_max + low


def _greedy_match(gt_calls: Sequence[dict[str, Any]], pd_calls: Sequence[Any]) -> tuple[float, float]:
    """Greedy one-to-one matching of ground-truth calls to unused predicted calls with the same name.

    Returns (sum of parameter-name Jaccard scores, number of equal parameter values) over the matched
    ground-truth calls. Each takes the unused prediction maximising name-Jaccard + value count (the
    first on ties); a pairing scoring 0 is no match. Values compare with Python's ``==`` (``1 == 1.0 ==
    True``, ``"1" != 1``). A same-named prediction without an object ``parameters`` raises, which the
    caller scores as the minima (the reference's rule).
    """
    used: set[int] = set()
    name_total = value_total = 0.0
    for gt in gt_calls:
        gt_params: dict[str, Any] = gt["parameters"]
        best: tuple[float, float, float, int] | None = None
        for j, pd in enumerate(pd_calls):
            if j in used or pd["name"] != gt["name"]:
                continue
            pd_params = pd["parameters"]
            names = _match_score(list(gt_params.keys()), list(pd_params.keys()))
            values = sum(1.0 for k, v in gt_params.items() if k in pd_params and pd_params[k] == v)
            if names + values > (best[0] if best else 0.0):
                best = (names + values, names, values, j)
        if best is not None:
            used.add(best[3])
            name_total += best[1]
            value_total += best[2]
    return name_total, value_total


def _call_components(
    gt_calls: Sequence[dict[str, Any]],
    pd_calls: Sequence[Any],
    *,
    call_precision: bool,
    response_share: float | None = None,
) -> tuple[float, float, float, bool]:
    """(function-name, parameter-name, parameter-value rewards, identical) of parsed predicted calls.

    With ``call_precision`` the parameter components are multiplied by n_target / max(n_target,
    n_predicted): calls beyond the target's count dilute them (the hardened profile). A
    ``response_share`` (hardened, a checkable response beside the calls) counts as one more value.
    """
    try:
        if list(gt_calls) == list(pd_calls) and response_share in (None, 1.0):
            return (*_MAXIMA, True)
        names = _match_score([c["name"] for c in gt_calls], [c["name"] for c in pd_calls])
        s_pn, s_pv = _greedy_match(gt_calls, pd_calls)
    except Exception:  # noqa: BLE001 -- the reference scores any failure on the prediction as the minima
        return (*_MINIMA, False)
    n_values = sum(len(c["parameters"]) for c in gt_calls)
    fn = _scale(names, 1.0, -0.5, 0.5)
    if not call_precision:
        return fn, _scale(s_pn, len(gt_calls), -1.0, 1.0), _scale(s_pv, n_values, -1.5, 1.5), False
    precision = len(gt_calls) / max(len(gt_calls), len(pd_calls))
    if response_share is not None:
        value_share = (s_pv + response_share) / (n_values + 1)
    else:
        value_share = s_pv / n_values if n_values else 1.0
    return (
        fn,
        _scale(s_pn * precision, len(gt_calls), -1.0, 1.0),
        _scale(value_share * precision, 1.0, -1.5, 1.5),
        False,
    )


def _parse_ground_truth(ground_truth: str) -> ParsedCalls:
    gt = parse_tool_calls(ground_truth)
    if gt.present and (
        gt.calls is None
        or not all(
            isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("parameters"), dict)
            for c in gt.calls
        )
    ):
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


def _names(extra_info: Mapping[str, Any] | None) -> tuple[str, str]:
    """(experiment name, model name) as the reference reads them: the model name falls back to the
    experiment name when missing or empty."""
    if not isinstance(extra_info, Mapping):
        return "", ""
    experiment = str(extra_info.get("experiment_name", "") or "")
    return experiment, str(extra_info.get("model_name") or experiment)


def answer_text(prediction: str, *, allow_missing_think_open: bool = False) -> str:
    """The part of a completion outside its thought: what follows the last ``</think>``; nothing when a
    thought is opened (or, with ``allow_missing_think_open``, started) and never closed."""
    if _THINK_CLOSE in prediction:
        return prediction.rsplit(_THINK_CLOSE, 1)[1]
    if _THINK_OPEN in prediction or allow_missing_think_open:
        return ""
    return prediction


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _response_text(text: str) -> str | None:
    """The first closed ``<response>`` block's text, or None."""
    if _RESP_OPEN not in text:
        return None
    after = text.split(_RESP_OPEN, 1)[1]
    return after.split(_RESP_CLOSE, 1)[0] if _RESP_CLOSE in after else None


def _named_values(text: str) -> set[str]:
    """Capitalised words that do not open a sentence (names: "Paris", "Canberra", "B12"), and quoted text."""
    named = {m.group(1) for m in _QUOTED.finditer(text)}
    for sentence in _SENTENCE.split(text):
        named.update(w for w in _TOKEN.findall(sentence)[1:] if w[:1].isupper() and w != "I")
    return named


def response_facts(ground_truth: str, dialogue: str = "") -> frozenset[str]:
    """The facts of a target's ``<response>`` that a reply must repeat unchanged: its numbers and times
    (``14:05``, ``1,250.50`` as one token each) and named values (capitalised words inside a sentence,
    quoted text), less those already in ``dialogue`` (the conversation with tool outputs removed: what
    the user and the earlier turns said). Empty when the target has no response or no such fact.

    >>> sorted(response_facts("<response>It is 14:05 in Paris.</response>", "User: time in Paris?"))
    ['14:05']
    """
    text = _response_text(ground_truth)
    if text is None:
        return frozenset()
    said = _OBS.sub(" ", dialogue).lower()
    said_words = set(_TOKEN.findall(said)) | set(_NUMBER.findall(said))
    facts = set(_NUMBER.findall(text)) | _named_values(text)
    return frozenset(
        f for f in facts if f.lower() not in said_words and (" " not in f or f.lower() not in said)
    )


def response_share(prediction: str, ground_truth: str, dialogue: str = "") -> float | None:
    """How much of the target response's content the predicted ``<response>`` carries, in [0, 1]; None
    when the target has no fact to check (:func:`response_facts`), so no content check is sound.

    The share is the facts found unchanged (as whole tokens) over the facts, and 0 when the reply states
    any number that neither the target nor the dialogue holds: a wrong number, or a hedge between the
    right one and others, scores as its worst candidate. No closed response block, or a reply longer
    than four times the target's words plus eight, scores 0. Wording and words from the dialogue earn
    nothing.
    """
    facts = response_facts(ground_truth, dialogue)
    if not facts:
        return None
    reply = _response_text(prediction)
    target = _response_text(ground_truth) or ""
    if reply is None or len(_words(reply)) > 4 * len(_words(target)) + 8:
        return 0.0
    said = set(_NUMBER.findall(_OBS.sub(" ", dialogue)))
    numbers = set(_NUMBER.findall(reply))
    tokens = set(_TOKEN.findall(reply.lower())) | numbers
    lowered = reply.lower()
    found = sum(1 for f in facts if (f.lower() in lowered if " " in f else f.lower() in tokens))
    if numbers - facts - said - set(_NUMBER.findall(target)):
        return 0.0
    return found / len(facts)


def _paper_tools(gt: ParsedCalls, prediction: str) -> tuple[float, float, float, bool]:
    if not gt.present or gt.calls is None:
        return 0.0, 0.0, 0.0, _CALL_OPEN not in prediction
    pd = parse_tool_calls(prediction)
    if pd.calls is None:
        return (*_MINIMA, False)
    return _call_components(gt.calls, pd.calls, call_precision=False)


def _hardened_tools(
    gt: ParsedCalls, gt_text: str, prediction: str, allow_missing_think_open: bool, dialogue: str
) -> tuple[float, float, float, bool]:
    answer = answer_text(prediction, allow_missing_think_open=allow_missing_think_open)
    share = response_share(answer, gt_text, dialogue) if _RESP_OPEN in gt_text else None
    if gt.present and gt.calls is not None:
        pd = parse_tool_calls(answer)
        if pd.calls is None:
            return (*_MINIMA, False)
        return _call_components(gt.calls, pd.calls, call_precision=True, response_share=share)
    if _RESP_OPEN not in gt_text:
        return 0.0, 0.0, 0.0, _CALL_OPEN not in answer
    if _CALL_OPEN in answer:  # a call where the target answers in text
        return (*_MINIMA, False)
    if share is None:  # nothing checkable: the paper's constant, so no reply beats another
        return 0.0, 0.0, 0.0, True
    return 0.5, 1.0, _scale(share, 1.0, -1.5, 1.5), share == 1.0


def compute_score(
    data_source: str,
    solution_str: Any,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    *,
    allow_missing_think_open: bool | None = None,
    profile: str = "paper",
    dialogue: str | None = None,
    **_: Any,
) -> dict[str, float]:
    """Score one tool-calling completion against its ground truth (the RLLA reward).

    With S_fn the multiset Jaccard of called function names, S_pn the summed parameter-name Jaccard of
    greedily matched calls over the number of ground-truth calls, and S_pv the number of parameter
    values equal under Python's ``==`` over the number of ground-truth parameters:

        function_name_reward = 0.5 (2 S_fn - 1)        in [-0.5, 0.5]
        parameter_reward     =     (2 S_pn - 1)        in [-1, 1]
        values_reward        = 1.5 (2 S_pv - 1)        in [-1.5, 1.5]   (+1.5 if the calls have no parameters)
        format_reward        = 1 if the layout matches the ground truth's, else 0
        accuracy_reward      = sum of the three tool components   in [-3, 3]
        score                = format_reward + accuracy_reward     in [-3, 4]

    ``profile="paper"`` (default) is the authors' reward exactly: the completion is cut at the chat
    template's end-of-turn marker; an identical call list scores the maxima; a first ``<tool_call>``
    block that is missing or unreadable (a line that is not JSON, a call without ``name``, a same-named
    call without object ``parameters``) scores the minima; a ground truth without a tool call gives 0
    to the tool components. ``profile="hardened"`` changes three things: calls count only outside
    ``<think>...</think>``; S_pn and S_pv are multiplied by n_target / max(n_target, n_predicted), so
    extra or duplicated calls cost parameter credit too; on a response-only target a call scores the
    minima; a response is judged on content (:func:`response_share`: the target's numbers, times and
    named values that the dialogue does not already hold, repeated unchanged, with other numbers
    counted against it): on a response-only target function and parameter rewards are 0.5 and 1 and S_pv
    is that share; beside calls it counts as one more parameter value; where the target states no such
    fact every reply gets the paper's constant (tool components 0 on response-only targets).
    ``exact_match`` is 1 when the format is right and the call list equals the target's (hardened: and
    a checkable response carries all its facts).

    Parameters
    ----------
    data_source, extra_info
        As verl passes them; ``data_source`` is not checked (RLLA and API-Bank share the reward).
        ``extra_info["experiment_name"]`` containing "llama" selects Llama's chat markers.
    solution_str
        The decoded completion. Non-text values score as empty text; a list of chat messages scores
        its last message's content.
    ground_truth
        The target text, e.g. ``<think>...</think>\\n<tool_call>\\n{"name": ..., "parameters": {...}}\\n</tool_call>``.
    allow_missing_think_open
        Accept completions that start inside the thought (templates that pre-fill ``<think>``).
        Default: True when ``extra_info["model_name"]`` (or, without one, ``["experiment_name"]``)
        contains "think".
    profile
        ``"paper"`` or ``"hardened"``.
    dialogue
        The conversation the completion answers (RLLA's ``input``), read by the hardened profile only;
        default ``extra_info["dialogue"]`` (rows from :func:`~corrgrpo_tasks.tool_calling.to_rows`
        carry it), else empty.

    Examples
    --------
    >>> gt = '<think>x</think>\\n<tool_call>\\n{"name": "f", "parameters": {"a": 1}}\\n</tool_call>'
    >>> compute_score("rlla", gt, gt)["score"]
    4.0
    >>> compute_score("rlla", "no tags", gt)["accuracy_reward"]
    -3.0
    >>> hedge = gt.replace('}}', '}}\\n{"name": "f", "parameters": {"a": 2}}')
    >>> compute_score("rlla", hedge, gt)["score"], compute_score("rlla", hedge, gt, profile="hardened")["score"]
    (3.5, 1.0)
    """
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    if isinstance(ground_truth, bytes):
        ground_truth = ground_truth.decode("utf-8")
    if not isinstance(ground_truth, str):
        raise TypeError(f"ground_truth must be a string, got {type(ground_truth).__name__}")
    experiment, model = _names(extra_info)
    if allow_missing_think_open is None:
        allow_missing_think_open = "think" in model.lower()
    gt_text = ground_truth.strip()
    gt = _parse_ground_truth(gt_text)
    prediction = extract_prediction(_as_text(solution_str), llama="llama" in experiment)
    fmt = format_reward(prediction, gt_text, allow_missing_think_open=allow_missing_think_open)
    if profile == "paper":
        fn, pn, pv, same = _paper_tools(gt, prediction)
    else:
        if dialogue is None:
            dialogue = str(extra_info.get("dialogue") or "") if isinstance(extra_info, Mapping) else ""
        fn, pn, pv, same = _hardened_tools(gt, gt_text, prediction, allow_missing_think_open, dialogue)
    accuracy = fn + pn + pv
    return {
        "score": fmt + accuracy,
        "format_reward": fmt,
        "function_name_reward": fn,
        "parameter_reward": pn,
        "values_reward": pv,
        "accuracy_reward": accuracy,
        "exact_match": 1.0 if same and fmt == 1.0 else 0.0,
    }
