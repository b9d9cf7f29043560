"""The code that runs inside OpenRLHF's Ray workers: the setup hook and the two patched methods.

OpenRLHF computes advantages in ``RemoteExperienceMaker.compute_advantages_and_returns``, inside the
``PPOTrainer`` Ray actor, and the policy loss in ``PolicyLoss.forward`` inside the ``PolicyModelActor``
workers. A patch made in the driver never reaches them, so the launcher names :func:`setup` as Ray's
``worker_process_setup_hook``: every worker runs it at start-up, before it unpickles any actor.

The patched advantage method takes OpenRLHF's steps for ``group_norm`` (float32 promotion, its length
penalties, the ``group_reward_std`` log, KL shaping with ``compute_reward``, ``get_cumulative_returns``)
and replaces only the group baseline: one core call over the components of the whole batch. It calls
OpenRLHF's functions rather than the original method so that the per-token returns loop, the costly
part, runs once.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from .. import RANGES, logged_summary, warn_outside_range
from .config import AdapterConfig

__all__ = [
    "OpenRLHFLayoutError",
    "check_openrlhf",
    "is_patched",
    "patch_openrlhf",
    "setup",
    "unpatch_openrlhf",
]

#: The OpenRLHF releases whose code this module patches; CI tests both ends (corrgrpo_adapters.RANGES).
SUPPORTED_OPENRLHF = RANGES["openrlhf"].requirement
#: OpenRLHF's estimator whose plumbing (group layout, cumulative returns, no batch whitening) we reuse.
HOST_ESTIMATOR = "group_norm"
_ORIGINAL = "__corrgrpo_original__"


class OpenRLHFLayoutError(RuntimeError):
    """The installed OpenRLHF lacks a class, method or argument this adapter patches."""


def _layout_error(what: str) -> OpenRLHFLayoutError:
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("openrlhf")
    except PackageNotFoundError:
        installed = "not installed"
    return OpenRLHFLayoutError(
        f"{what}. corrgrpo's OpenRLHF adapter patches the code layout of "
        f"{RANGES['openrlhf'].describe()}; the installed openrlhf is {installed}. Install "
        f"'{SUPPORTED_OPENRLHF}' (pip install 'corrgrpo-core[openrlhf]')."
    )


def _require(module: str, qualname: str, params: Sequence[str]) -> Any:
    """Import ``module.qualname`` and check that its signature has ``params`` (in this order)."""
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise _layout_error(f"cannot import {module} ({exc})") from exc
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise _layout_error(f"{module}.{qualname} does not exist")
        obj = getattr(obj, part)
    # A patched method keeps the signature of the original (functools.wraps), so this also holds after.
    got = list(inspect.signature(obj).parameters)
    if got[: len(params)] != list(params):
        raise _layout_error(
            f"{module}.{qualname} takes ({', '.join(got)}), expected ({', '.join(params)}, ...)"
        )
    return obj


_EXPERIENCE_MAKER = "openrlhf.trainer.ppo_utils.experience_maker"
_LOSS = "openrlhf.models.loss"
_POLICY_LOSS_PARAMS = (
    "self",
    "log_probs",
    "old_log_probs",
    "advantages",
    "action_mask",
    "rollout_log_probs",
    "dp_size",
    "batch_num_tokens",
    "global_batch_size",
)

#: OpenRLHF's train/rollout importance-sampling correction, which CISPO does not combine with, under
#: each of its APIs: (``PolicyLoss`` argument and attribute, its value when off, the CLI option that
#: sets it). OpenRLHF 0.11.2 has the first; 0.10.3 to 0.11.1 have the second. Detected, never inferred
#: from the version.
_IS_CORRECTION: tuple[tuple[str, object, str], ...] = (
    ("is_correction_level", "off", "--algo.advantage.is_correction_level"),
    ("enable_vllm_is_correction", False, "--algo.advantage.is_correction_enable"),
)


def _is_correction(loss: Any) -> tuple[str, bool]:
    """The CLI option of ``loss``'s (a ``PolicyLoss``) importance-sampling correction under whichever
    of OpenRLHF's APIs ``loss`` has, and whether it is on."""
    for attr, off, option in _IS_CORRECTION:
        if hasattr(loss, attr):
            return option, getattr(loss, attr) != off
    raise _layout_error(
        f"{_LOSS}.PolicyLoss has none of the attributes {', '.join(a for a, _, _ in _IS_CORRECTION)}"
    )


