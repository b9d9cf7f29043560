"""OpenRLHF hands the code reward prompt + response decoded with special tokens kept: the reward reads the
completion as the model ended it (issue 26, item 5)."""

from __future__ import annotations

import pytest

from corrgrpo_tasks._decoding import PROFILE_ENV, completion_text
from corrgrpo_tasks.code import COMPONENTS, make_openrlhf_reward_func
from corrgrpo_tasks.code._adapters import openrlhf_reward_func
from corrgrpo_tasks.sandbox import Sandbox

PROMPT = "<|im_start|>user\nSolve it.<|im_end|>\n<|im_start|>assistant\n"
CODE = "class Solution:\n    def solve(self, n):\n        return n + 1\n"
GT = {
    "prompt": "",
    "test": "def check(candidate):\n    assert candidate(1) == 2\n",
    "entry_point": "Solution().solve",
    "reference_solution": CODE,
}


@pytest.mark.parametrize("end", ["<|im_end|>", "<|im_end|>\n<|endoftext|>", "<|eot_id|>", ""])
def test_the_response_ends_where_the_model_ended_it(end: str) -> None:
    assert completion_text(PROMPT + CODE + end, PROMPT) == CODE
    assert (
        completion_text(PROMPT + "```python\n" + CODE + "```" + end, PROMPT) == "```python\n" + CODE + "```"
    )


def test_an_unfenced_answer_keeps_its_syntax_under_openrlhf(
    box: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    del box
    out = make_openrlhf_reward_func()([PROMPT + CODE + "<|im_end|>"], [PROMPT], [GT])
    assert out["extra_logs"]["syntax_reward"].tolist() == [1.0]
    assert out["extra_logs"]["accuracy_reward"].tolist() == [1.0]
    assert set(out["extra_logs"]) == set(COMPONENTS)
    stub = "class Solution:\n    def solve(self, n):\n        return None\n"
    monkeypatch.setenv(PROFILE_ENV, "hardened")
    hardened = openrlhf_reward_func([PROMPT + stub + "<|im_end|>"], [PROMPT], [GT])
    monkeypatch.delenv(PROFILE_ENV)
    paper = openrlhf_reward_func([PROMPT + stub + "<|im_end|>"], [PROMPT], [GT])
    assert (
        paper["extra_logs"]["runtime_reward"].item(),
        hardened["extra_logs"]["runtime_reward"].item(),
    ) == (1.0, 0.0)
    assert isinstance(paper["rewards"], torch.Tensor)
