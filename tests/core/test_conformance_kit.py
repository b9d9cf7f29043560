"""The conformance kit accepts a naive correct reimplementation and rejects the usual mistakes."""

import numpy as np
import pytest

from corrgrpo_core.testing import check_advantage_estimator


def naive_corrgrpo(scores, group_ids, *, eps=1e-6, inside=True, mask=True):
    """CorrGRPO written from the paper, one group at a time."""
    out = np.zeros(len(scores))
    for g in np.unique(group_ids):
        rows = group_ids == g
        x = scores[rows]
        if len(x) < 2:
            continue
        c = x - x.mean(axis=0)
        sd = np.sqrt((c**2).sum(axis=0))
        with np.errstate(all="ignore"):  # the unmasked variant divides by zero on purpose
            inv = np.where(sd > 1e-12 * np.abs(x).max(axis=0), 1 / sd, 0.0) if mask else 1 / sd
            s = max(float(((c.T @ c) * np.outer(inv, inv)).sum()), 0.0)
            out[rows] = c.sum(axis=1) / (np.sqrt(s + eps) if inside else np.sqrt(s) + eps)
    return out


def test_a_naive_reimplementation_passes():
    check_advantage_estimator(naive_corrgrpo, max_examples=60)


@pytest.mark.parametrize(
    ("wrong", "reason"),
    [
        (lambda s, g: naive_corrgrpo(s, g, inside=False), "differs from the reference loop"),
        # an exactly constant column gives NaN; a constant that centres to 1e-17 noise gives wrong numbers
        (
            lambda s, g: naive_corrgrpo(s, g, mask=False),
            "non-finite advantages|differs from the reference loop",
        ),
    ],
    ids=["eps-outside-the-root", "zero-variance-not-masked"],
)
def test_common_mistakes_are_caught(wrong, reason):
    with pytest.raises(AssertionError, match=reason):
        check_advantage_estimator(wrong, max_examples=200)
