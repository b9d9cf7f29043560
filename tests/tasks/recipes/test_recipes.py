"""Recipe builders and the CLI: every supported domain/framework resolves without any framework installed."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from corrgrpo_tasks import domains
from corrgrpo_tasks.agent_security import AGENT_LOOP_CONFIG, checker_result
from corrgrpo_tasks.recipes import (
    DOMAINS,
    SUPPORTED,
    VERL_REWARD_FILE,
    Recipe,
    apply_overrides,
    build_recipe,
    defaults,
    estimator_names,
)
from corrgrpo_tasks.recipes.__main__ import main

KEYS = "[utility_reward,safety_reward]"
ONES = "[1.0,1.0]"

PAIRS = [(d, f) for d in DOMAINS for f in SUPPORTED[d]]


@pytest.mark.parametrize(("domain", "framework"), PAIRS)
def test_every_supported_pair_dry_runs(
    domain: str, framework: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([domain, framework, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# {domain} / {framework} / estimator=corrgrpo")
    block = out[out.index("# resolved config\n") + len("# resolved config\n") :]
    config = json.loads(block[: block.rindex("}") + 1])
    assert config["hparams"]["reward_keys"] == list(defaults(domain).reward_keys)
    assert "corrgrpo" in out.splitlines()[1]


# Settings that select the estimator, or are named after it (run name, output folder).
ESTIMATOR_SETTINGS = (
    "algorithm.",
    "+algorithm.",
    "trainer.v1.trainer_mode",
    "trainer.experiment_name",
    "trainer.default_local_dir",
)


def estimator_free(recipe: Recipe) -> object:
    if recipe.framework == "verl":
        return {
            k: v
            for k, v in recipe.config["overrides"].items()
            if not k.startswith(ESTIMATOR_SETTINGS) or k == "algorithm.use_kl_in_reward"
        }
    if recipe.framework == "trl":
        args = {k: v for k, v in recipe.config["grpo_config"].items() if k not in ("run_name", "output_dir")}
        return {**recipe.config, "estimator": None, "grpo_config": args}
    name = re.compile(rf"(?<!\w){recipe.estimator}(?!\w)")
    return [a if a.startswith("--corrgrpo.") else name.sub("EST", a) for a in recipe.argv]


@pytest.mark.parametrize(("domain", "framework"), PAIRS)
@pytest.mark.parametrize("estimator", ["grpo", "gdpo", "rloo", "dr_grpo", "mo_grpo", "dara"])
def test_estimators_are_one_flag_apart(domain: str, framework: str, estimator: str) -> None:
    base = build_recipe(domain, framework)
    other = build_recipe(domain, framework, estimator=estimator)
    assert other.estimator == estimator
    assert estimator_free(other) == estimator_free(base)
    assert other.argv != base.argv


@pytest.mark.parametrize(
    ("estimator", "expected"),
    [
        (
            "corrgrpo",
            {
                "algorithm.adv_estimator": "corrgrpo",
                "+algorithm.reward_keys": KEYS,
                "+algorithm.reward_weights": ONES,
            },
        ),
        (
            "mo_grpo",
            {
                "algorithm.adv_estimator": "mo_grpo",
                "+algorithm.reward_keys": KEYS,
                "+algorithm.reward_weights": ONES,
            },
        ),
        (
            "dr_grpo",
            {
                "algorithm.adv_estimator": "corrgrpo",
                "algorithm.norm_adv_by_std_in_grpo": False,
                "+algorithm.reward_keys": KEYS,
                "+algorithm.reward_weights": ONES,
            },
        ),
        (
            "gdpo",
            {
                "algorithm.adv_estimator": "gdpo",
                "+algorithm.gdpo_reward_keys": KEYS,
                "+algorithm.gdpo_reward_weights": ONES,
            },
        ),
        ("grpo", {"algorithm.adv_estimator": "grpo"}),
        ("rloo", {"algorithm.adv_estimator": "rloo"}),
    ],
)
def test_verl_estimator_selection(estimator: str, expected: dict[str, object]) -> None:
    ov = build_recipe("agent_security", "verl", estimator=estimator).config["overrides"]
    chosen = {
        k: v
        for k, v in ov.items()
        if k.startswith(("algorithm.", "+algorithm.")) and k != "algorithm.use_kl_in_reward"
    }
    assert chosen == expected


def test_verl_v1_trainer_uses_the_plugin_trainer_mode() -> None:
    ov = build_recipe("tool_calling", "verl", overrides=["verl_legacy_trainer=false"]).config["overrides"]
    assert ov["trainer.use_v1"] is True
    assert ov["trainer.v1.trainer_mode"] == "corrgrpo"
    assert (
        "trainer.v1.trainer_mode"
        not in build_recipe(
            "tool_calling", "verl", estimator="grpo", overrides=["verl_legacy_trainer=false"]
        ).config["overrides"]
    )
    with pytest.raises(ValueError, match="legacy trainer"):
        build_recipe("tool_calling", "verl", estimator="gdpo", overrides=["verl_legacy_trainer=false"])


def test_paper_hyperparameters_are_the_defaults() -> None:
    tool, code, security = defaults("tool_calling"), defaults("code"), defaults("agent_security")
    assert (tool.train_batch_size, tool.group_size, tool.mini_batch_size, tool.epochs) == (128, 4, 32, 15)
    assert (tool.max_prompt_length, tool.max_response_length, tool.use_kl_loss, tool.lr) == (
        2048,
        2048,
        False,
        1e-6,
    )
    assert (code.train_batch_size, code.group_size, code.max_prompt_length, code.use_kl_loss) == (
        64,
        8,
        4096,
        True,
    )
    assert (security.train_batch_size, security.group_size, security.epochs) == (16, 8, 7)
    assert (security.max_prompt_length, security.max_response_length, security.multi_turn) == (
        12288,
        8192,
        True,
    )
    assert security.reward_keys == ("utility_reward", "safety_reward")
    assert all(h.kl_coef == 0.001 and h.reward_weights is None for h in (tool, code, security))


def test_verl_recipe_maps_the_hyperparameters() -> None:
    ov = build_recipe("tool_calling", "verl", overrides=["lr=2e-6", "group_size=8"]).config["overrides"]
    assert ov["actor_rollout_ref.actor.optim.lr"] == 2e-6
    assert ov["actor_rollout_ref.rollout.n"] == 8
    assert (
        ov["+algorithm.reward_keys"] == "[function_name_reward,parameter_reward,values_reward,format_reward]"
    )
    assert ov["reward.custom_reward_function.path"] == str(VERL_REWARD_FILE)
    assert ov["trainer.use_v1"] is False


def test_verl_extra_arguments_are_appended_verbatim() -> None:
    recipe = build_recipe("code", "verl", extra=["trainer.nnodes=2"])
    assert recipe.argv[-1] == "trainer.nnodes=2"


def test_agent_security_uses_the_shipped_agent_loop_config(capsys: pytest.CaptureFixture[str]) -> None:
    recipe = build_recipe("agent_security", "verl")
    assert not recipe.missing
    path = recipe.config["overrides"]["actor_rollout_ref.rollout.agent.agent_loop_config_path"]
    assert path == str(AGENT_LOOP_CONFIG)
    assert "agentdojo_agent" in Path(path).read_text(encoding="utf-8")
    assert main(["agent_security", "verl", "--dry-run"]) == 0
    assert "missing before a real run" not in capsys.readouterr().out


def test_agent_security_refuses_to_launch_without_an_agent_loop_config(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert build_recipe("agent_security", "verl", overrides=["agent_loop_config="]).missing
    assert main(["agent_security", "verl", "--dry-run", "agent_loop_config="]) == 0
    assert "missing before a real run: agent_loop_config" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["agent_security", "verl", "agent_loop_config="])
    assert "cannot launch yet" in capsys.readouterr().err


def test_trl_recipe_counts_completions_not_prompts() -> None:
    config = build_recipe("tool_calling", "trl").config
    args = config["grpo_config"]
    assert args["generation_batch_size"] == 128 * 4
    assert args["per_device_train_batch_size"] * args["gradient_accumulation_steps"] == 32 * 4
    assert args["num_generations"] == 4
    assert args["beta"] == 0.0
    assert build_recipe("code", "trl").config["grpo_config"]["beta"] == 0.001
    assert config["reward_keys"] == list(defaults("tool_calling").reward_keys)


def test_trl_extra_settings_are_parsed_as_json_when_possible() -> None:
    args = build_recipe(
        "tool_calling", "trl", extra=["use_cpu=true", "optim=adamw_torch", 'generation_kwargs={"top_k": 5}']
    ).config["grpo_config"]
    assert args["use_cpu"] is True
    assert args["optim"] == "adamw_torch"
    assert args["generation_kwargs"] == {"top_k": 5}
    with pytest.raises(ValueError, match="field=value"):
        build_recipe("tool_calling", "trl", extra=["oops"])


def test_trl_rejects_batch_sizes_that_do_not_divide() -> None:
    with pytest.raises(ValueError, match="per_device_batch_size"):
        build_recipe("tool_calling", "trl", overrides=["per_device_batch_size=3"])


def test_openrlhf_recipe_uses_our_launcher() -> None:
    recipe = build_recipe("tool_calling", "openrlhf", estimator="gdpo", overrides=["reward_weights=1,1,2,1"])
    argv = list(recipe.argv)
    assert argv[1:3] == ["-m", "corrgrpo_adapters.openrlhf"]
    assert "--algo.advantage.estimator" not in argv  # the launcher adds OpenRLHF's group_norm plumbing
    assert argv[argv.index("--corrgrpo.estimator") + 1] == "gdpo"
    keys = argv.index("--corrgrpo.reward_keys")
    assert argv[keys + 1 : keys + 5] == list(defaults("tool_calling").reward_keys)
    weights = argv.index("--corrgrpo.reward_weights")
    assert argv[weights + 1 : weights + 5] == ["1.0", "1.0", "2.0", "1.0"]
    assert argv[argv.index("--data.label_key") + 1] == "ground_truth"
    code = list(build_recipe("code", "openrlhf").argv)
    assert code[code.index("--data.label_key") + 1] == "label"
    assert argv[argv.index("--rollout.n_samples_per_prompt") + 1] == "4"
    assert argv[argv.index("--train.batch_size") + 1] == str(32 * 4)
    assert "--algo.kl.use_loss" not in argv
    assert "--algo.kl.use_loss" in build_recipe("code", "openrlhf").argv


@pytest.mark.parametrize(
    ("override", "field", "value"),
    [
        ("lr=3e-6", "lr", 3e-6),
        ("group_size=16", "group_size", 16),
        ("use_kl_loss=yes", "use_kl_loss", True),
        ("use_vllm=0", "use_vllm", False),
        ("reward_weights=[1, 2, 3, 4]", "reward_weights", (1.0, 2.0, 3.0, 4.0)),
        ("reward_weights=none", "reward_weights", None),
        ("reward_keys=format_reward,values_reward", "reward_keys", ("format_reward", "values_reward")),
        ("max_steps=7", "max_steps", 7),
        ("reward_kwargs=invalid_reward:-1,tag:x", "reward_kwargs", (("invalid_reward", -1), ("tag", "x"))),
        ("model=/models/qwen", "model", "/models/qwen"),
    ],
)
def test_overrides_are_typed(override: str, field: str, value: object) -> None:
    assert getattr(apply_overrides(defaults("tool_calling"), [override]), field) == value


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("nope=1", "unknown hyperparameter"),
        ("lr", "not name=value"),
        ("lr=fast", "expected float"),
        ("use_kl_loss=maybe", "true or false"),
        ("reward_weights=[1,2]", "reward_weights"),
        ("group_size=0", "at least 1"),
        ("mini_batch_size=48", "multiple"),
        ("reward_kwargs=a", "key:value"),
    ],
)
def test_bad_overrides_name_the_problem(override: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        apply_overrides(defaults("tool_calling"), [override])


def test_overrides_do_not_mutate_the_defaults() -> None:
    base = defaults("code")
    apply_overrides(base, {"lr": 5.0})
    assert base.lr == 1e-6


@pytest.mark.parametrize(
    ("domain", "framework", "estimator", "message"),
    [
        ("vision", "verl", "corrgrpo", "unknown domain"),
        ("code", "jax", "corrgrpo", "unknown framework"),
        ("code", "verl", "ppo", "unknown estimator"),
    ],
)
def test_bad_choices_are_rejected(domain: str, framework: str, estimator: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_recipe(domain, framework, estimator=estimator)


def test_cli_reports_bad_overrides_as_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["tool_calling", "verl", "--dry-run", "nope=1"])
    assert exit_info.value.code == 2
    assert "unknown hyperparameter" in capsys.readouterr().err


def test_cli_passes_framework_arguments_after_the_separator(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["code", "verl", "--dry-run", "--estimator", "grpo", "lr=4e-6", "--", "trainer.nnodes=4"]) == 0
    )
    command = capsys.readouterr().out.splitlines()[1]
    assert "algorithm.adv_estimator=grpo" in command
    assert "actor_rollout_ref.actor.optim.lr=4e-06" in command
    assert command.endswith("trainer.nnodes=4")


def test_module_entry_point_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "corrgrpo_tasks.recipes", "tool_calling", "openrlhf", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "corrgrpo_adapters.openrlhf" in done.stdout


def test_estimator_list_includes_the_papers_comparisons() -> None:
    assert {"corrgrpo", "grpo", "gdpo"} <= set(estimator_names())


def _load_like_verl():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("custom_module", VERL_REWARD_FILE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compute_score


def test_verl_reward_file_dispatches_on_data_source() -> None:
    score = _load_like_verl()
    gt = '<think>a</think>\n<tool_call>\n{"name": "f", "parameters": {}}\n</tool_call>'
    assert score("rlla", gt, gt)["score"] == 4.0
    assert score("api_bank", "x", gt, {"level": 1})["accuracy_reward"] == -3.0
    result = checker_result(case_id="banking:user_task_0", case_type="clean", utility=True)
    assert score("agentdojo", "", "", {"agentdojo_result": result})["utility_reward"] == 1.0
    with pytest.raises(ValueError, match="no corrgrpo reward"):
        score("gsm8k", "", "")


def test_a_framework_a_domain_does_not_run_on_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = domains.get_domain("agent_security")  # as before TRL and OpenRLHF had tool loops
    monkeypatch.setitem(domains.DOMAINS, "agent_security", dataclasses.replace(spec, frameworks=("verl",)))
    with pytest.raises(ValueError, match="runs on"):
        build_recipe("agent_security", "openrlhf")


def test_agent_security_on_openrlhf_loads_the_agent_file_and_exports_its_limits() -> None:
    recipe = build_recipe("agent_security", "openrlhf", overrides=["max_turns=5"])
    flags = list(recipe.config["flags"])
    agent = Path(flags[flags.index("--train.agent_func_path") + 1])
    assert agent.name == "openrlhf_agent.py"
    assert agent.is_file()
    assert "--reward.remote_url" not in flags
    assert recipe.env["CORRGRPO_AGENT_MAX_TURNS"] == "5"
    assert recipe.env["CORRGRPO_AGENT_MAX_RESPONSE"] == str(recipe.hparams.max_response_length)
    prefix = recipe.command().split(" -m ")[0]
    assert all(f"{k}={v}" in prefix for k, v in recipe.env.items())
    assert "CORRGRPO_AGENT_MAX_TOOL_RESPONSE=2048" in prefix


@pytest.mark.parametrize("domain", ["tool_calling", "agent_security"])
def test_the_reward_profile_reaches_every_framework(domain: str) -> None:
    paper = {fw: build_recipe(domain, fw) for fw in ("verl", "trl", "openrlhf")}
    hard = {fw: build_recipe(domain, fw, profile="hardened") for fw in ("verl", "trl", "openrlhf")}
    key = "+reward.custom_reward_function.reward_kwargs.profile"
    assert key not in paper["verl"].config["overrides"]  # the paper's reward: nothing to pass
    assert hard["verl"].config["overrides"][key] == "hardened"
    assert "profile" not in paper["trl"].config["reward_kwargs"]
    assert hard["trl"].config["reward_kwargs"]["profile"] == "hardened"
    variable = "CORRGRPO_AGENT_PROFILE" if domain == "agent_security" else "CORRGRPO_REWARD_PROFILE"
    assert variable not in paper["openrlhf"].env
    assert hard["openrlhf"].env[variable] == "hardened"
    # The override and the keyword are the same thing.
    assert build_recipe(domain, "verl", overrides=["profile=hardened"]).config == hard["verl"].config


def test_unknown_profiles_and_profiles_in_reward_kwargs_are_rejected() -> None:
    with pytest.raises(ValueError, match="profile"):
        build_recipe("tool_calling", "verl", profile="strict")
    with pytest.raises(ValueError, match="profile="):
        build_recipe("tool_calling", "verl", overrides=["reward_kwargs=profile:hardened"])


def test_agent_security_recipes_run_the_papers_parallel_calls_everywhere() -> None:
    assert build_recipe("agent_security", "openrlhf").env["CORRGRPO_AGENT_MAX_PARALLEL_CALLS"] == "1"
    trl = build_recipe("agent_security", "trl").config
    assert trl["max_parallel_calls"] == 1
    assert trl["environment"]["max_turns"] == 8
