"""GPU smoke runs for the three domains: ``python -m corrgrpo_tasks.gpu_smoke [DOMAIN ...]``.

Each run takes a few steps with a tiny random model built from a config (no download) and finishes in
well under a minute on one GPU; see :mod:`corrgrpo_tasks.gpu_smoke._run` for what each domain runs.
"""

from corrgrpo_tasks.gpu_smoke._run import agent_security_pieces, run, smoke_trl
from corrgrpo_tasks.gpu_smoke._tiny import piece_only_generation, write_chat_checkpoint, write_tiny_checkpoint

__all__ = [
    "agent_security_pieces",
    "piece_only_generation",
    "run",
    "smoke_trl",
    "write_chat_checkpoint",
    "write_tiny_checkpoint",
]
