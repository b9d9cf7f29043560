"""Pure recipe builders: hyperparameters in, a command line (and its resolved config) out.

Nothing here imports a training framework, so ``--dry-run`` and the tests run anywhere.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from corrgrpo_adapters.verl.recipe import estimator_overrides
from corrgrpo_tasks.domains import DOMAINS, get_domain, resolve
from corrgrpo_tasks.recipes._hparams import HParams

_HERE = Path(__file__).resolve().parent
VERL_REWARD_FILE = _HERE / "verl_reward.py"
OPENRLHF = "openrlhf"  # the framework :func:`build_openrlhf` launches: the key of the spec entries it reads
# The OpenRLHF reward files by domain: a view of the domain specs (``DomainSpec.rewards[OPENRLHF]``).
OPENRLHF_REWARD_FILES: dict[str, Path] = {
    d.name: resolve(d.rewards[OPENRLHF]) for d in DOMAINS.values() if OPENRLHF in d.rewards
}
# The OpenRLHF launcher takes OpenRLHF's own flags plus these; it adds OpenRLHF's ``group_norm`` plumbing
# itself and replaces only the advantage.
OPENRLHF_OUR_FLAGS = {
    "estimator": "--corrgrpo.estimator",
    "reward_keys": "--corrgrpo.reward_keys",
    "reward_weights": "--corrgrpo.reward_weights",
}


@dataclass(frozen=True)
class Recipe:
    """One resolved launch: the command, its environment, and the config it amounts to."""

    domain: str
    framework: str
    estimator: str
    hparams: HParams
    argv: tuple[str, ...]
    config: Mapping[str, Any]
    env: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    """Settings a real launch still needs (a dry run prints them; the CLI refuses to launch without them)."""
    checkpoint_dir: str = ""
    """Where the trainer saves its checkpoints (what ``corrgrpo pipeline`` converts and evaluates)."""

    def command(self) -> str:
        """The shell command line, environment assignments first."""
        prefix = [f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items())]
        return " ".join([*prefix, shlex.join(self.argv)])

    def describe(self) -> str:
        """What ``--dry-run`` prints: the command, then the resolved config as JSON."""
        lines = [
            f"# {self.domain} / {self.framework} / estimator={self.estimator}",
            self.command(),
            "",
            "# resolved config",
            json.dumps({"hparams": asdict(self.hparams), "framework": self.config}, indent=2, default=str),
        ]
        lines += [f"# note: {n}" for n in self.notes]
        lines += [f"# missing before a real run: {m}" for m in self.missing]
        return "\n".join(lines)


def _list(values: Sequence[Any]) -> str:
    return "[" + ",".join(str(v) for v in values) + "]"


def _experiment(domain: str, estimator: str, hp: HParams) -> str:
    return hp.experiment_name or f"{domain}-{estimator}"


def verl_overrides(domain: str, estimator: str, hp: HParams) -> dict[str, Any]:
    """Hydra overrides for ``verl.trainer.main_ppo`` (keys with ``+`` are new to verl's schema)."""
    ov: dict[str, Any] = {
        **estimator_overrides(estimator, hp.reward_keys, hp.weights(), legacy_trainer=hp.verl_legacy_trainer),
        "algorithm.use_kl_in_reward": False,
        "critic.enable": False,
        "data.train_files": hp.train_files,
        "data.val_files": hp.val_files,
        "data.train_batch_size": hp.train_batch_size,
        "data.max_prompt_length": hp.max_prompt_length,
        "data.max_response_length": hp.max_response_length,
        "data.filter_overlong_prompts": True,
        "data.truncation": "error",
        "actor_rollout_ref.model.path": hp.model,
        "actor_rollout_ref.model.use_remove_padding": True,
        "actor_rollout_ref.model.enable_gradient_checkpointing": hp.gradient_checkpointing,
        "actor_rollout_ref.actor.optim.lr": hp.lr,
        "actor_rollout_ref.actor.optim.weight_decay": hp.weight_decay,
        "actor_rollout_ref.actor.ppo_mini_batch_size": hp.mini_batch_size,
        "actor_rollout_ref.actor.ppo_epochs": hp.ppo_epochs,
        "actor_rollout_ref.actor.use_dynamic_bsz": True,
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": hp.max_token_len_per_gpu,
        "actor_rollout_ref.actor.use_kl_loss": hp.use_kl_loss,
        "actor_rollout_ref.actor.kl_loss_coef": hp.kl_coef,
        "actor_rollout_ref.actor.kl_loss_type": hp.kl_loss_type,
        "actor_rollout_ref.actor.entropy_coeff": hp.entropy_coeff,
        "actor_rollout_ref.actor.clip_ratio_low": hp.clip_ratio_low,
        "actor_rollout_ref.actor.clip_ratio_high": hp.clip_ratio_high,
        "actor_rollout_ref.rollout.name": "vllm",
        "actor_rollout_ref.rollout.n": hp.group_size,
        "actor_rollout_ref.rollout.temperature": hp.temperature,
        "actor_rollout_ref.rollout.top_p": hp.top_p,
        "actor_rollout_ref.rollout.gpu_memory_utilization": hp.gpu_memory_utilization,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": hp.tensor_parallel,
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": True,
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": hp.max_token_len_per_gpu,
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz": True,
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": hp.max_token_len_per_gpu,
        "reward.custom_reward_function.path": str(get_domain(domain).reward("verl")),
        "reward.custom_reward_function.name": "compute_score",
        "reward.reward_manager.name": "naive",
        "trainer.use_v1": not hp.verl_legacy_trainer,
        "trainer.n_gpus_per_node": hp.n_gpus,
        "trainer.nnodes": hp.nnodes,
        "trainer.total_epochs": hp.epochs,
        "trainer.save_freq": hp.save_freq,
        "trainer.test_freq": hp.test_freq,
        "trainer.val_before_train": hp.val_before_train,
        "trainer.logger": _list([hp.logger]),
        "trainer.project_name": hp.project_name,
        "trainer.experiment_name": _experiment(domain, estimator, hp),
        "trainer.default_local_dir": f"{hp.output_dir}/{_experiment(domain, estimator, hp)}",
        "trainer.max_actor_ckpt_to_keep": 2,
        "data.seed": hp.seed,
        "actor_rollout_ref.rollout.seed": hp.seed,
    }
    if hp.max_steps is not None:
        ov["trainer.total_training_steps"] = hp.max_steps
    for key, value in hp.reward_kwargs:
        ov[f"+reward.custom_reward_function.reward_kwargs.{key}"] = value
    if hp.profile != "paper":
        ov["+reward.custom_reward_function.reward_kwargs.profile"] = hp.profile
    if hp.multi_turn:
        ov.update(
            {
                "data.return_raw_chat": True,
                "actor_rollout_ref.rollout.mode": "async",
                "actor_rollout_ref.rollout.calculate_log_probs": True,
                "actor_rollout_ref.rollout.multi_turn.enable": True,
                "actor_rollout_ref.rollout.multi_turn.max_user_turns": hp.max_turns,
                "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": hp.max_turns,
                "actor_rollout_ref.rollout.multi_turn.max_parallel_calls": hp.max_parallel_calls,
                "actor_rollout_ref.rollout.multi_turn.max_tool_response_length": hp.max_tool_response_length,
                "actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side": "middle",
                "actor_rollout_ref.rollout.multi_turn.use_inference_chat_template": True,
                "actor_rollout_ref.rollout.multi_turn.format": "hermes",
                "actor_rollout_ref.rollout.agent.default_agent_loop": "agentdojo_agent",
            }
        )
        if hp.agent_loop_config:
            ov["actor_rollout_ref.rollout.agent.agent_loop_config_path"] = hp.agent_loop_config
        if hp.tool_config:
            ov["actor_rollout_ref.rollout.multi_turn.tool_config_path"] = hp.tool_config
    return ov


def _hydra_value(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def build_verl(domain: str, estimator: str, hp: HParams, extra: Sequence[str] = ()) -> Recipe:
    overrides = verl_overrides(domain, estimator, hp)
    argv = (
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        *(f"{k}={_hydra_value(v)}" for k, v in overrides.items()),
        *extra,
    )
    missing: tuple[str, ...] = ()
    if hp.multi_turn and not hp.agent_loop_config:
        missing = (
            (
                "agent_loop_config=PATH: a verl agent-loop config registering 'agentdojo_agent' "
                "(the shipped one is corrgrpo_tasks.agent_security.AGENT_LOOP_CONFIG)"
            ),
        )
    return Recipe(
        domain,
        "verl",
        estimator,
        hp,
        argv,
        {"overrides": overrides, "extra": list(extra)},
        missing=missing,
        checkpoint_dir=overrides["trainer.default_local_dir"],
    )


def trl_config(domain: str, estimator: str, hp: HParams, extra: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON config :mod:`corrgrpo_tasks.recipes.trl_train` reads.

    verl counts prompts, TRL completions: one generation batch is ``train_batch_size * group_size``
    completions and an optimizer step every ``mini_batch_size * group_size`` of them.
    """
    per_step = hp.mini_batch_size * hp.group_size
    per_pass = hp.per_device_batch_size * hp.n_gpus
    if per_step % per_pass:
        raise ValueError(
            f"mini_batch_size * group_size = {per_step} completions is not a multiple of "
            f"per_device_batch_size * n_gpus = {per_pass}"
        )
    args: dict[str, Any] = {
        "output_dir": f"{hp.output_dir}/{_experiment(domain, estimator, hp)}",
        "learning_rate": hp.lr,
        "weight_decay": hp.weight_decay,
        "lr_scheduler_type": "constant",
        "per_device_train_batch_size": hp.per_device_batch_size,
        "gradient_accumulation_steps": per_step // per_pass,
        "generation_batch_size": hp.train_batch_size * hp.group_size,
        "num_generations": hp.group_size,
        "num_iterations": hp.ppo_epochs,
        "max_completion_length": hp.max_response_length,
        "num_train_epochs": hp.epochs,
        "max_steps": hp.max_steps if hp.max_steps is not None else -1,
        "beta": hp.kl_coef if hp.use_kl_loss else 0.0,
        "epsilon": hp.clip_ratio_low,
        "epsilon_high": hp.clip_ratio_high,
        "loss_type": "dapo",
        "temperature": hp.temperature,
        "top_p": hp.top_p,
        "reward_weights": list(hp.weights()),
        "use_vllm": hp.use_vllm,
        "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": hp.gpu_memory_utilization,
        "bf16": hp.bf16,
        "gradient_checkpointing": hp.gradient_checkpointing,
        "logging_steps": 1,
        "save_steps": hp.save_freq,
        "eval_strategy": "steps" if hp.val_files and hp.test_freq > 0 else "no",
        "eval_steps": hp.test_freq if hp.test_freq > 0 else None,
        "report_to": "none" if hp.logger == "console" else hp.logger,
        "seed": hp.seed,
        "run_name": _experiment(domain, estimator, hp),
    }
    if hp.multi_turn:
        # verl's max_assistant_turns=N allows N generations; TRL's iterations count the tool rounds
        # between them, so N - 1 gives the same bound.
        args["max_tool_calling_iterations"] = max(hp.max_turns - 1, 0)
    for item in extra:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"TRL setting {item!r} is not field=value")
        args[key] = json.loads(value) if _is_json(value) else value
    return {
        "domain": domain,
        "estimator": estimator,
        "model": hp.model,
        "train_files": hp.train_files,
        "val_files": hp.val_files,
        "reward_keys": list(hp.reward_keys),
        "reward_kwargs": {
            **dict(hp.reward_kwargs),
            **({"profile": hp.profile} if hp.profile != "paper" else {}),
        },
        "grpo_config": args,
        **(
            {
                "environment": {
                    "max_tool_response_length": hp.max_tool_response_length,
                    "max_turns": hp.max_turns,
                    "max_completion_tokens": hp.max_response_length,
                },
                "max_parallel_calls": hp.max_parallel_calls,
            }
            if hp.multi_turn
            else {}
        ),
    }


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def build_trl(domain: str, estimator: str, hp: HParams, extra: Sequence[str] = ()) -> Recipe:
    config = trl_config(domain, estimator, hp, extra)
    argv = (sys.executable, "-m", "corrgrpo_tasks.recipes.trl_train", "--config", json.dumps(config))
    notes = ("multi-GPU: launch the same module with accelerate launch / torchrun",) if hp.n_gpus > 1 else ()
    return Recipe(
        domain,
        "trl",
        estimator,
        hp,
        argv,
        config,
        notes=notes,
        checkpoint_dir=config["grpo_config"]["output_dir"],
    )


def openrlhf_args(domain: str, estimator: str, hp: HParams) -> list[str]:
    """Flags for our OpenRLHF launcher (OpenRLHF's own flags plus the estimator's)."""
    spec = get_domain(domain)
    agent = spec.agent_loop(OPENRLHF)
    rollout = (
        ["--train.agent_func_path", str(agent)]
        if agent is not None
        else ["--reward.remote_url", str(spec.reward(OPENRLHF))]
    )
    input_key, label_key = spec.openrlhf_data_keys
    flags: list[str] = [
        "--actor.model_name_or_path",
        hp.model,
        *rollout,
        "--data.prompt_dataset",
        hp.train_files,
        "--data.input_key",
        input_key,
        "--data.label_key",
        label_key,
        "--data.apply_chat_template",
        "--data.max_len",
        str(hp.max_prompt_length + hp.max_response_length),
        "--rollout.max_new_tokens",
        str(hp.max_response_length),
        "--rollout.batch_size",
        str(hp.train_batch_size),
        "--rollout.n_samples_per_prompt",
        str(hp.group_size),
        "--rollout.temperature",
        str(hp.temperature),
        "--rollout.top_p",
        str(hp.top_p),
        "--train.batch_size",
        str(hp.mini_batch_size * hp.group_size),
        "--train.micro_batch_size",
        "1",
        "--rollout.micro_batch_size",
        "4",
        "--train.max_epochs",
        str(hp.ppo_epochs),
        "--train.num_episodes",
        str(hp.epochs),
        "--train.seed",
        str(hp.seed),
        "--actor.adam.lr",
        str(hp.lr),
        "--actor.adam.weight_decay",
        str(hp.weight_decay),
        "--actor.lr_scheduler",
        "constant",
        "--actor.eps_clip_low_high",
        str(hp.clip_ratio_low),
        str(hp.clip_ratio_high),
        "--actor.gradient_checkpointing_enable",
        "--algo.kl.init_coef",
        str(hp.kl_coef if hp.use_kl_loss else 0.0),
        "--algo.kl.estimator",
        "k3",
        "--actor.num_nodes",
        str(hp.nnodes),
        "--actor.num_gpus_per_node",
        str(hp.n_gpus),
        "--ref.num_nodes",
        str(hp.nnodes),
        "--ref.num_gpus_per_node",
        str(hp.n_gpus),
        "--vllm.num_engines",
        str(max(1, hp.n_gpus * hp.nnodes // hp.tensor_parallel)),
        "--vllm.tensor_parallel_size",
        str(hp.tensor_parallel),
        "--vllm.gpu_memory_utilization",
        str(hp.gpu_memory_utilization),
        "--vllm.enable_sleep",
        "--ds.enable_sleep",
        "--train.colocate_all",
        "--ds.zero_stage",
        "3",
        "--ds.param_dtype",
        "bf16",
        "--ckpt.path",
        f"{hp.output_dir}/{_experiment(domain, estimator, hp)}",
        "--ckpt.save_steps",
        str(hp.save_freq),
        "--logger.logging_steps",
        "1",
        OPENRLHF_OUR_FLAGS["estimator"],
        estimator,
        OPENRLHF_OUR_FLAGS["reward_keys"],
        *hp.reward_keys,
        OPENRLHF_OUR_FLAGS["reward_weights"],
        *(str(w) for w in hp.weights()),
    ]
    if hp.use_kl_loss:
        flags.append("--algo.kl.use_loss")
    if hp.entropy_coeff:
        flags += ["--actor.entropy_coef", str(hp.entropy_coeff)]
    if hp.val_files:
        flags += ["--eval.dataset", hp.val_files, "--eval.steps", str(hp.test_freq)]
    return flags


def build_openrlhf(domain: str, estimator: str, hp: HParams, extra: Sequence[str] = ()) -> Recipe:
    flags = openrlhf_args(domain, estimator, hp)
    argv = (sys.executable, "-m", "corrgrpo_adapters.openrlhf", *flags, *extra)
    input_key, label_key = get_domain(domain).openrlhf_data_keys
    env = (
        {
            "CORRGRPO_AGENT_MAX_TURNS": str(hp.max_turns),
            "CORRGRPO_AGENT_MAX_TOOL_RESPONSE": str(hp.max_tool_response_length),
            "CORRGRPO_AGENT_MAX_RESPONSE": str(hp.max_response_length),
            "CORRGRPO_AGENT_MAX_PARALLEL_CALLS": str(hp.max_parallel_calls),
        }
        if hp.multi_turn
        else {}
    )
    if hp.profile != "paper":
        env["CORRGRPO_AGENT_PROFILE" if hp.multi_turn else "CORRGRPO_REWARD_PROFILE"] = hp.profile
    notes: tuple[str, ...] = (
        f"the data files need the columns {input_key!r} (chat messages) and {label_key!r}",
    )
    return Recipe(
        domain,
        OPENRLHF,
        estimator,
        hp,
        argv,
        {"flags": flags, "extra": list(extra)},
        env=env,
        notes=notes,
        checkpoint_dir=f"{hp.output_dir}/{_experiment(domain, estimator, hp)}",
    )
