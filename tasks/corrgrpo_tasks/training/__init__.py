"""Train a small language model with GRPO-family estimators on a CPU: the engine of ``corrgrpo train``.

Warm start with TRL's ``SFTTrainer`` on synthetic task data (cached), then TRL's ``GRPOTrainer``
through ``corrgrpo_adapters.trl.CorrGRPOTrainer`` with the task's real multi-component reward, per
estimator and seed, evaluated greedily on held-out prompts. See ``docs/experiments.md``.
"""

from ._report import interval, load_csv, summarise, write_outputs
from ._run import (
    RunRecords,
    TrainConfig,
    evaluate_policy,
    load_records,
    merge_records,
    run_training,
    task_defaults,
    write_csv,
    write_run_file,
)
from ._tasks import TASKS, Task, get_task

__all__ = [
    "TASKS",
    "RunRecords",
    "Task",
    "TrainConfig",
    "evaluate_policy",
    "get_task",
    "interval",
    "load_csv",
    "load_records",
    "merge_records",
    "run_training",
    "summarise",
    "task_defaults",
    "write_csv",
    "write_outputs",
    "write_run_file",
]
