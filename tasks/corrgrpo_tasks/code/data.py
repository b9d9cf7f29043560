"""Benchmark loaders (LeetCodeDataset, HumanEval, MBPP, LiveCodeBench) and prompt conversion.

Every loader returns ``list[CodeTask]``: a prompt text for the model and a verifier (the reward's
``ground_truth``). Loaders go through the ``datasets`` library (imported lazily). By default they read
the public hub datasets; ``data_files=`` reads local JSON/JSONL files in the same schema instead (what
the tests do). Conversion: ``to_verl_rows``, ``to_trl_rows``, ``to_openrlhf_rows``.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import pickle
import textwrap
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "CodeTask",
    "load_humaneval",
    "load_leetcode",
    "load_livecodebench",
    "load_mbpp",
    "to_openrlhf_rows",
    "to_trl_rows",
    "to_verl_rows",
]

_LCB_FILES = {
    "v1": "test.jsonl",
    "v2": "test2.jsonl",
    "v3": "test3.jsonl",
    "v4": "test4.jsonl",
    "v5": "test5.jsonl",
    "v6": "test6.jsonl",
}
_FENCE_NOTE = "Return only the code, in one ```python code block."


@dataclasses.dataclass(frozen=True)
class CodeTask:
    """One problem: ``prompt`` (text for the model), ``verifier`` (reward ``ground_truth``)."""

    task_id: str
    data_source: str
    prompt: str
    verifier: dict[str, Any]
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def ground_truth(self) -> str:
        return json.dumps(self.verifier, sort_keys=True)


def _load(path: str, *, name: str | None = None, split: str, data_files: Any = None) -> list[dict[str, Any]]:
    import datasets  # type: ignore[import-untyped,import-not-found,unused-ignore]

    if data_files is not None:
        rows = datasets.load_dataset("json", data_files=data_files, split="train")
    else:
        rows = datasets.load_dataset(path, name, split=split)
    return [dict(row) for row in rows]


def load_leetcode(split: str = "train", *, data_files: Any = None) -> list[CodeTask]:
    """LeetCodeDataset (``newfacade/LeetCodeDataset``; train 2641 / test 228 rows).

    Uses the row's ``query`` as prompt, ``prompt`` as preamble, ``test``/``entry_point`` as tests and
    ``completion`` as the reference solution (for AST similarity and efficiency).
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    tasks = []
    for row in _load("newfacade/LeetCodeDataset", split=split, data_files=data_files):
        verifier = {
            "kind": "check",
            "task_id": row["task_id"],
            "prompt": row.get("prompt") or "",
            "test": row["test"],
            "entry_point": row["entry_point"],
            "reference_solution": row.get("completion") or row.get("response"),
            "num_tests": len(row.get("input_output") or []) or None,
        }
        if row.get("reference_runtime_seconds") is not None:
            verifier["reference_runtime_seconds"] = row["reference_runtime_seconds"]
        extra: dict[str, Any] = {k: row[k] for k in ("question_id", "difficulty", "tags") if k in row}
        tasks.append(
            CodeTask(
                str(row["task_id"]), "leetcodedataset", str(row["query"]), verifier, {"split": split, **extra}
            )
        )
    return tasks


def load_humaneval(*, data_files: Any = None) -> list[CodeTask]:
    """HumanEval (``openai/openai_humaneval``, 164 problems; the reference is ``prompt + canonical``)."""
    tasks = []
    for row in _load("openai/openai_humaneval", split="test", data_files=data_files):
        prompt = (
            "Complete the following Python function. Return the complete function (with its imports) "
            f"in one ```python code block.\n\n```python\n{row['prompt']}```"
        )
        verifier = {
            "kind": "check",
            "task_id": row["task_id"],
            "prompt": row["prompt"],
            "test": row["test"],
            "entry_point": row["entry_point"],
            "reference_solution": row["prompt"] + row["canonical_solution"],
        }
        tasks.append(CodeTask(str(row["task_id"]), "humaneval", prompt, verifier))
    return tasks


