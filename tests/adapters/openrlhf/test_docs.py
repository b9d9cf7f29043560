"""The command line in docs/adapters/openrlhf.md goes through the launcher and OpenRLHF's own checks."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from corrgrpo_adapters.openrlhf import launcher
from corrgrpo_adapters.openrlhf.config import AdapterConfig

DOC = Path(__file__).resolve().parents[3] / "docs" / "adapters" / "openrlhf.md"


def _documented_command() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(corrgrpo-openrlhf .*?)```", text, flags=re.DOTALL)
    assert len(blocks) == 1, "the doc should hold exactly one full launcher command"
    return shlex.split(blocks[0].replace("\\\n", " "))


def test_documented_command_line_is_accepted_by_launcher_and_openrlhf(openrlhf_cli):
    argv = _documented_command()
    assert argv[0] == "corrgrpo-openrlhf"
    launch = launcher.parse_launch(argv[1:], environ={})
    assert launch.config == AdapterConfig(
        "corrgrpo", ("accuracy", "format"), weights=(1.0, 0.5), options={"eps": 1e-6}
    )
    args = openrlhf_cli(launch.openrlhf_argv)  # OpenRLHF's parser and every one of its asserts
    assert args.algo.advantage.estimator == "group_norm"
    assert args.rollout.n_samples_per_prompt == 8
    assert args.critic.model_name_or_path is None  # group_norm: no critic
    assert args.reward.remote_url == ["./my_reward.py"]
