"""The paper's Figure 2: one group, three rewards, GRPO versus CorrGRPO.

Run: ``python examples/figure2.py``. Needs only ``pip install corrgrpo-core``.
"""

import numpy as np

import corrgrpo_core as cc

# 4 rollouts x 3 rewards: two small, strongly correlated rewards and one large-scale reward
scores = np.array([[0.10, 0.18, 0.80], [0.18, 0.10, 7.28], [0.82, 0.90, 8.00], [0.90, 0.82, 1.52]])

stats = cc.advantage_stats(scores)
print("covariance sum (GRPO's variance)  :", round(float(stats.covariance_sum[0]), 4))
print("share of reward 3 in that sum     :", f"{float(stats.variance_share[0, 2]):.1%}")
print("correlation sum (CorrGRPO's)      :", round(float(stats.correlation_sum[0]), 4))
print("c_q = A_corr / A_grpo             :", round(float(stats.c_q[0]), 3))
for name in ("grpo", "corrgrpo", "gdpo"):
    print(f"{name:>9} advantages:", np.round(cc.compute_advantages(scores, estimator=name), 4))
