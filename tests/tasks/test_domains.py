"""The domain specs (``corrgrpo_tasks.domains``): one spelling, facts read from the rewards, entry points
that resolve, no domain or framework name branched on elsewhere, and a toy domain added through the path
docs/architecture.md gives (a package with its reward, one ``DomainSpec``) and nothing else."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from corrgrpo_tasks import domains
from corrgrpo_tasks.domains import DomainSpec, get_domain, parse_domain, register_domain

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tasks" / "corrgrpo_tasks"
# The modules that must read the specs rather than name a domain or a framework (the domains' own reward
# packages and training/ name themselves; training/ is another issue's).
READERS = ["recipes", "pipeline", "gpu_smoke", "evaluation"]  # evaluation/ holds agent_security/


def test_one_spelling_with_the_old_one_accepted_and_noted() -> None:
    notes: list[str] = []
    assert parse_domain("tool-calling", note=notes.append) == "tool_calling"
    assert parse_domain("agent_security", note=notes.append) == "agent_security"
    assert notes == ["note: 'tool-calling' is spelled 'tool_calling'"]
    with pytest.raises(ValueError, match="unknown domain 'tool calling'; known: code, tool_calling"):
        parse_domain("tool calling")
    assert [spec.name for spec in domains.DOMAINS.values()] == [
        s.package.rpartition(".")[2] for s in domains.DOMAINS.values()
    ]


def test_the_components_weights_and_profiles_are_the_rewards_own() -> None:
    from corrgrpo_tasks import agent_security, code, tool_calling

    for spec, package in (
        (get_domain("code"), code),
        (get_domain("tool_calling"), tool_calling),
        (get_domain("agent_security"), agent_security),
    ):
        assert spec.components == package.COMPONENTS
        assert spec.default_weights == package.DEFAULT_WEIGHTS
        assert spec.compute_score is package.compute_score
        assert "paper" in spec.profiles


def test_every_entry_point_resolves() -> None:
    for spec in domains.DOMAINS.values():
        assert all(f in spec.rewards or f in spec.agent_loops for f in spec.frameworks), spec.name
        for framework in spec.rewards:
            entry = spec.reward(framework)
            assert callable(entry) or Path(entry).is_file(), (spec.name, framework)
        for framework in spec.agent_loops:
            loop = spec.agent_loop(framework)
            assert callable(loop) or Path(loop).is_file(), (spec.name, framework)
        if spec.smoke:
            assert callable(domains.resolve(spec.smoke).rows)
    for framework in domains.FRAMEWORKS.values():
        assert callable(domains.resolve(framework.builder))


def test_data_sources_and_benchmarks_belong_to_one_domain_each() -> None:
    from corrgrpo_tasks.evaluation import BENCHMARKS

    sources = [s for spec in domains.DOMAINS.values() for s in spec.sources()]
    assert len(sources) == len(set(sources))
    assert domains.domain_for_source("rlla").name == "tool_calling"
    listed = [b for spec in domains.DOMAINS.values() for b in spec.benchmarks]
    assert sorted(listed) == sorted(BENCHMARKS)
    assert BENCHMARKS["asb"].domain == "agent_security"


def test_a_clashing_spelling_or_an_unknown_framework_is_refused() -> None:
    spec = get_domain("code")
    with pytest.raises(ValueError, match="'tool-calling' already spells domain 'tool_calling'"):
        register_domain(dataclasses.replace(spec, name="other", aliases=("tool-calling",)))
    with pytest.raises(ValueError, match="unknown frameworks"):
        register_domain(dataclasses.replace(spec, name="other", frameworks=("jax_rl",)))


def _names() -> set[str]:
    spellings = {s for spec in domains.DOMAINS.values() for s in (spec.name, *spec.aliases)}
    return spellings | set(domains.FRAMEWORKS)


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _readers() -> Iterator[Path]:
    for folder in READERS:
        yield from sorted((TASKS / folder).rglob("*.py"))


def test_no_reader_branches_on_a_domain_or_framework_name() -> None:
    """No comparison with a domain or framework name, and no collection of two or more of them, outside
    the spec module."""
    names = _names()
    found = []
    for path in _readers():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                hits = [s for s in _strings(node) if s in names]
            elif isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict):
                direct = node.keys if isinstance(node, ast.Dict) else node.elts
                hits = [n.value for n in direct if isinstance(n, ast.Constant) and n.value in names]
                hits = hits if len(hits) > 1 else []
            else:
                continue
            if hits:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {hits}")
    assert not found, "\n".join(found)


TOY = """
COMPONENTS = ("right_reward", "short_reward")
DEFAULT_WEIGHTS = (1.0, 0.5)
PROFILES = ("paper",)
DATA_SOURCES = ("toy_source",)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    right = float(solution_str.strip() == ground_truth)
    short = float(len(solution_str) <= 8)
    return {"score": right + short, "right_reward": right, "short_reward": short}


def _one(name):
    def reward(prompts, completions, ground_truth, **kwargs):
        return [compute_score("toy_source", c, g)[name] for c, g in zip(completions, ground_truth)]

    reward.__name__ = name
    return reward


def trl_reward_functions():
    return [_one(name) for name in COMPONENTS]
