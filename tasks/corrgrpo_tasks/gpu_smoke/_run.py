"""Smoke runs: a few training steps per domain with the smallest configuration, on GPU when there is one.

Nothing is downloaded (the device machine has no network): the model is a tiny random Qwen2 built from
a config, the data are the package's fixtures or built inline.

Every domain runs the real TRL recipe (:mod:`corrgrpo_tasks.recipes`) for ``steps`` optimizer steps with
the domain's real reward functions. The tiny model writes whole *pieces* (one token each), so a random
policy's rewards differ within a group. For ``agent_security`` the pieces are banking tool calls (one
malformed, one to a tool the suite lacks) and answers; TRL's own tool loop runs them on the AgentDojo
environments (needs ``trl`` and ``agentdojo``). verl's loop needs vLLM and Ray, which a bare GPU box lacks.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corrgrpo_tasks.domains import DOMAINS, get_domain, resolve

FRAMEWORK = "trl"  # the smoke runs train through the TRL recipe (verl's loop needs vLLM and Ray)

TOOL_FIXTURE = Path(__file__).resolve().parent.parent / "tool_calling" / "fixtures" / "rlla_tiny.json"
AGENT_CASES = ("banking:user_task_0", "banking:user_task_1:injection_task_0:important_instructions")
CODE_VERIFIER = {
    "prompt": "# no helper imports required",
    "test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-3) == -2\n",
    "entry_point": "Solution().solve",
    "num_tests": 2,
    "reference_solution": "class Solution:\n    def solve(self, value):\n        return value + 1\n",
    "reference_runtime_seconds": 0.01,
}


def tool_calling_pieces() -> list[str]:
    """Right, partly right and unformatted answers to the first fixture prompt."""
    target: str = json.loads(TOOL_FIXTURE.read_text())[0]["output"]
    return [target, target.replace("Lyon", "Paris"), "<think>hmm</think>", "no idea"]


def agent_security_pieces() -> list[str]:
    """Banking tool calls (a valid two, a malformed one, one to a tool the suite lacks) and an answer."""
    return [
        '<tool_call>\n{"name": "get_balance", "arguments": {}}\n</tool_call>',
        '<tool_call>\n{"name": "get_most_recent_transactions", "arguments": {"n": 5}}\n</tool_call>',
        '<tool_call>\n{"name": "get_balance", "arguments": \n</tool_call>',
        '<tool_call>\n{"name": "launch_rocket", "arguments": {}}\n</tool_call>',
        "I have checked your account.",
    ]


def code_pieces() -> list[str]:
    right = "```python\nclass Solution:\n    def solve(self, value):\n        return value + 1\n```"
    return [
        right,
        right.replace("value + 1", "value"),
        right.replace("```python\n", "").replace("\n```", ""),
        "```python\nclass Solution:\n    def solve(self, value) return\n```",
    ]


def _device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda requested but torch sees no GPU")
    return requested


def _tool_calling_rows() -> list[dict[str, Any]]:
    from corrgrpo_tasks.tool_calling import read_records, to_rows

    return to_rows(read_records(TOOL_FIXTURE), split="train")


def _agent_security_rows() -> list[dict[str, Any]]:
    from corrgrpo_tasks.agent_security import build_cases, default_system_message, suite_tool_names
    from corrgrpo_tasks.agent_security import to_rows as agent_rows

    cases = {c["case_id"]: c for c in build_cases(suites=["banking"], attacks=("important_instructions",))}
    chosen = [cases[i] for i in AGENT_CASES]
    return agent_rows(
        chosen,
        split="train",
        system_message=default_system_message(),
        tool_names=suite_tool_names(suites=["banking"]),
    )


def _code_rows() -> list[dict[str, Any]]:
    verifier = json.dumps(CODE_VERIFIER)
    return [
        {
            "data_source": "leetcodedataset",
            "ability": "code",
            "prompt": [
                {"role": "user", "content": f"Write Solution.solve returning its argument plus one ({i})."}
            ],
            "reward_model": {"style": "rule", "ground_truth": verifier},
            "ground_truth": verifier,
            "extra_info": {"split": "train", "index": i},
        }
        for i in range(8)
    ]


@dataclass(frozen=True)
class SmokeFixture:
    """A domain's smoke run (its ``DomainSpec.smoke``): the training rows, the pieces the tiny model writes,
    and whether it plays multi-turn episodes (a chat checkpoint whose template TRL parses tool calls in)."""

    rows: Callable[[], list[dict[str, Any]]]
    pieces: Callable[[], list[str]]
    multi_turn: bool = False


TOOL_CALLING = SmokeFixture(_tool_calling_rows, tool_calling_pieces)
CODE = SmokeFixture(_code_rows, code_pieces)
AGENT_SECURITY = SmokeFixture(_agent_security_rows, agent_security_pieces, multi_turn=True)


def smoke_domains() -> tuple[str, ...]:
    """The domains with a smoke fixture, in the specs' order."""
    return tuple(d.name for d in DOMAINS.values() if d.smoke)


