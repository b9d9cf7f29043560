"""From training to the paper's table in one command: ``corrgrpo pipeline DOMAIN --framework verl|trl``.

The steps (:func:`plan` lists them; ``--dry-run`` prints them):

1. **train**: the domain's launch recipe (:func:`corrgrpo_tasks.recipes.build_recipe`, the paper's
   hyperparameters, ``name=value`` overrides and framework arguments after ``--``), run as its own
   process;
2. **convert** (verl only): verl saves FSDP shards per rank under
   ``trainer.default_local_dir/global_step_N/actor``; verl's own merger
   (``python -m verl.model_merger merge --backend fsdp``) turns the latest into a Hugging Face folder.
   TRL saves a Hugging Face folder itself (``trainer.save_model()`` into its ``output_dir``);
3. **evaluate**: ``corrgrpo evaluate`` on every benchmark of the domain given ``--data NAME=PATH``
   (each a resumable run folder);
4. **table**: one ``results.md`` with every benchmark's headline metrics beside the paper's numbers.

Rerunning the same command resumes: a step that finished (its marker under ``OUT/steps``) is skipped,
and each evaluation resumes its own run folder.
"""

from corrgrpo_tasks.pipeline._steps import (
    FRAMEWORKS,
    Pipeline,
    Step,
    latest_verl_actor,
    plan,
    render_table,
    run_pipeline,
)

__all__ = [
    "FRAMEWORKS",
    "Pipeline",
    "Step",
    "latest_verl_actor",
    "plan",
    "render_table",
    "run_pipeline",
]
