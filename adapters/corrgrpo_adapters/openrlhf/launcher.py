"""``corrgrpo-openrlhf``: a drop-in for ``python -m openrlhf.cli.train_ppo_ray`` that trains on a core estimator.

Usage::

    corrgrpo-openrlhf --corrgrpo.estimator corrgrpo --corrgrpo.reward_keys acc fmt \\
        [--corrgrpo.reward_weights 1 0.5] [--corrgrpo.option eps=1e-6 ...] [--corrgrpo.policy_loss cispo] \\
        <every argument of openrlhf.cli.train_ppo_ray>

The ``--corrgrpo.*`` options are consumed here; every other argument reaches OpenRLHF's own parser
unchanged, plus ``--algo.advantage.estimator group_norm`` (OpenRLHF's group layout and return
computation, whose advantage the patch replaces). Ray is started with our setup hook in its
``runtime_env`` and then OpenRLHF's entry point runs in this process, as if it had been called itself.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import runpy
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from .config import CONFIG_ENV_VAR, POLICY_LOSSES, AdapterConfig, parse_options
from .hook import HOST_ESTIMATOR

__all__ = ["Launch", "build_parser", "main", "merge_runtime_env", "parse_launch", "run_openrlhf"]

OPENRLHF_ENTRY = "openrlhf.cli.train_ppo_ray"
SETUP_HOOK = "corrgrpo_adapters.openrlhf.hook.setup"
# Ray sets this in a driver started by `ray job submit`; it holds the job's runtime_env.
_JOB_CONFIG_ENV_VAR = "RAY_JOB_CONFIG_JSON_ENV_VAR"
# The env_vars OpenRLHF's train() gives Ray when it starts Ray itself; it skips that once we have.
_OPENRLHF_ENV_DEFAULTS = {
    "TOKENIZERS_PARALLELISM": "true",
    "NCCL_DEBUG": "WARN",
    "RAY_ENABLE_ZERO_COPY_TORCH_TENSORS": "1",
}
# Variables of the launcher's environment that Ray actors need too (the AgentDojo agent file's limits
# and the reward profile, read inside the actors): forwarded into the runtime_env unless it sets them.
_FORWARDED_PREFIX = ("CORRGRPO_AGENT_", "CORRGRPO_REWARD_")
# Strings OpenRLHF's CLI must contain for the argument layout this launcher rewrites.
_CLI_LAYOUT = ('"--algo.advantage.estimator"', f'"{HOST_ESTIMATOR}"', '"--rollout.n_samples_per_prompt"')


@dataclasses.dataclass(frozen=True)
class Launch:
    """Everything :func:`main` needs: the adapter config, OpenRLHF's argv and ``ray.init`` keywords."""

    config: AdapterConfig
    openrlhf_argv: list[str]
    ray_init: dict[str, Any]


def build_parser() -> argparse.ArgumentParser:
    import corrgrpo_core as cc

    parser = argparse.ArgumentParser(
        prog="corrgrpo-openrlhf",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog=f"All other arguments go to {OPENRLHF_ENTRY} (see its --help).",
        allow_abbrev=False,  # an abbreviation must never swallow one of OpenRLHF's options
    )
    group = parser.add_argument_group("corrgrpo")
    group.add_argument(
        "--corrgrpo.estimator",
        dest="estimator",
        default="corrgrpo",
        choices=cc.estimator_names(),
        help="core advantage estimator (default: corrgrpo)",
    )
    group.add_argument(
        "--corrgrpo.reward_keys",
        dest="reward_keys",
        nargs="+",
        required=True,
        metavar="KEY",
        help="reward components: keys of the reward function's extra_logs (Experience.info); "
        "'reward' is OpenRLHF's scalar reward after its length penalties",
    )
    group.add_argument(
        "--corrgrpo.reward_weights",
        dest="weights",
        nargs="+",
        type=float,
        default=None,
        metavar="W",
        help="one weight per reward key (default: the core's)",
    )
    group.add_argument(
        "--corrgrpo.option",
        dest="options",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="core estimator option, repeatable, e.g. eps=1e-6 ddof=1 nan_policy=ignore singleton=zero",
    )
    group.add_argument(
        "--corrgrpo.policy_loss",
        dest="policy_loss",
        default="openrlhf",
        choices=POLICY_LOSSES,
        help="'cispo' replaces OpenRLHF's PPO loss by the core's CISPO, clipped by --actor.eps_clip_low_high "
        "(default: openrlhf, i.e. --actor.policy_loss_type)",
    )
    group.add_argument(
        "--corrgrpo.no_stats",
        dest="log_stats",
        action="store_false",
        help="do not add the core's diagnostics (corrgrpo/*) to OpenRLHF's logged metrics",
    )
    group.add_argument(
        "--corrgrpo.ray_init",
        dest="ray_init",
        type=_json_object,
        default={},
        metavar="JSON",
        help="keyword arguments for ray.init as a JSON object (address, num_cpus, ...); its runtime_env is "
        "merged with ours, and a worker_process_setup_hook in it runs before ours",
    )
    return parser


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _find_option(argv: Sequence[str], name: str) -> tuple[int, str | None] | None:
    """Position and value of ``name`` in ``argv`` (``--name value`` or ``--name=value``); last one wins."""
    found = None
    for i, arg in enumerate(argv):
        if arg == name:
            found = (i, argv[i + 1] if i + 1 < len(argv) else None)
        elif arg.startswith(name + "="):
            found = (i, arg[len(name) + 1 :])
    return found