def _fixture(domain: str) -> SmokeFixture:
    spec = get_domain(domain)
    if spec.smoke is None:
        raise ValueError(f"domain {spec.name!r} has no smoke run; these do: {', '.join(smoke_domains())}")
    fixture: SmokeFixture = resolve(spec.smoke)
    return fixture


def smoke_trl(
    domain: str,
    *,
    device: str = "auto",
    steps: int = 3,
    estimator: str = "corrgrpo",
    out: str | Path | None = None,
    hidden_size: int = 64,
) -> dict[str, Any]:
    """``steps`` optimizer steps of the domain's TRL recipe with a tiny model; returns a summary."""
    import datasets

    from corrgrpo_tasks.gpu_smoke._tiny import (
        piece_only_generation,
        write_chat_checkpoint,
        write_tiny_checkpoint,
    )
    from corrgrpo_tasks.recipes import build_recipe
    from corrgrpo_tasks.recipes.trl_train import _PLAIN_TRL, _adapter_classes, build_trainer

    device = _device(device)
    work = Path(out or tempfile.mkdtemp(prefix=f"smoke-{domain}-"))
    work.mkdir(parents=True, exist_ok=True)
    notes = []
    if estimator not in _PLAIN_TRL and _adapter_classes() is None:
        notes.append(f"corrgrpo_adapters.trl missing: ran grpo instead of {estimator}")
        estimator = "grpo"
    fixture = _fixture(domain)
    if fixture.multi_turn:
        from trl.chat_template_utils import qwen2_5_chat_template  # one TRL knows how to parse tool calls in

        model, generation = write_chat_checkpoint(
            work / "model",
            fixture.pieces(),
            hidden_size=hidden_size,
            chat_template=qwen2_5_chat_template,
        )
        shape = [f"train_batch_size={len(AGENT_CASES)}", "max_response_length=6", "max_turns=3"]
    else:
        model, generation = (
            write_tiny_checkpoint(work / "model", fixture.pieces(), hidden_size=hidden_size),
            piece_only_generation(),
        )
        shape = ["train_batch_size=4", "max_response_length=1"]
    train = work / "train.parquet"
    datasets.Dataset.from_list(fixture.rows()).to_parquet(str(train))
    cuda = device == "cuda"
    recipe = build_recipe(
        domain,
        FRAMEWORK,
        estimator=estimator,
        overrides=[
            f"model={model}",
            f"train_files={train}",
            "val_files=",
            "group_size=4",
            "mini_batch_size=2",
            "per_device_batch_size=4",
            f"max_steps={steps}",
            *shape,
            "use_vllm=false",
            f"bf16={cuda}",
            "gradient_checkpointing=false",
            "test_freq=0",
            "save_freq=100000",
            f"output_dir={work / 'out'}",
            "lr=1e-4",
        ],
        extra=[generation, *([] if cuda else ["use_cpu=true"])],
    )
    start = time.perf_counter()
    trainer = build_trainer(recipe.config)
    trainer.train()
    # TRL logs rewards on the steps that generate, not on every optimizer step.
    scored = [e for e in trainer.state.log_history if "reward" in e]
    return {
        "domain": domain,
        "framework": FRAMEWORK,
        "device": device,
        "estimator": estimator,
        "steps": trainer.state.global_step,
        "seconds": round(time.perf_counter() - start, 2),
        "rewards": {
            k: v for k, v in (scored[-1] if scored else {}).items() if k.startswith(("reward", "tools"))
        },
        "notes": notes,
    }


def run(domains: Sequence[str], **kwargs: Any) -> list[dict[str, Any]]:
    return [smoke_trl(domain, **kwargs) for domain in domains]
