"""OpenRLHF reward file for code (loaded by path through ``--reward.remote_url``)."""

from corrgrpo_tasks.code import COMPONENTS, compute_score
from corrgrpo_tasks.recipes._openrlhf_reward import make_reward_func

reward_func = make_reward_func(compute_score, "leetcodedataset", COMPONENTS)
