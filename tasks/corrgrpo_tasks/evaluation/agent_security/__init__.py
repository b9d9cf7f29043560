"""The agent-security benchmarks, one home for the three families the paper evaluates on
(the reward side, used in training, is :mod:`corrgrpo_tasks.agent_security`).

- AgentDojo (:mod:`._agentdojo`): held-out cases through AgentDojo's own pipeline and checkers;
  :func:`run_agentdojo`, :func:`agentdojo_metrics`.
- ASB (:mod:`.asb`): Agent Security Bench with observation prompt injection; :func:`run_asb`,
  :func:`asb_metrics`.
- InjecAgent (:mod:`.injecagent`): indirect prompt injection through tool responses;
  :func:`run_injecagent`, :func:`injecagent_metrics`.

Each runner takes cases and a ``generate`` callable and resumes through :class:`corrgrpo_tasks._batching.Resume`;
``corrgrpo evaluate agent_security --benchmark NAME`` (:mod:`corrgrpo_tasks.evaluation`) drives them.
"""

from ._agentdojo import agentdojo_metrics, read_agentdojo_cases, run_agentdojo
from .asb import asb_metrics, load_asb, run_asb
from .injecagent import injecagent_metrics, load_injecagent, run_injecagent

__all__ = [
    "agentdojo_metrics",
    "asb_metrics",
    "injecagent_metrics",
    "load_asb",
    "load_injecagent",
    "read_agentdojo_cases",
    "run_agentdojo",
    "run_asb",
    "run_injecagent",
]
