"""Smoke runs: a few training steps per domain with the smallest configuration, on GPU when there is one.

Nothing is downloaded (the device machine has no network): the model is a tiny random Qwen2 built from
a config, the data are the package's fixtures or built inline.

* ``tool_calling`` and ``code`` run the real TRL recipe (:mod:`corrgrpo_tasks.recipes`) for ``steps``
  optimizer steps with the domain's real reward functions.
* ``agent_security`` runs real AgentDojo episodes (banking suite, official checkers) with a tabular
  softmax policy over a fixed set of assistant turns, scores them with the real reward, computes
  advantages with ``corrgrpo_core`` on the device and takes policy-gradient steps. The real multi-turn
  LLM loop is verl's and needs vLLM and Ray, which a bare GPU box lacks.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TOOL_FIXTURE = Path(__file__).resolve().parent.parent / "tool_calling" / "fixtures" / "rlla_tiny.json"
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


def code_pieces() -> list[str]:
    right = "```python\nclass Solution:\n    def solve(self, value):\n        return value + 1\n```"
    return [right, right.replace("value + 1", "value"), right.replace("```python\n", "").replace("\n```", ""),
            "```python\nclass Solution:\n    def solve(self, value) return\n```"]


def _device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda requested but torch sees no GPU")
    return requested


def _training_rows(domain: str) -> list[dict[str, Any]]:
    if domain == "tool_calling":
        from corrgrpo_tasks.tool_calling import read_records, to_rows

        return to_rows(read_records(TOOL_FIXTURE), split="train")
    verifier = json.dumps(CODE_VERIFIER)
    return [{"data_source": "leetcodedataset", "ability": "code",
             "prompt": [{"role": "user", "content": f"Write Solution.solve returning its argument plus one ({i})."}],
             "reward_model": {"style": "rule", "ground_truth": verifier}, "ground_truth": verifier,
             "extra_info": {"split": "train", "index": i}} for i in range(8)]


def smoke_trl(domain: str, *, device: str = "auto", steps: int = 3, estimator: str = "corrgrpo",
              out: str | Path | None = None, hidden_size: int = 64) -> dict[str, Any]:
    """``steps`` optimizer steps of the domain's TRL recipe with a tiny model; returns a summary."""
    import datasets

    from corrgrpo_tasks.gpu_smoke._tiny import piece_only_generation, write_tiny_checkpoint
    from corrgrpo_tasks.recipes import build_recipe
    from corrgrpo_tasks.recipes.trl_train import _PLAIN_TRL, _adapter_classes, build_trainer

    device = _device(device)
    work = Path(out or tempfile.mkdtemp(prefix=f"smoke-{domain}-"))
    work.mkdir(parents=True, exist_ok=True)
    notes = []
    if estimator not in _PLAIN_TRL and _adapter_classes() is None:
        notes.append(f"corrgrpo_adapters.trl missing: ran grpo instead of {estimator}")
        estimator = "grpo"
    pieces = tool_calling_pieces() if domain == "tool_calling" else code_pieces()
    model = write_tiny_checkpoint(work / "model", pieces, hidden_size=hidden_size)
    train = work / "train.parquet"
    datasets.Dataset.from_list(_training_rows(domain)).to_parquet(str(train))
    cuda = device == "cuda"
    recipe = build_recipe(domain, "trl", estimator=estimator, overrides=[
        f"model={model}", f"train_files={train}", "val_files=", "train_batch_size=4", "group_size=4",
        "mini_batch_size=2", "per_device_batch_size=4", f"max_steps={steps}", "max_response_length=1",
        "use_vllm=false", f"bf16={cuda}", "gradient_checkpointing=false", "test_freq=0", "save_freq=100000",
        f"output_dir={work / 'out'}", "lr=1e-4",
    ], extra=[piece_only_generation(), *([] if cuda else ["use_cpu=true"])])
    start = time.perf_counter()
    trainer = build_trainer(recipe.config)
    trainer.train()
    # TRL logs rewards on the steps that generate, not on every optimizer step.
    scored = [e for e in trainer.state.log_history if "reward" in e]
    return {"domain": domain, "framework": "trl", "device": device, "estimator": estimator,
            "steps": trainer.state.global_step, "seconds": round(time.perf_counter() - start, 2),
            "rewards": {k: v for k, v in (scored[-1] if scored else {}).items() if k.startswith("reward")},
            "notes": notes}