def load_mbpp(
    config: str = "full", split: str = "test", *, data_files: Any = None, purpose: str = "evaluate"
) -> list[CodeTask]:
    """MBPP (``google-research-datasets/mbpp``, ``full`` or ``sanitized``); asserts become ``check``.

    ``purpose="evaluate"`` (default): the standard prompt, which shows every assert of ``test_list``, and
    those asserts as the tests, so that Pass@1 compares with published numbers (the verifier keeps the
    shown asserts as ``shown_tests``; evaluation records flag programs that special-case them).
    ``purpose="train"``: the prompt shows the first assert only, and the program is scored on all of
    ``test_list`` plus ``challenge_test_list`` where the row has one: a lookup table of what the prompt
    shows does not earn the reward (a deviation from the dataset's prompt, docs/tasks/code.md).
    """
    if purpose not in ("evaluate", "train"):
        raise ValueError(f"purpose must be 'evaluate' or 'train', got {purpose!r}")
    tasks = []
    for row in _load("google-research-datasets/mbpp", name=config, split=split, data_files=data_files):
        text = row.get("text") or row.get("prompt") or ""
        asserts = list(row["test_list"])
        shown = asserts[:1] if purpose == "train" else asserts
        scored = asserts + list(row.get("challenge_test_list") or []) if purpose == "train" else asserts
        setup = "\n".join([*(row.get("test_imports") or []), row.get("test_setup_code") or ""]).strip()
        body = "\n".join([setup, *scored]).strip()
        test = "def check(candidate):\n" + textwrap.indent(body, "    ") + "\n"
        name = _entry_name(asserts, row.get("code") or "")
        lead = "Your code should pass this test" if len(shown) == 1 else "Your code should pass these tests"
        prompt = f"{text}\n{lead}:\n\n" + "\n".join(shown) + f"\n\n{_FENCE_NOTE}"
        verifier = {
            "kind": "check",
            "task_id": str(row["task_id"]),
            "prompt": setup,
            "test": test,
            "entry_point": name or "None",
            "reference_solution": row.get("code"),
            "shown_tests": shown,
        }
        tasks.append(CodeTask(str(row["task_id"]), "mbpp", prompt, verifier))
    return tasks


def _entry_name(asserts: Sequence[str], reference: str) -> str | None:
    """The function the asserts test: of the functions the reference defines at its top level, the
    first one an assert calls whose arguments call no other of them (``list(evens(7))`` tests
    ``evens``, not ``list``; ``is_sorted(sort_list(xs))`` tests ``sort_list``, whose result the
    reference's helper checks); where no assert calls one, the first assert's called name."""
    import ast

    first = _called_name(asserts[0]) if asserts else None
    try:
        tree = ast.parse(reference.replace("\r", ""))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return first
    functions = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for text in asserts:
        try:
            calls = [n for n in ast.walk(ast.parse(text.strip())) if isinstance(n, ast.Call)]
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        ours = {id(c): c.func.id for c in calls if isinstance(c.func, ast.Name) and c.func.id in functions}
        for call in calls:
            if id(call) not in ours:
                continue
            inner = [n for a in (*call.args, *(k.value for k in call.keywords)) for n in ast.walk(a)]
            if not any(id(n) in ours for n in inner):
                return ours[id(call)]
    return first


def _called_name(assertion: str) -> str | None:
    import re

    match = re.search(
        r"assert\s+(?:not\s+)?\(?\s*(?:set\()?\s*(?:math\.isclose\()?\s*([A-Za-z_]\w*)\s*\(", assertion
    )
    return match.group(1) if match else None


class _StrOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from LiveCodeBench test data")


def _lcb_tests(blob: Any) -> list[dict[str, Any]]:
    if isinstance(blob, list):
        return blob
    try:
        return list(json.loads(blob))
    except (TypeError, ValueError):
        pass
    # Private tests are base64(zlib(pickle(json-string))); a pickle loader that allows no classes can
    # only build plain values, so a tampered file cannot run code here.
    raw = zlib.decompress(base64.b64decode(blob))
    return list(json.loads(_StrOnly(io.BytesIO(raw)).load()))