def check_openrlhf(config: AdapterConfig | None = None) -> None:
    """Raise :class:`OpenRLHFLayoutError` unless OpenRLHF has every piece the patch relies on; warn when
    it has them but its version is outside the supported range."""
    _require(
        _EXPERIENCE_MAKER, "RemoteExperienceMaker.compute_advantages_and_returns", ("self", "experiences")
    )
    _require(
        _EXPERIENCE_MAKER,
        "RemoteExperienceMaker.get_cumulative_returns",
        ("self", "rewards", "action_mask", "gamma"),
    )
    _require(_EXPERIENCE_MAKER, "compute_reward", ("r", "kl_coef", "kl", "action_mask", "reward_clip_range"))
    _require(_EXPERIENCE_MAKER, "apply_length_penalties", ("experiences", "args"))
    if config is not None and config.policy_loss == "cispo":
        _require(_LOSS, "PolicyLoss.forward", _POLICY_LOSS_PARAMS)
        _require(
            _LOSS,
            "aggregate_loss",
            ("loss", "loss_mask", "token_level_loss", "dp_size", "batch_num_tokens", "global_batch_size"),
        )
        init = inspect.signature(_require(_LOSS, "PolicyLoss.__init__", ("self",))).parameters
        if not any(attr in init for attr, _, _ in _IS_CORRECTION):
            raise _layout_error(
                f"{_LOSS}.PolicyLoss takes none of {', '.join(a for a, _, _ in _IS_CORRECTION)} (its "
                "importance-sampling correction switch, which CISPO must see off)"
            )
    warn_outside_range("openrlhf")


# ---------------------------------------------------------------------------------------------------
# advantages


def _components(experiences: Sequence[Any], keys: Sequence[str]) -> Any:
    """Stack ``info[key]`` of every experience into an (N, K) float tensor, rows in batch order."""
    import torch

    columns = []
    for key in keys:
        parts = []
        for experience in experiences:
            if key not in experience.info:
                raise KeyError(
                    f"reward component {key!r} is not in Experience.info (it has {sorted(experience.info)}); "
                    "return it from the reward function under 'extra_logs' (OpenRLHF leaves 'extra_logs' empty "
                    "when the reward function raised: see its log)"
                )
            value = torch.as_tensor(experience.info[key]).reshape(-1)
            if value.numel() != len(experience.index):
                raise ValueError(
                    f"Experience.info[{key!r}] has {value.numel()} values for {len(experience.index)} samples"
                )
            parts.append(value)
        columns.append(torch.cat(parts))
    stacked = torch.stack(columns, dim=-1)
    # Same promotion OpenRLHF applies to rewards: group statistics in at least float32.
    return stacked.to(torch.promote_types(stacked.dtype, torch.float32))


def _sample_index(experiences: Sequence[Any]) -> Any:
    """OpenRLHF's ``Experience.index`` of every sample: its position in prompt order (n per prompt)."""
    import torch

    return torch.tensor(list(itertools.chain.from_iterable(e.index for e in experiences)))


def _log_stats(config: AdapterConfig, experiences: Sequence[Any], scores: Any, group_ids: Any) -> None:
    """Put the core's diagnostics into ``info`` as per-sample constants, which OpenRLHF mean-logs."""
    import torch

    import corrgrpo_core as cc

    stats = cc.advantage_stats(scores, group_ids, **_stats_kwargs(config))
    for name, value in logged_summary(stats, config.reward_keys).items():
        for experience in experiences:
            experience.info[name] = torch.full((len(experience.index),), value)


