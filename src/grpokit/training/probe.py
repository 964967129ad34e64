"""The held-out probe: a few dozen of the recipe's held-out rows answered greedily at step 0 and at every
checkpoint, scored by the task's own verifier, so the health monitor sees a model get worse while it trains.

    health: {probe_rows: 48}      # the default; 0 turns it off

Why: the training rewards are measured on the prompts each step draws, and prompt selection draws them by
estimated pass rate, so a falling training correctness may be harder prompts and a steady one may hide a model
unlearning the rest. An SFT model trained on with GRPO at lr 2e-5 fell from 60% to 31% held-out accuracy in 10
steps and no detector spoke. The probe's rows, decoding and verifier are fixed: the first
`health.probe_rows` rows of the recipe's held-out set (what `grpokit eval RUN --max-rows N` evaluates), greedy
through grpokit.generation.complete (grpokit's decoding loop) with the recipe's max_completion_length, scored by
the task's rewards (grpokit.task: the one verifier of training and evaluation), its primary metric averaged as
eval's `accuracy` is (accuracy for math, field accuracy for JSON, ...).

When: at step 0 (the model training starts from; after --init-from, what the warm start already knows) and at
every checkpoint save (every `train.save_steps` and the last step), after that step's update and before its
save, so it measures exactly the weights checkpoint-N holds. Why the save steps: the finding's default action is a
rollback to the best probe step, which needs that step's weights; a probe between saves would point at weights
no longer anywhere. The best step's checkpoint is kept from rotation (transformers' `best_model_checkpoint`, which
`save_total_limit` never deletes); with `save_total_limit: 1` it is not set (transformers would then delete every
other checkpoint, the last one included, when training ends), and a rollback restores the newest complete
checkpoint at or before the best step, or the initial model.

What it writes: `probe/accuracy`, `probe/rows` (rows the metric applies to) and `probe/seconds` in metrics.jsonl at
those steps (step 0 gets a line of its own, only once per run: a rollback to the initial model or a resume keeps
it), and one line each on the terminal. grpokit.health's `probe_drop` judges them; the generation runs with the
training random state set aside, so a run samples the same completions with or without the probe.

Not covered (the run's first lines say so): tool tasks (their episodes are TRL's multi-turn rollout, which
`grpokit eval` plays), tasks without a correctness reward (a preference task: nothing to score the rows by),
weights sharded across processes (FSDP, ZeRO-3: generation would need every rank), a recipe without held-out rows.
"""
from __future__ import annotations

import time

import torch
from transformers import TrainerCallback

from grpokit import generation_internals, hf_internals, internals
from grpokit.distributed import broadcast, is_main_process
from grpokit.generation import SamplingParams, complete
from grpokit.generation.backends import BACKENDS
from grpokit.run import PROBE_ACCURACY, PROBE_ROWS, PROBE_SECONDS, RunDir


