"""The launcher: our options consumed, OpenRLHF's passed through to its real parser, clear errors."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from corrgrpo_adapters.openrlhf import launcher
from corrgrpo_adapters.openrlhf.config import CONFIG_ENV_VAR, AdapterConfig
from corrgrpo_adapters.openrlhf.hook import OpenRLHFLayoutError

# fmt: off
# A realistic OpenRLHF command line: nargs=2 options, a negative number, '=' forms, store_true flags.
OPENRLHF_ARGS = [
    "--actor.model_name_or_path", "/models/tiny",
    "--reward.remote_url", "reward_func.py",
    "--rollout.n_samples_per_prompt", "4",
    "--rollout.batch_size", "8",
    "--actor.eps_clip_low_high", "0.2", "0.28",
    "--reward.stop_properly_penalty_coef", "-0.5",
    "--reward.clip_range", "-5", "5",
    "--algo.kl.use_loss",
    "--data.input_key=question",
]
OURS = [
    "--corrgrpo.estimator", "corrgrpo",
    "--corrgrpo.reward_keys", "acc", "fmt",
    "--corrgrpo.reward_weights", "1", "0.5",
    "--corrgrpo.option", "eps=1e-5",
    "--corrgrpo.option", "nan_policy=ignore",
]
# fmt: on


def test_our_options_are_consumed_and_openrlhf_arguments_pass_intact():
    interleaved = OPENRLHF_ARGS[:4] + OURS[:5] + OPENRLHF_ARGS[4:] + OURS[5:]
    launch = launcher.parse_launch(interleaved, environ={})
    assert launch.openrlhf_argv == [*OPENRLHF_ARGS, "--algo.advantage.estimator", "group_norm"]
    assert launch.config == AdapterConfig(
        "corrgrpo", ("acc", "fmt"), weights=(1.0, 0.5), options={"eps": 1e-5, "nan_policy": "ignore"}
    )


def test_openrlhf_real_parser_accepts_the_passed_arguments(openrlhf_cli):
    launch = launcher.parse_launch([*OURS, *OPENRLHF_ARGS], environ={})
    args = openrlhf_cli(launch.openrlhf_argv)
    assert args.algo.advantage.estimator == "group_norm"
    assert args.rollout.n_samples_per_prompt == 4
    assert args.actor.eps_clip_low_high == [0.2, 0.28]
    assert args.reward.stop_properly_penalty_coef == -0.5
    assert args.reward.clip_range == [-5.0, 5.0]
    assert args.algo.kl.use_loss is True
    assert args.data.input_key == "question"
    assert sys.argv[0] != launch.openrlhf_argv[0]  # the runner restores sys.argv


def test_an_explicit_group_norm_is_kept_once():
    argv = [*OURS, *OPENRLHF_ARGS, "--algo.advantage.estimator=group_norm"]
    launch = launcher.parse_launch(argv, environ={})
    assert launch.openrlhf_argv == [*OPENRLHF_ARGS, "--algo.advantage.estimator=group_norm"]


def test_an_unknown_openrlhf_option_reaches_openrlhf_parser(openrlhf_cli, capsys):
    launch = launcher.parse_launch([*OURS, *OPENRLHF_ARGS, "--actor.no_such_option", "1"], environ={})
    assert launch.openrlhf_argv[-4:-2] == ["--actor.no_such_option", "1"]
    with pytest.raises(SystemExit) as exit_info:
        openrlhf_cli(launch.openrlhf_argv)
    assert exit_info.value.code == 2
    assert "--actor.no_such_option" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--corrgrpo.reward_keys", "acc", "--corrgrpo.estimator", "ppo"], "invalid choice: 'ppo'"),
        (["--corrgrpo.estimator", "grpo"], "--corrgrpo.reward_keys"),
        (["--corrgrpo.reward_keys", "acc", "fmt", "--corrgrpo.reward_weights", "1"], "1 weight"),
        (["--corrgrpo.reward_keys", "acc", "acc"], "repeat"),
        (["--corrgrpo.reward_keys", "acc", "--corrgrpo.reward_weights", "nan"], "finite"),
        (["--corrgrpo.reward_keys", "acc", "--corrgrpo.option", "epsilon=1"], "takes no option"),
        (["--corrgrpo.reward_keys", "acc", "--corrgrpo.option", "eps"], "NAME=VALUE"),
        (["--corrgrpo.reward_keys", "acc", "--corrgrpo.option", "ddof=-1"], "ddof"),
        (["--corrgrpo.reward_keys", "acc", "--corrgrpo.option", "nan_policy=drop"], "nan_policy"),
        (["--corrgrpo.reward_keys", "acc", "--corrgrpo.option", "weights=1"], "set by the adapter"),
        (
            ["--corrgrpo.reward_keys", "acc", "--corrgrpo.option", "eps=1", "--corrgrpo.option", "eps=2"],
            "twice",
        ),
        (["--corrgrpo.reward_keys", "acc", "--corrgrpo.estimtor", "grpo"], "unknown corrgrpo option"),
        (["--corrgrpo.reward_keys", "acc", "--corrgrpo.ray_init", "[1]"], "JSON object"),
        (
            ["--corrgrpo.reward_keys", "acc", "--algo.advantage.estimator", "gae"],
            "drop --algo.advantage.estimator",
        ),
    ],
)
def test_bad_values_get_clear_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        launcher.parse_launch([*argv, "--rollout.n_samples_per_prompt", "4"], environ={})
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("n_samples", [None, "1", "--rollout.n_samples_per_prompt=1"])
def test_groups_of_one_are_refused(capsys, n_samples):
    argv = ["--corrgrpo.reward_keys", "acc"]
    if n_samples == "1":
        argv += ["--rollout.n_samples_per_prompt", "1"]
    elif n_samples:
        argv.append(n_samples)
    with pytest.raises(SystemExit):
        launcher.parse_launch(argv, environ={})
    assert "--rollout.n_samples_per_prompt to 2 or more" in capsys.readouterr().err


def test_runtime_env_merges_the_users_and_chains_their_hook():
    user = {"worker_process_setup_hook": "mypkg.setup", "env_vars": {"A": "1"}, "pip": ["x"]}
    argv = [*OURS, *OPENRLHF_ARGS, "--corrgrpo.ray_init", json.dumps({"num_cpus": 3, "runtime_env": user})]
    job = {"runtime_env": {"env_vars": {"B": "2"}, "working_dir": "/job"}}
    environ = {"RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps(job), "NCCL_DEBUG": "INFO"}
    launch = launcher.parse_launch(argv, environ=environ)
    env = launch.ray_init["runtime_env"]
    assert launch.ray_init["num_cpus"] == 3
    assert env["worker_process_setup_hook"] == launcher.SETUP_HOOK
    assert env["pip"] == ["x"]
    assert env["working_dir"] == "/job"
    assert env["env_vars"]["A"] == "1"
    assert env["env_vars"]["B"] == "2"
    # What OpenRLHF's own ray.init would have set, honouring the caller's environment as it does.
    assert env["env_vars"]["TOKENIZERS_PARALLELISM"] == "true"
    assert env["env_vars"]["NCCL_DEBUG"] == "INFO"
    shipped = AdapterConfig.from_json(env["env_vars"][CONFIG_ENV_VAR])
    assert shipped == launch.config
    assert shipped.user_setup_hook == "mypkg.setup"


def test_agent_limits_in_the_launchers_environment_reach_the_actors():
    user = {"env_vars": {"CORRGRPO_AGENT_MAX_TOOL_RESPONSE": "99"}}
    argv = [*OURS, *OPENRLHF_ARGS, "--corrgrpo.ray_init", json.dumps({"runtime_env": user})]
    environ = {
        "CORRGRPO_AGENT_MAX_TURNS": "12",
        "CORRGRPO_AGENT_MAX_TOOL_RESPONSE": "7",
        "CORRGRPO_REWARD_PROFILE": "hardened",
        "UNRELATED": "x",
    }
    env_vars = launcher.parse_launch(argv, environ=environ).ray_init["runtime_env"]["env_vars"]
    assert env_vars["CORRGRPO_AGENT_MAX_TURNS"] == "12"
    assert env_vars["CORRGRPO_REWARD_PROFILE"] == "hardened"  # the reward file reads it in the actors
    assert env_vars["CORRGRPO_AGENT_MAX_TOOL_RESPONSE"] == "99"  # the explicit runtime_env wins
    assert "UNRELATED" not in env_vars


@pytest.mark.parametrize(
    ("user", "job", "message"),
    [
        ({"env_vars": {CONFIG_ENV_VAR: "{}"}}, None, "launcher's own"),
        ({"env_vars": {"A": "1"}}, {"env_vars": {"A": "2"}}, "set twice"),
        ({"pip": ["x"]}, {"pip": ["y"]}, "set twice"),
    ],
)
def test_runtime_env_conflicts_are_errors(capsys, user, job, message):
    argv = [*OURS, *OPENRLHF_ARGS, "--corrgrpo.ray_init", json.dumps({"runtime_env": user})]
    environ = {} if job is None else {"RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"runtime_env": job})}
    with pytest.raises(SystemExit):
        launcher.parse_launch(argv, environ=environ)
    assert message in capsys.readouterr().err


def test_cli_layout_check_on_the_real_source_and_a_changed_one():
    spec = importlib.util.find_spec(launcher.OPENRLHF_ENTRY)
    assert spec is not None
    assert spec.origin is not None
    source = Path(spec.origin).read_text(encoding="utf-8")
    launcher.check_cli_layout(source)
    with pytest.raises(OpenRLHFLayoutError, match=r"lacks.*--rollout\.n_samples_per_prompt"):
        launcher.check_cli_layout(source.replace('"--rollout.n_samples_per_prompt"', '"--rollout.n"'))


def test_module_runs_as_python_dash_m(tmp_path):
    # --help needs neither Ray nor OpenRLHF's GPU modules; it lists our options and where the rest go.
    out = subprocess.run(
        [sys.executable, "-m", "corrgrpo_adapters.openrlhf", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=True,
    ).stdout
    assert "--corrgrpo.reward_keys" in out
    assert "openrlhf.cli.train_ppo_ray" in out


def test_our_suite_is_not_shadowed_by_openrlhf_tests_package(orl):
    from importlib.machinery import PathFinder
    from importlib.metadata import files

    # The OpenRLHF wheel really installs a top-level `tests` package, and a plain `import tests` on
    # this interpreter's path would find it (a regular package beats our __init__-less folder) ...
    assert "tests/__init__.py" in {str(f) for f in files("openrlhf") or []}
    spec = PathFinder.find_spec("tests", sys.path)
    assert spec is not None
    assert spec.origin is not None
    assert "site-packages" in spec.origin
    # ... yet this module and the conftest helpers were loaded from this folder, by file, not by name.
    assert (
        Path(sys.modules[__name__].__file__).resolve()
        == Path(__file__).resolve()
        == orl.here / Path(__file__).name
    )
    assert Path(sys.modules[orl.stubs_module].__file__).resolve().parent == orl.here
    assert Path(orl.make_args.__code__.co_filename).resolve().parent == orl.here