#: OpenRLHF options CISPO does not combine with -> the values it accepts (None: a flag, never).
#: The train/rollout IS correction is ``--algo.advantage.is_correction_level`` in OpenRLHF 0.11.2 and
#: the flag ``--algo.advantage.is_correction_enable`` before; both are refused, whichever this OpenRLHF
#: has (its own parser rejects the other).
_CISPO_REPLACES: dict[str, set[str] | None] = {
    "--actor.policy_loss_type": {"ppo"},
    "--algo.advantage.is_correction_level": {"off"},
    "--algo.advantage.is_correction_enable": None,
    "--actor.dual_clip": set(),
}


def _refuse_ppo_variants(parser: argparse.ArgumentParser, rest: Sequence[str]) -> None:
    for name, ok in _CISPO_REPLACES.items():
        if ok is None:
            if name in rest:
                parser.error(f"--corrgrpo.policy_loss cispo replaces OpenRLHF's PPO loss; drop {name}")
            continue
        found = _find_option(rest, name)
        if found is not None and found[1] not in ok:
            parser.error(f"--corrgrpo.policy_loss cispo replaces OpenRLHF's PPO loss; drop {name} {found[1]}")


def _openrlhf_argv(parser: argparse.ArgumentParser, rest: list[str], config: AdapterConfig) -> list[str]:
    stray = [arg for arg in rest if arg.startswith("--corrgrpo.")]
    if stray:
        parser.error(f"unknown corrgrpo option(s) {stray}; see --help")

    estimator = _find_option(rest, "--algo.advantage.estimator")
    if estimator is not None and estimator[1] != HOST_ESTIMATOR:
        parser.error(
            f"--algo.advantage.estimator {estimator[1]} conflicts with --corrgrpo.estimator: the launcher runs "
            f"OpenRLHF's {HOST_ESTIMATOR} plumbing and replaces its advantage; drop --algo.advantage.estimator"
        )
    n_samples = _find_option(rest, "--rollout.n_samples_per_prompt")
    value = None if n_samples is None else n_samples[1]
    if value is None or (value.strip().lstrip("-").isdigit() and int(value) < 2):
        # A non-integer is left to OpenRLHF's parser, which names it.
        parser.error(
            f"--corrgrpo.estimator {config.estimator} normalises within groups of samples of one prompt; "
            "set --rollout.n_samples_per_prompt to 2 or more"
        )
    if config.policy_loss == "cispo":
        _refuse_ppo_variants(parser, rest)
    return rest if estimator is not None else [*rest, "--algo.advantage.estimator", HOST_ESTIMATOR]


