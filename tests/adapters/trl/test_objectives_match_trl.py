"""Our objectives reproduce TRL 1.16's GRPOTrainer losses on the same model and tensors.

A real ``GRPOTrainer`` around a tiny random-weight Qwen2 (built from a config, no Hub access)
computes its loss with its own ``_compute_loss``; we compute ours from the log-probabilities the
same trainer produces, and compare the loss and the gradient of every model parameter.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")
tokenizers = pytest.importorskip("tokenizers")

from corrgrpo_core.objectives import (
    cispo_loss,
    dapo_loss,
    gspo_loss,
    overlong_penalty,
    ppo_clip_loss,
)

# transformers 5.x warns that GRPOConfig's own ``gradient_checkpointing`` field is deprecated
pytestmark = pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning")

B, P, T, MAX_LEN = 6, 3, 5, 5
CHARS = list("abcdefghij0123456789+=")


def _tokenizer() -> Any:
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{c: i + 3 for i, c in enumerate(CHARS)}}
    model = tokenizers.models.BPE(vocab=vocab, merges=[], unk_token="<unk>")
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split("", "isolated")
    tok.decoder = tokenizers.decoders.Fuse()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>", padding_side="left"
    )


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    torch.manual_seed(0)
    config = transformers.Qwen2Config(
        vocab_size=len(CHARS) + 3,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
    )
    path = tmp_path_factory.mktemp("tiny_qwen2")
    transformers.Qwen2ForCausalLM(config).save_pretrained(path)  # reloaded so _name_or_path is set
    _tokenizer().save_pretrained(path)
    return str(path)


def _trainer(model_dir: str, tmp_path: Any, **config: Any) -> Any:
    args = trl.GRPOConfig(
        output_dir=str(tmp_path),
        bf16=False,
        use_cpu=True,
        per_device_train_batch_size=B,
        num_generations=B // 2,
        max_completion_length=MAX_LEN,
        report_to="none",
        save_strategy="no",
        **config,
    )
    model = transformers.Qwen2ForCausalLM.from_pretrained(model_dir)
    return trl.GRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=args,
        train_dataset=datasets.Dataset.from_dict({"prompt": ["1+2="] * 8}),
        processing_class=transformers.AutoTokenizer.from_pretrained(model_dir),
    )


def _inputs(trainer: Any, seed: int, spread: float) -> tuple[dict[str, Any], Any]:
    g = torch.Generator().manual_seed(seed)
    vocab = trainer.model.config.vocab_size
    prompt_ids = torch.randint(3, vocab, (B, P), generator=g)
    completion_ids = torch.randint(3, vocab, (B, T), generator=g)
    lengths = torch.tensor([5, 1, 3, 5, 2, 4])
    completion_mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
    inputs = {
        "prompt_ids": prompt_ids,
        "prompt_mask": torch.ones(B, P, dtype=torch.long),
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": torch.randn(B, generator=g),
        "num_items_in_batch": completion_mask.sum().float(),
    }
    log_prob = _log_prob(trainer, inputs).detach()
    # old policy = current policy moved token by token: ratios on both sides of every clip range
    inputs["old_per_token_logps"] = log_prob + spread * (2 * torch.rand(B, T, generator=g) - 1)
    return inputs, completion_mask


def _log_prob(trainer: Any, inputs: dict[str, Any]) -> Any:
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    return trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, T)[0]


def _grads(trainer: Any, loss: Any) -> list[np.ndarray]:
    trainer.model.zero_grad()
    loss.backward()
    return [p.grad.detach().numpy().copy() for p in trainer.model.parameters() if p.grad is not None]


def _compare(trainer: Any, inputs: dict[str, Any], ours_fn: Any) -> None:
    trainer.model.eval()  # eval mode: TRL's normaliser is not split across accumulation steps
    theirs = trainer._compute_loss(trainer.model, inputs)
    theirs_grads = _grads(trainer, theirs)
    lp = _log_prob(trainer, inputs)
    ours = ours_fn(lp, inputs["old_per_token_logps"], inputs["advantages"], inputs["completion_mask"])
    ours_grads = _grads(trainer, ours.loss)
    assert float(ours.loss.detach()) == pytest.approx(float(theirs.detach()), rel=1e-5, abs=1e-7)
    assert len(ours_grads) == len(theirs_grads) > 0
    for a, b in zip(ours_grads, theirs_grads, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)
    assert any(np.abs(b).max() > 0 for b in theirs_grads)


@pytest.mark.parametrize("cap", [5.0, 1.1])
def test_cispo_absolute_matches_trl(model_dir: str, tmp_path: Any, cap: float) -> None:
    trainer = _trainer(model_dir, tmp_path, loss_type="cispo", epsilon_high=cap)
    inputs, _mask = _inputs(trainer, seed=1, spread=2.0)
    n_tok = inputs["num_items_in_batch"]

    def ours(lp: Any, old: Any, adv: Any, m: Any) -> Any:
        out = cispo_loss(
            lp, old, adv, m, bound="absolute", eps_high=cap, log_ratio_limit=None, num_tokens=n_tok
        )
        if cap == 1.1:
            assert 0 < float(out.metrics["clip_fraction"]) < 1
        return out

    _compare(trainer, inputs, ours)


@pytest.mark.parametrize(
    ("config", "ours_fn", "spread"),
    [
        (  # DAPO: clip-higher, token-mean over the batch's tokens
            {"loss_type": "dapo", "epsilon": 0.2, "epsilon_high": 0.28},
            lambda lp, old, adv, m, n_tok: dapo_loss(lp, old, adv, m, log_ratio_limit=None, num_tokens=n_tok),
            0.6,
        ),
        (  # GSPO: TRL's sequence-level ratio vs our GSPO-token form, same value and gradient
            {
                "loss_type": "grpo",
                "importance_sampling_level": "sequence",
                "epsilon": 0.05,
                "epsilon_high": 0.08,
            },
            lambda lp, old, adv, m, n_tok: gspo_loss(lp, old, adv, m, eps_low=0.05, eps_high=0.08),
            0.3,
        ),
    ],
    ids=["dapo", "gspo"],
)
def test_clipped_objectives_match_trl(
    model_dir: str, tmp_path: Any, config: dict[str, Any], ours_fn: Any, spread: float
) -> None:
    trainer = _trainer(model_dir, tmp_path, **config)
    inputs, _ = _inputs(trainer, seed=2, spread=spread)

    def ours(lp: Any, old: Any, adv: Any, m: Any) -> Any:
        out = ours_fn(lp, old, adv, m, inputs["num_items_in_batch"])
        assert 0 < float(out.metrics["clip_fraction"]) < 1  # both branches exercised
        return out

    _compare(trainer, inputs, ours)


def test_dapo_with_kl_matches_trl(model_dir: str, tmp_path: Any) -> None:
    trainer = _trainer(model_dir, tmp_path, loss_type="dapo", epsilon_high=0.28, beta=0.04)
    inputs, _ = _inputs(trainer, seed=3, spread=0.6)
    inputs["ref_per_token_logps"] = inputs["old_per_token_logps"] - 0.3
    n_tok = inputs["num_items_in_batch"]
    ref = inputs["ref_per_token_logps"]
    _compare(
        trainer,
        inputs,
        lambda lp, old, adv, m: dapo_loss(
            lp,
            old,
            adv,
            m,
            log_ratio_limit=None,
            num_tokens=n_tok,
            ref_log_prob=ref,
            kl_coef=0.04,
            kl_importance_weighted=trainer.args.use_bias_correction_kl,  # TRL: True from 1.10, False before
        ),
    )


def test_dr_grpo_matches_trl(model_dir: str, tmp_path: Any) -> None:
    trainer = _trainer(model_dir, tmp_path, loss_type="dr_grpo")
    inputs, _ = _inputs(trainer, seed=5, spread=0.6)
    _compare(
        trainer,
        inputs,
        lambda lp, old, adv, m: ppo_clip_loss(
            lp,
            old,
            adv,
            m,
            log_ratio_limit=None,
            aggregation="seq-mean-token-sum-norm",
            loss_scale_factor=MAX_LEN,
            num_sequences=B,
        ),
    )


def test_overlong_penalty_matches_trl() -> None:
    from trl.rewards import get_soft_overlong_punishment

    reward = get_soft_overlong_punishment(max_completion_len=20, soft_punish_cache=6)
    lengths = np.arange(0, 30)
    theirs = reward([[1] * int(n) for n in lengths])
    ours = overlong_penalty(lengths, max_length=20, cache_length=6)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)