class HeldOutProbe(TrainerCallback):
    """Measures the probe at step 0 (logged at once) and at each scheduled checkpoint save (logged with that step:
    `take()` hands the figures to the trainer's log call, which this callback asks for)."""

    def __init__(self, task, rows: list[dict], tokenizer, run: RunDir, backend_options: dict):
        self.task, self.rows, self.tokenizer, self.run = task, rows, tokenizer, run
        self.ids = [task.template.encode(tokenizer, task.template.build(r["question"])) for r in rows]
        self.backend_options = backend_options
        self.trainer = None  # set by `attach`: the probe logs through the trainer and generates with its model
        self.pending: dict = {}

    @classmethod
    def of(cls, recipe, task, eval_rows: list[dict], tokenizer, run: RunDir) -> tuple["HeldOutProbe | None", str]:
        """The run's probe (None when off or not possible here) and the line the run's first lines print."""
        n = recipe.health.probe_rows
        why = ("health.probe_rows: 0" if n == 0 else
               "health.enabled: false" if not recipe.health.enabled else
               "a tool task (its episodes are TRL's rollout; `grpokit eval` plays them)" if recipe.env is not None else
               "no reward with the correctness role to score the rows by" if task.correctness is None else
               "no held-out rows (data.eval or data.eval_fraction)" if not eval_rows else None)
        if why:
            return None, f"health probe off: {why}"
        rows = eval_rows[:n]
        options = BACKENDS["hf"].options(recipe.generation, recipe.train)  # the recipe's own hf settings
        saves = f"every checkpoint (train.save_steps={recipe.train.save_steps}) and the last step"
        return cls(task, rows, tokenizer, run, options), (
            f"health probe: the first {len(rows)} held-out rows, greedy, {task.primary_metric} by "
            f"{task.correctness.name}, at step 0 and {saves}; a fall beyond its noise is probe_drop "
            f"(action {getattr(recipe.health.actions, 'probe_drop')})")

    def attach(self, trainer, log) -> "HeldOutProbe | None":
        """Bind the probe to the trainer it measures; None (said through `log`) when its weights are sharded."""
        if hf_internals.reference_is_sharded(trainer):
            log("health probe off: the weights are sharded across processes (FSDP, ZeRO-3)")
            trainer.remove_callback(self)
            return None
        self.trainer = trainer
        return self

    # ---------------------------------------------------------------- measuring
    def measure(self) -> dict:
        """Greedy completions of the probe's rows by the trainer's model, scored as `grpokit eval` scores them."""
        trainer = self.trainer
        model = trainer.model
        t0 = time.monotonic()
        devices = [d for d in {p.device for p in model.parameters()} if d.type == "cuda"]
        # The training random stream set aside (greedy draws nothing, but the same samples with and without the
        # probe should not rest on that), and the policy generating as itself, not through the training sampler.
        with torch.random.fork_rng(devices=devices), generation_internals.generating_as_itself(trainer):
            done = complete(model, self.tokenizer, self.ids, SamplingParams(max_tokens=self.task.generation.max_new_tokens),
                            backend="hf", backend_options=self.backend_options, batch_size=None, label="health probe",
                            progress=False)
        texts = [g[0].text for g in done]
        scores, _ = self.task.score(texts, self.rows)
        values = [v for v in self.task.metric_values(scores)[self.task.primary_metric] if v is not None]
        return {PROBE_ACCURACY: sum(values) / len(values) if values else None, PROBE_ROWS: len(values),
                PROBE_SECONDS: round(time.monotonic() - t0, 2)}

    def confirm(self) -> dict:
        """A reading now, off the checkpoint schedule, for the health monitor to confirm a finding read on the drawn
        prompts (grpokit.health.monitor); {} when the probe is not bound to a trainer (sharded weights)."""
        return self.measure() if self.trainer is not None else {}

    def take(self) -> dict:
        """The figures of a probe measured this step, once (merged into the step's metrics line)."""
        out, self.pending = self.pending, {}
        return out

    # ---------------------------------------------------------------- when
    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step != 0 or self._baseline_recorded():
            return
        figures = self.measure()
        self._keep_best(0, figures)
        if figures[PROBE_ACCURACY] is not None:
            self.trainer.log(figures)  # step 0's own line in metrics.jsonl, seen by the health monitor

    def on_step_end(self, args, state, control, **kwargs):
        scheduled = state.global_step % max(1, args.save_steps) == 0 or state.global_step >= state.max_steps
        if not (control.should_save and scheduled):
            return
        figures = self.measure()
        self._keep_best(state.global_step, figures)
        if figures[PROBE_ACCURACY] is not None:
            self.pending = figures
            control.should_log = True  # the figures go out with this step's metrics line

    def _baseline_recorded(self) -> bool:
        """Step 0 was probed already in this run folder (a rollback to the initial model, a resume before step 1).
        The main process reads it and every rank gets its answer: each rank then logs step 0, or none does (a rank
        reading the file after the main one wrote the line would skip a log the others wait in)."""
        seen = is_main_process() and any(m.get("step") == 0 and PROBE_ACCURACY in m for m in self.run.read_metrics())
        return bool(broadcast(seen))

    def _keep_best(self, step: int, figures: dict) -> None:
        """The best probe's checkpoint protected from rotation (ties keep the earlier step, as eval's best)."""
        trainer, value = self.trainer, figures[PROBE_ACCURACY]
        if value is None or step == 0 or trainer.args.save_total_limit == 1:
            return
        earlier = [m[PROBE_ACCURACY] for m in self.run.read_metrics()
                   if isinstance(m.get(PROBE_ACCURACY), (int, float)) and m.get(PROBE_ROWS) == figures[PROBE_ROWS]]
        if all(value > v for v in earlier):
            trainer.state.best_model_checkpoint = internals.checkpoint_folder(trainer)  # the save right after this
