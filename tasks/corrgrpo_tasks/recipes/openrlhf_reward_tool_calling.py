"""OpenRLHF reward file for tool calling (loaded by path through ``--reward.remote_url``)."""

from corrgrpo_tasks.recipes._openrlhf_reward import make_reward_func
from corrgrpo_tasks.tool_calling import COMPONENTS, compute_score

reward_func = make_reward_func(compute_score, "rlla", COMPONENTS)