def load_livecodebench(version: str = "v6", *, data_files: Any = None) -> list[CodeTask]:
    """LiveCodeBench code generation (``livecodebench/code_generation_lite``; ``v6`` = the 175 problems
    added in release v6, the paper's set). stdin problems become ``stdio`` verifiers; LeetCode-style
    ("functional") problems become ``check`` verifiers over ``Solution().<func_name>``.
    """
    if data_files is None:
        if version not in _LCB_FILES:
            raise ValueError(f"version must be one of {sorted(_LCB_FILES)}, got {version!r}")
        data_files = f"hf://datasets/livecodebench/code_generation_lite/{_LCB_FILES[version]}"
    tasks = []
    for row in _load("", split="train", data_files=data_files):
        tests = _lcb_tests(row["public_test_cases"]) + _lcb_tests(row.get("private_test_cases") or "[]")
        metadata = json.loads(row.get("metadata") or "{}")
        starter = row.get("starter_code") or ""
        functional = bool(tests) and tests[0].get("testtype") == "functional"
        if functional:
            func = metadata["func_name"]
            lines = ["def check(candidate):", "    import json"]
            for case in tests:
                args = [json.loads(line) for line in str(case["input"]).splitlines() if line.strip()]
                lines.append(f"    assert candidate(*{args!r}) == json.loads({str(case['output'])!r})")
            verifier = {
                "kind": "check",
                "task_id": row["question_id"],
                "prompt": "from typing import *\n",
                "test": "\n".join(lines) + "\n",
                "entry_point": f"Solution().{func}",
            }
            tail = f"Use this starter code:\n```python\n{starter}\n```"
        else:
            verifier = {
                "kind": "stdio",
                "task_id": row["question_id"],
                "tests": [{"input": c["input"], "output": c["output"]} for c in tests],
            }
            tail = "Read the input from stdin and write the answer to stdout."
        prompt = f"{row['question_content']}\n\n{tail}\n{_FENCE_NOTE}"
        tasks.append(
            CodeTask(
                str(row["question_id"]),
                "livecodebench",
                prompt,
                verifier,
                {"difficulty": row.get("difficulty"), "platform": row.get("platform")},
            )
        )
    return tasks


def _messages(task: CodeTask, system: str | None) -> list[dict[str, str]]:
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": task.prompt}]


def to_verl_rows(tasks: Iterable[CodeTask], *, system: str | None = None) -> list[dict[str, Any]]:
    """verl parquet rows: ``data_source``, chat ``prompt``, ``ability``, ``reward_model``, ``extra_info``."""
    return [
        {
            "data_source": t.data_source,
            "prompt": _messages(t, system),
            "ability": "code",
            "reward_model": {"style": "rule", "ground_truth": t.ground_truth},
            "extra_info": {"index": i, "task_id": t.task_id, **{k: _plain(v) for k, v in t.extra.items()}},
        }
        for i, t in enumerate(tasks)
    ]


def to_trl_rows(tasks: Iterable[CodeTask], *, system: str | None = None) -> list[dict[str, Any]]:
    """TRL rows: conversational ``prompt`` plus ``ground_truth`` (reaches the reward functions)."""
    return [
        {
            "prompt": _messages(t, system),
            "ground_truth": t.ground_truth,
            "data_source": t.data_source,
            "task_id": t.task_id,
        }
        for t in tasks
    ]


def to_openrlhf_rows(tasks: Iterable[CodeTask], *, system: str | None = None) -> list[dict[str, Any]]:
    """OpenRLHF rows: ``input`` (chat messages, for ``--apply_chat_template``) and ``label``."""
    return [
        {"input": _messages(t, system), "label": t.ground_truth, "datasource": t.data_source} for t in tasks
    ]


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]
    return value