def merge_runtime_env(
    config: AdapterConfig, *envs: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], AdapterConfig]:
    """Our runtime_env on top of the user's ``envs`` (merged left to right, conflicts are errors).

    A ``worker_process_setup_hook`` among them is kept and called by ours (Ray allows one hook);
    ``env_vars`` are merged key by key, over the defaults OpenRLHF's own ``ray.init`` takes from
    ``environ`` and over ``environ``'s ``CORRGRPO_AGENT_*`` and ``CORRGRPO_REWARD_*`` variables (so they
    reach actors on any cluster). Returns the runtime_env and the config that records the hook.
    """
    environ = os.environ if environ is None else environ
    merged: dict[str, Any] = {}
    env_vars: dict[str, str] = {}
    for env in envs:
        for key, value in (env or {}).items():
            if key == "env_vars":
                clash = set(env_vars) & set(value)
                if clash:
                    raise ValueError(f"runtime_env env_vars {sorted(clash)} are set twice")
                env_vars.update({k: str(v) for k, v in value.items()})
            elif key in merged:
                raise ValueError(f"runtime_env field {key!r} is set twice (job and --corrgrpo.ray_init)")
            else:
                merged[key] = value
    if CONFIG_ENV_VAR in env_vars:
        raise ValueError(f"{CONFIG_ENV_VAR} is the launcher's own runtime_env variable; do not set it")
    user_hook = merged.pop("worker_process_setup_hook", None)
    if user_hook is not None and not isinstance(user_hook, str):
        raise ValueError("a worker_process_setup_hook to chain must be a 'module.function' string")
    if user_hook == SETUP_HOOK:
        user_hook = None
    config = dataclasses.replace(config, user_setup_hook=user_hook or config.user_setup_hook)
    defaults = {k: environ.get(k, v) for k, v in _OPENRLHF_ENV_DEFAULTS.items()}
    forwarded = {k: v for k, v in environ.items() if k.startswith(_FORWARDED_PREFIX)}
    merged["env_vars"] = {**defaults, **forwarded, **env_vars, CONFIG_ENV_VAR: config.to_json()}
    merged["worker_process_setup_hook"] = SETUP_HOOK
    return merged, config


def parse_launch(argv: Sequence[str] | None = None, *, environ: Mapping[str, str] | None = None) -> Launch:
    """Split ``argv`` into our configuration and OpenRLHF's arguments; errors exit like argparse's."""
    environ = os.environ if environ is None else environ
    parser = build_parser()
    ns, rest = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    try:
        config = AdapterConfig(
            estimator=ns.estimator,
            reward_keys=tuple(ns.reward_keys),
            weights=None if ns.weights is None else tuple(ns.weights),
            options=parse_options(ns.options),
            policy_loss=ns.policy_loss,
            log_stats=ns.log_stats,
        )
    except (TypeError, ValueError, RuntimeError) as exc:
        parser.error(str(exc))
    openrlhf_argv = _openrlhf_argv(parser, rest, config)

    ray_init = dict(ns.ray_init)
    job_env = None
    if environ.get(_JOB_CONFIG_ENV_VAR):
        job_env = json.loads(environ[_JOB_CONFIG_ENV_VAR]).get("runtime_env")
    try:
        runtime_env, config = merge_runtime_env(
            config, job_env, ray_init.pop("runtime_env", None), environ=environ
        )
    except ValueError as exc:
        parser.error(str(exc))
    ray_init["runtime_env"] = runtime_env
    return Launch(config, openrlhf_argv, ray_init)


def check_cli_layout(source: str) -> None:
    """Raise unless OpenRLHF's CLI source still has the options this launcher relies on."""
    from .hook import _layout_error

    missing = [s for s in _CLI_LAYOUT if s not in source]
    if missing:
        raise _layout_error(f"{OPENRLHF_ENTRY} lacks {', '.join(missing)}")


def run_openrlhf(openrlhf_argv: Sequence[str]) -> None:
    """Run OpenRLHF's own entry point in this process with ``openrlhf_argv``."""
    spec = importlib.util.find_spec(OPENRLHF_ENTRY)
    if spec is None or spec.origin is None:
        from .hook import _layout_error

        raise _layout_error(f"cannot find {OPENRLHF_ENTRY}")
    with open(spec.origin, encoding="utf-8") as handle:
        check_cli_layout(handle.read())
    saved = sys.argv
    sys.argv = [spec.origin, *openrlhf_argv]
    try:
        runpy.run_module(OPENRLHF_ENTRY, run_name="__main__", alter_sys=True)
    finally:
        sys.argv = saved


def main(argv: Sequence[str] | None = None) -> int:
    import ray

    from .hook import check_openrlhf

    launch = parse_launch(argv)
    check_openrlhf(launch.config)  # fail here, not in a Ray worker, when OpenRLHF's layout changed
    if ray.is_initialized():
        raise RuntimeError(
            "Ray is already running in this process; the launcher must start it (with its hook)"
        )
    if os.environ.get(_JOB_CONFIG_ENV_VAR):
        # The job's runtime_env is already part of ours; let ours stand instead of Ray re-merging.
        os.environ["RAY_OVERRIDE_JOB_RUNTIME_ENV"] = "1"
    ray.init(**launch.ray_init)
    try:
        run_openrlhf(launch.openrlhf_argv)
    finally:
        ray.shutdown()
    return 0