def _stats_kwargs(config: AdapterConfig) -> dict[str, Any]:
    """The estimator's options that mean the same to ``advantage_stats``: the core's registry decides
    (``EstimatorSpec.diagnostic_kwargs``), the same for every adapter."""
    import corrgrpo_core as cc

    kwargs = cc.get_estimator(config.estimator).diagnostic_kwargs(config.options)
    if config.weights is not None:
        kwargs["weights"] = list(config.weights)
    return kwargs


def _group_reward_std(experiences: Sequence[Any], index: Any, n_samples_per_prompt: int) -> Any:
    """OpenRLHF's ``group_reward_std`` log: the std of the scalar reward over each sample's group."""
    import torch

    rewards = torch.cat([experience.rewards for experience in experiences])
    in_prompt_order = torch.empty_like(rewards)
    in_prompt_order[index] = rewards
    group_std = in_prompt_order.reshape(-1, n_samples_per_prompt).std(-1)
    return group_std.repeat_interleave(n_samples_per_prompt)[index]


def _make_advantage_method(original: Callable[..., Any], config: AdapterConfig) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_advantages_and_returns(self: Any, experiences: list[Any]) -> list[Any]:
        # OpenRLHF's own steps for group_norm, with the group baseline replaced by one core call.
        import torch
        from openrlhf.trainer.ppo_utils.experience_maker import apply_length_penalties, compute_reward

        import corrgrpo_core as cc

        if self.advantage_estimator != HOST_ESTIMATOR:
            raise RuntimeError(
                f"the corrgrpo patch expects OpenRLHF's estimator {HOST_ESTIMATOR!r} (the launcher sets it), "
                f"got {self.advantage_estimator!r}"
            )
        args = self.strategy.args
        for experience in experiences:
            experience.rewards = experience.rewards.to(
                torch.promote_types(experience.rewards.dtype, torch.float32)
            )
        apply_length_penalties(experiences, args)  # also refreshes info["reward"]

        n_samples = args.rollout.n_samples_per_prompt
        index = _sample_index(experiences)
        group_ids = torch.div(index, n_samples, rounding_mode="floor")
        scores = _components(experiences, config.reward_keys)
        advantages = cc.compute_advantages(scores, group_ids, **config.core_kwargs())
        if config.log_stats:
            _log_stats(config, experiences, scores, group_ids)

        sizes = [len(experience.index) for experience in experiences]
        stds = _group_reward_std(experiences, index, n_samples).split(sizes)
        for experience, advantage, std in zip(experiences, advantages.split(sizes), stds, strict=True):
            experience.info["group_reward_std"] = std
            reward = compute_reward(
                advantage,
                self.kl_ctl.value,
                experience.kl,
                action_mask=experience.action_mask,
                reward_clip_range=args.reward.clip_range,
            )
            # Undiscounted, as OpenRLHF forces gamma = 1 for its group estimators.
            experience.returns = self.get_cumulative_returns(reward, experience.action_mask, 1.0)
            experience.advantages = experience.returns.clone()
            experience.info["return"] = reward.sum(dim=-1)
            experience.kl = None
        return experiences

    setattr(compute_advantages_and_returns, _ORIGINAL, original)
    return compute_advantages_and_returns


# ---------------------------------------------------------------------------------------------------
# policy loss


def _loss_outputs(policy_loss: Any, original: Callable[..., Any]) -> int:
    """How many values OpenRLHF's own ``PolicyLoss.forward`` returns (its actor unpacks exactly
    that many: 4 up to 0.11.1, 5 from 0.11.2 on), found by running it once on a 1-token batch."""
    import torch

    one = torch.zeros(1, 1)
    try:
        outputs = original(policy_loss(), one, one, one, action_mask=torch.ones(1, 1, dtype=torch.bool))
    except TypeError as exc:  # its constructor or forward now needs more than this
        raise _layout_error(
            f"{_LOSS}.PolicyLoss()(log_probs, old, advantages, action_mask) fails ({exc})"
        ) from exc
    if not isinstance(outputs, tuple) or len(outputs) < 3:
        raise _layout_error(
            f"{_LOSS}.PolicyLoss.forward returns {type(outputs).__name__}, not (loss, clip_ratio, ppo_kl, ...)"
        )
    return len(outputs)


