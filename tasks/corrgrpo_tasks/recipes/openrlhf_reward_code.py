"""OpenRLHF reward file for code (loaded by path through ``--reward.remote_url``): the code task's own."""

from corrgrpo_tasks.code import openrlhf_reward_func as reward_func

__all__ = ["reward_func"]