"""


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DomainSpec:
    """A toy domain: its package (a reward declaring its names) and one spec; nothing else is edited."""
    (tmp_path / "toy_task.py").write_text(textwrap.dedent(TOY), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(domains, "DOMAINS", dict(domains.DOMAINS))
    return register_domain(
        DomainSpec(
            "toy",
            "toy_task",
            ("verl", "trl"),
            {"model": "tiny", "train_files": "toy/train.parquet", "val_files": "toy/test.parquet"},
            {"verl": "recipes/verl_reward.py", "trl": "toy_task:trl_reward_functions"},
            aliases=("toy-task",),
        )
    )


def test_a_toy_domain_launches_on_its_frameworks_through_its_spec_alone(
    toy: DomainSpec, capsys: pytest.CaptureFixture[str]
) -> None:
    from corrgrpo_tasks.recipes import build_recipe, defaults
    from corrgrpo_tasks.recipes.__main__ import main
    from corrgrpo_tasks.recipes.trl_train import reward_functions

    assert defaults("toy").reward_keys == ("right_reward", "short_reward")
    verl = build_recipe("toy-task", "verl", estimator="gdpo_corr")
    assert verl.domain == "toy"
    assert verl.config["overrides"]["+algorithm.reward_keys"] == "[right_reward,short_reward]"
    assert verl.config["overrides"]["data.train_files"] == "toy/train.parquet"
    trl = build_recipe("toy", "trl")
    assert trl.config["reward_keys"] == ["right_reward", "short_reward"]
    functions = reward_functions("toy", trl.config["reward_keys"])
    assert [f([], ["4"], ["4"]) for f in functions] == [[1.0], [1.0]]
    with pytest.raises(ValueError, match=r"toy runs on \['verl', 'trl'\], not openrlhf"):
        build_recipe("toy", "openrlhf")
    assert main(["toy", "trl", "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("# toy / trl / estimator=corrgrpo")


def test_a_toy_domain_is_scored_by_verls_reward_file(toy: DomainSpec) -> None:
    spec = importlib.util.spec_from_file_location("custom_module", toy.reward("verl"))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.compute_score("toy_source", "4", "4") == {
        "score": 2.0,
        "right_reward": 1.0,
        "short_reward": 1.0,
    }


def test_a_toy_benchmark_is_planned_by_the_pipeline(
    toy: DomainSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from corrgrpo_tasks.evaluation import _benchmarks
    from corrgrpo_tasks.pipeline import plan

    bench = dataclasses.replace(_benchmarks.BENCHMARKS["rlla-test"], name="toy-bench")
    monkeypatch.setitem(_benchmarks.BENCHMARKS, "toy-bench", bench)
    register_domain(dataclasses.replace(toy, benchmarks=("toy-bench",)))
    assert bench.domain == "toy"
    pipeline = plan("toy", "trl", out=tmp_path, data={"toy-bench": "toy.jsonl"})
    assert [s.name for s in pipeline.steps] == ["train", "evaluate toy-bench"]
    assert "evaluate toy --benchmark toy-bench" in pipeline.steps[1].command()


def test_the_spec_module_imports_no_domain_package() -> None:
    code = "import sys, corrgrpo_tasks.domains; print(sorted(m for m in sys.modules if m.startswith('corrgrpo')))"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['corrgrpo_tasks', 'corrgrpo_tasks.domains']"


HEAVY = ("torch", "transformers", "datasets", "agentdojo", "vllm", "trl", "verl", "pandas", "pyarrow")


@pytest.mark.parametrize(
    "module",
    ["corrgrpo_tasks.evaluation.cli", "corrgrpo_tasks.pipeline.cli", "corrgrpo_tasks.recipes.__main__"],
)
def test_the_commands_parse_their_arguments_before_any_heavy_import(module: str) -> None:
    """What a command imports before argparse runs: nothing heavy, so an argument error is reported at
    once (the model, the data and the frameworks load only when a run starts)."""
    import subprocess

    code = f"import sys, {module}; print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("command", [["evaluate"], ["pipeline"]])
def test_the_commands_take_one_spelling_and_note_the_other(command: list[str], tmp_path: Path) -> None:
    import subprocess

    args = [sys.executable, "-m", "corrgrpo_core.cli", *command, "tool-calling"]
    tail = ["--model", "x", "--benchmark", "humaneval", "--data", "x"] if command == ["evaluate"] else []
    tail = tail or ["--framework", "trl", "--dry-run", "--out", str(tmp_path / "p")]
    run = subprocess.run([*args, *tail], capture_output=True, text=True, check=False)
    assert "note: 'tool-calling' is spelled 'tool_calling'" in run.stderr
    if command == ["evaluate"]:
        assert "belongs to domain 'code', not 'tool_calling'" in run.stderr
    else:
        assert run.stdout.startswith("# pipeline: tool_calling on trl")
    wrong = subprocess.run([*args[:-1], "tool calling", *tail], capture_output=True, text=True, check=False)
    assert wrong.returncode == 2
    assert "unknown domain 'tool calling'; known: code, tool_calling, agent_security" in wrong.stderr


def test_a_command_with_more_choices_than_the_domains_takes_both_spellings() -> None:
    """How ``corrgrpo train --task`` (whose choices also hold ``scales``) takes ``tool-calling``."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--task", type=domains.spelling_argument, choices=("tool_calling", "code", "scales"))
    assert parser.parse_args(["--task", "tool-calling"]).task == "tool_calling"
    assert parser.parse_args(["--task", "scales"]).task == "scales"
    with pytest.raises(SystemExit):
        parser.parse_args(["--task", "agent-security"])  # a domain, but not one of this command's choices