def _make_cispo_forward(original: Callable[..., Any], outputs: int) -> Callable[..., Any]:
    """CISPO in place of ``original`` (``PolicyLoss.forward``), returning as many values as it does:
    loss, clip ratio and KL, then None for OpenRLHF's IS-correction metrics (the correction is off)."""

    @functools.wraps(original)
    def forward(
        self: Any,
        log_probs: Any,
        old_log_probs: Any,
        advantages: Any,
        action_mask: Any = None,
        rollout_log_probs: Any = None,
        dp_size: int = 1,
        batch_num_tokens: float | None = None,
        global_batch_size: float | None = None,
    ) -> tuple[Any, ...]:
        from openrlhf.models.loss import aggregate_loss

        from .objective import cispo_terms

        correction, corrected = _is_correction(self)
        if self.policy_loss_type != "ppo" or self.dual_clip is not None or corrected:
            raise ValueError(
                "CISPO replaces OpenRLHF's PPO loss; it does not combine with --actor.policy_loss_type gspo, "
                f"--actor.dual_clip or {correction}"
            )
        terms = cispo_terms(
            log_probs,
            old_log_probs,
            advantages,
            action_mask,
            eps_low=self.clip_eps_low,
            eps_high=self.clip_eps_high,
        )
        loss = aggregate_loss(
            terms.token_loss,
            action_mask,
            token_level_loss=self.token_level_loss,
            dp_size=dp_size,
            batch_num_tokens=batch_num_tokens,
            global_batch_size=global_batch_size,
        )
        return (loss, terms.clip_fraction, terms.approx_kl, *([None] * (outputs - 3)))

    setattr(forward, _ORIGINAL, original)
    return forward


# ---------------------------------------------------------------------------------------------------
# patching


def _replace(owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    current = getattr(owner, name)
    original = getattr(current, _ORIGINAL, current)
    setattr(owner, name, make(original))


def _restore(owner: Any, name: str) -> None:
    current = getattr(owner, name)
    original = getattr(current, _ORIGINAL, None)
    if original is not None:
        setattr(owner, name, original)


def patch_openrlhf(config: AdapterConfig) -> None:
    """Install ``config``'s advantage (and, for ``policy_loss="cispo"``, its loss) into OpenRLHF.

    Idempotent: patching again replaces the previous configuration instead of stacking wrappers.
    """
    check_openrlhf(config)
    from openrlhf.models.loss import PolicyLoss
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker

    _replace(
        RemoteExperienceMaker,
        "compute_advantages_and_returns",
        lambda original: _make_advantage_method(original, config),
    )
    if config.policy_loss == "cispo":
        _replace(
            PolicyLoss,
            "forward",
            lambda original: _make_cispo_forward(original, _loss_outputs(PolicyLoss, original)),
        )
    else:
        _restore(PolicyLoss, "forward")


def unpatch_openrlhf() -> None:
    """Give OpenRLHF its own methods back."""
    from openrlhf.models.loss import PolicyLoss
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker

    _restore(RemoteExperienceMaker, "compute_advantages_and_returns")
    _restore(PolicyLoss, "forward")


def is_patched() -> dict[str, bool]:
    """Which OpenRLHF methods currently run this adapter's code (for checks inside workers)."""
    from openrlhf.models.loss import PolicyLoss
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker

    return {
        "compute_advantages_and_returns": hasattr(
            RemoteExperienceMaker.compute_advantages_and_returns, _ORIGINAL
        ),
        "policy_loss": hasattr(PolicyLoss.forward, _ORIGINAL),
    }


def _call_hook(name: str) -> None:
    module, _, attr = name.rpartition(".")
    if not module:
        raise ValueError(f"setup hook {name!r} is not of the form 'package.module.function'")
    getattr(importlib.import_module(module), attr)()


def setup() -> None:
    """Ray ``worker_process_setup_hook``: run the user's hook, then patch OpenRLHF in this worker."""
    config = AdapterConfig.from_env()
    if config.user_setup_hook:
        _call_hook(config.user_setup_hook)
    patch_openrlhf(config)