# Assistant turns the agent-security policy chooses from: (text, tool call or None for a final answer).
_ATTACKER_IBAN = "US133000000121212121212"


def _banking_turns() -> list[tuple[str, tuple[str, dict[str, Any]] | None]]:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("get_balance", {}),
        ("get_most_recent_transactions", {"n": 100}),
        ("get_scheduled_transactions", {}),
        ("read_file", {"file_path": "bill-december-2023.txt"}),
        ("send_money", {"recipient": _ATTACKER_IBAN, "amount": 0.01, "subject": "hi", "date": "2022-01-01"}),
    ]
    turns: list[tuple[str, tuple[str, dict[str, Any]] | None]] = [
        (f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>", (n, a)) for n, a in calls]
    turns.append(("<tool_call>\n{not json}\n</tool_call>", None))  # malformed: makes the trajectory invalid
    turns.append(("I have completed the task.", None))
    turns.append(("I cannot help with that.", None))
    return turns


def _pick_cases(n_cases: int) -> list[dict[str, Any]]:
    from corrgrpo_tasks.agent_security import build_cases

    cases = build_cases(suites=["banking"])
    clean = [c for c in cases if c["case_type"] == "clean"][: n_cases // 2]
    attacked = [c for c in cases if c["attack"] == "important_instructions"][: n_cases - len(clean)]
    return clean + attacked


def smoke_agent_security(*, device: str = "auto", steps: int = 3, estimator: str = "corrgrpo",
                         group_size: int = 4, n_cases: int = 4, max_turns: int = 3,
                         seed: int = 0) -> dict[str, Any]:
    """Policy-gradient steps on real AgentDojo episodes (see the module docstring)."""
    import torch

    import corrgrpo_core as cc
    from corrgrpo_tasks.agent_security import AgentDojoEpisode, compute_score, security_metrics

    device = _device(device)
    torch.manual_seed(seed)
    cases = _pick_cases(n_cases)
    turns = _banking_turns()
    final = {i for i, (text, call) in enumerate(turns) if call is None and "<tool_call>" not in text}
    logits = torch.zeros(len(cases), max_turns, len(turns), device=device, requires_grad=True)
    optimizer = torch.optim.Adam([logits], lr=0.5)
    start = time.perf_counter()
    history = []
    for _ in range(steps):
        results, log_probs, group_ids = [], [], []
        for case_index, case in enumerate(cases):
            for _ in range(group_size):
                episode = AgentDojoEpisode(case)
                total = torch.zeros((), device=device)
                output = ""
                for turn in range(max_turns):
                    dist = torch.distributions.Categorical(logits=logits[case_index, turn])
                    action = dist.sample()  # type: ignore[no-untyped-call]
                    total = total + dist.log_prob(action)  # type: ignore[no-untyped-call]
                    text, call = turns[int(action)]
                    episode.record_turn(text)
                    output = text
                    if call is not None:
                        episode.call(*call)
                    if int(action) in final:
                        break
                results.append(episode.result(output))
                log_probs.append(total)
                group_ids.append(case_index)
        rewards = [compute_score("agentdojo", "", "", {"agentdojo_result": r}) for r in results]
        scores = torch.tensor([[r["utility_reward"], r["safety_reward"]] for r in rewards], device=device)
        advantages = cc.compute_advantages(scores, torch.tensor(group_ids, device=device), estimator=estimator)
        loss = -(advantages.detach() * torch.stack(log_probs)).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append({"loss": float(loss.detach()), "score": sum(r["score"] for r in rewards) / len(rewards),
                        **security_metrics(results).as_dict()})
    return {"domain": "agent_security", "framework": "policy-gradient stand-in", "device": device,
            "estimator": estimator, "steps": steps, "seconds": round(time.perf_counter() - start, 2),
            "history": history}


def run(domains: Sequence[str], **kwargs: Any) -> list[dict[str, Any]]:
    summaries = []
    for domain in domains:
        if domain == "agent_security":
            options = {k: v for k, v in kwargs.items() if k in ("device", "steps", "estimator")}
            summaries.append(smoke_agent_security(**options))
        else:
            summaries.append(smoke_trl(domain, **kwargs))
    return summaries
