"""grpokit's two trainers: TRL's GRPOTrainer and SFTTrainer, each built from named parts that its constructor takes
and binds, nothing set on it from outside afterwards (grpokit.training.factory builds the parts from a recipe).

    trainer = GrpokitTrainer(Parts(sampling=..., selection=..., logps=TreeLogps(), loss_steps=(SkipNoSignal(),)),
                             model=model, args=grpo_config, reward_funcs=[...], train_dataset=..., processing_class=tok)

A batch's way through a GrpokitTrainer, in the order TRL calls the methods below (one each):

    1. sample     TRL's HF generation calls the policy's `generate`: `parts.sampling` answers it (grpokit's
                  decoding loop, on the policy or a copy in another precision: grpokit.training.sampling);
                  `_sampled_logprobs` hands a copy's recorded log-probs to TRL's batch
    2. score      TRL's `_generate_and_score_completions` (rewards, advantages); `parts.selection` reads the
    3. select     rewards into per-prompt pass rates and, with refill, generates more groups until enough carry a
                  learning signal (grpokit.training.refill); its sampler chooses the next prompts
    4. log-probs  every log-prob TRL computes (the loss, the old policy, the reference) through `parts.logps`:
                  over the tree of shared prefixes, or TRL's rows (grpokit.training.logps)
    5. loss       `parts.loss_steps` in their order, each handing the batch to the next, then TRL's loss: skip
                  the rows without a learning signal (grpokit.training.no_signal), then the sampler correction;
                  online RFT (`parts.rft`) marks the right rows at step 2 and its one loss step replaces TRL's
    then at each logging step: the held-out probe's figures, samples.jsonl (`parts.samples`), the health
    monitor (`parts.health`, which may stop the run); at each save the selection's estimates.

TRL's private methods are reached through grpokit.internals' hooks only (its table lists them); the trainer
refuses a TRL whose internals changed (grpokit.trl_compat) when it is built. Not covered: building the parts
(grpokit.training.factory) and the run around the trainer (grpokit.training.grpo, .lifecycle).
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from transformers.trainer_callback import PrinterCallback
from trl import GRPOTrainer, SFTTrainer

from grpokit import generation_internals
from grpokit import internals, trl_compat
from grpokit.distributed import broadcast
from grpokit.generation.tree import refusal
from grpokit.health import HealthMonitor
from grpokit.run import RunDir, jsonable
from grpokit.run.layout import MODEL_CARD
from grpokit.run.writer import append_file, check_library_target, write_file
from grpokit.training.lm_head import CpuHead
from grpokit.training.logps import TreeForward, TreeLogps
from grpokit.training.probe import HeldOutProbe
from grpokit.training.refill import Selection
from grpokit.training.online_rft import OnlineRFT
from grpokit.training.rollback import load_reference
from grpokit.training.sampling import EpisodeSampling, Sampling
from grpokit.training.tracking import Progress, route_trackers


class SamplesSink:
    """samples.jsonl: a few completions of each logging step, with their prompts and rewards (main process)."""

    def __init__(self, path: Path, per_step: int = 4):
        self.path, self.per_step = Path(path), per_step

    def write(self, trainer) -> list[dict]:
        if not self.per_step or not trainer.accelerator.is_main_process:
            return []
        prompts, completions, rewards = internals.latest_generation(trainer)
        if not completions:
            return []
        g = trainer.args.num_generations
        # One completion from each of several groups: different prompts are more telling than one group.
        idx = list(range(0, len(completions), g))[: self.per_step]
        idx += [i for i in range(len(completions)) if i not in idx][: self.per_step - len(idx)]
        written = [{"step": trainer.state.global_step, "prompt": prompts[i], "completion": completions[i],
                    "rewards": {k: jsonable(v[i]) for k, v in rewards.items() if i < len(v)}} for i in idx]
        with append_file(self.path) as f:  # never through a link (grpokit.run.writer)
            for line in written:
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
        return written


@dataclass
class Parts:
    """What a GrpokitTrainer is built from, each part optional (none at all: TRL's GRPOTrainer with the TRL check).

    sampling      how TRL's HF generation call is answered (grpokit.training.sampling.Sampling, or an evaluation's
                  own replacement: `attach(trainer, log)` returns what answers `generate`, with its `.sampler`)
    selection     pass-rate estimates, the signal-aware sampler and DAPO refill (grpokit.training.refill.Selection)
    logps         the log-prob computation (grpokit.training.logps.TreeLogps: the tree, or TRL's rows, its positions
                  counted and its choice said); None: TRL's own, uncounted
    loss_steps    callables (trainer, model, batch, loss) -> loss, run in this order before TRL's loss
    rft           online RFT (grpokit.training.online_rft.OnlineRFT, `train.algorithm: rft`): each scored batch's right
                  rows marked for its loss step, RFTLoss, which replaces TRL's loss
    probe         the held-out probe (also among the callbacks), bound to the trainer here
    health        the health monitor, run at each logging step (main process)
    samples       samples.jsonl
    progress      the progress bar and status lines (closed when train() ends, whatever happens)
    reference     a run whose reference/ holds a rollback's KL reference, loaded into TRL's reference model
    trackers      the run folder whose tensorboard/ gets the event files (trl.report_to)
    episodes_only evaluation of tool episodes: play and score each batch, no evaluation loss
    log           where the parts say what they chose (the run's first lines)
    """

    sampling: Sampling | EpisodeSampling | None = None
    selection: Selection | None = None
    logps: TreeLogps | None = None
    loss_steps: tuple[Callable, ...] = ()
    rft: OnlineRFT | None = None
    probe: HeldOutProbe | None = None
    health: HealthMonitor | None = None
    samples: SamplesSink | None = None
    progress: Progress | None = None
    reference: RunDir | None = None
    trackers: Path | None = None
    episodes_only: bool = False
    log: Callable[[str], None] = print


class RunFolderWrites:
    """What TRL and transformers write into the run folder by name, under the writer's rules (grpokit.run.writer):
    TRL's model card (checkpoints/MODEL_CARD, rewritten at every save) is rendered into a folder of grpokit's own
    and written by `write_file`, never through a link planted at its name; a checkpoint folder is checked
    (`check_library_target`) just before transformers writes it, so a link at checkpoint-N, or a linked file
    inside it, is refused with nothing written. Both trainers (GRPO and SFT) are built on it."""

    def _run_folder(self) -> Path:
        return Path(self.args.output_dir).parent  # output_dir is RUN/checkpoints (grpokit.recipe.trl_args)

    def create_model_card(self, *args, **kwargs):
        out = self.args.output_dir
        with tempfile.TemporaryDirectory(prefix="grpokit-card-") as card_dir:
            self.args.output_dir = card_dir  # TRL saves its card in output_dir: here, then moved in
            try:
                super().create_model_card(*args, **kwargs)
            finally:
                self.args.output_dir = out
            card = Path(card_dir) / MODEL_CARD
            if card.is_file():
                write_file(Path(out) / card.name, card.read_text(encoding="utf-8"), within=self._run_folder())

    def _save_checkpoint(self, model, trial):
        if self.args.should_save:
            check_library_target(internals.checkpoint_folder(self, trial), within=self._run_folder())
        super()._save_checkpoint(model, trial)

    def save_model(self, output_dir=None, _internal_call=False):
        if output_dir is not None and self.args.should_save:
            check_library_target(output_dir, within=self._run_folder())
        return super().save_model(output_dir, _internal_call)


class GrpokitTrainer(RunFolderWrites, internals.TrainerHooks, GRPOTrainer):
    """TRL's GRPOTrainer with grpokit's parts (the module docstring: a batch's way, step by step)."""

    def __init__(self, parts: Parts, **trl_kwargs):
        self.compact_head = trl_compat.refuse_unusable(GRPOTrainer)  # a TRL grpokit cannot use: refused here
        self.sampling = self.probe = None  # TRL's constructor runs no step; the parts are bound once it is done
        self.selection, self.logps, self.loss_steps = parts.selection, parts.logps, tuple(parts.loss_steps)
        self.rft = parts.rft
        self.health, self.samples, self.progress = parts.health, parts.samples, parts.progress
        self.episodes_only = parts.episodes_only
        self.seen_logps: list | None = None  # `logps_seen`: the policy log-probs of one loss call
        super().__init__(**trl_kwargs)
        self.remove_callback(PrinterCallback)  # grpokit's logger prints a compact line instead of the raw dict
        if parts.trackers is not None:
            route_trackers(self, parts.trackers)
        self.probe = parts.probe.attach(self, parts.log) if parts.probe is not None else None
        if parts.reference is not None:  # after a health rollback: KL against the restored weights
            load_reference(self, parts.reference, log=parts.log)
        self.sampling = parts.sampling.attach(self, parts.log) if parts.sampling is not None else None
        if self.logps is not None:
            parts.log(self.logps.decision(self.model))

    @property
    def sampler(self):
        """The sampler's copy of the policy in another precision (grpokit.training.sampling.SamplerCopy), or None."""
        return getattr(self.sampling, "sampler", None)

    # ---------------------------------------------------------------- 1. sample
    def grpokit_logprobs(self, completion_ids, logprobs):
        if logprobs is None and self.sampler is not None:  # TRL's HF path records none: the copy's own
            logprobs = self.sampler.take_logprobs(completion_ids)
        return logprobs

    # ---------------------------------------------------------------- 2. score and 3. select
    def grpokit_sampler(self, dataset, trl_sampler):
        return trl_sampler(dataset) if self.selection is None else self.selection.sampler(self, dataset, trl_sampler)

    def grpokit_generate(self, inputs, trl_generate):
        if self.rft is not None:  # each scoring call's rows marked right or not, then the whole batch counted
            scored = trl_generate
            trl_generate = lambda rows: self.rft.mark(self, scored(rows))  # noqa: E731
        batch = trl_generate(inputs) if self.selection is None else \
            self.selection.generate(self, inputs, trl_generate)
        return batch if self.rft is None else self.rft.finish(self, batch)

    # ---------------------------------------------------------------- 4. log-probs
    def grpokit_logps(self, model, input_ids, attention_mask, logits_to_keep, trl_logps, *args, **kwargs):
        with internals.labelled_positions_only(self.compact_head), \
                internals.fused_head_kernel(CpuHead if self.compact_head else None):  # this trainer's log-probs only
            out = trl_logps(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs) if self.logps is None \
                else self.logps(self, model, input_ids, attention_mask, logits_to_keep, trl_logps, *args, **kwargs)
        if self.seen_logps is not None and not self.seen_logps:
            self.seen_logps.append(out[0].detach())
        return out

    def logps_seen(self, loss: Callable, batch: dict):
        """(loss(batch), the policy log-probs its first log-prob call computed, detached, or None): the sampler
        correction measures the sampler's gap with them."""
        self.seen_logps = []
        try:
            value = loss(batch)
            return value, (self.seen_logps[0] if self.seen_logps else None)
        finally:
            self.seen_logps = None

    # ---------------------------------------------------------------- 5. loss
    def grpokit_loss(self, model, inputs, trl_loss):
        def through(steps: tuple, batch: dict):
            if not steps:
                return trl_loss(batch)
            return steps[0](self, model, batch, lambda b: through(steps[1:], b))

        return through(self.loss_steps, inputs)

    # ---------------------------------------------------------------- each logging step, each save, the run
    def log(self, logs, start_time=None):
        if self.probe is not None:  # a held-out probe measured at this step (grpokit.training.probe)
            logs.update(self.probe.take())
        super().log(logs, start_time)
        if "train_runtime" in logs or self.episodes_only:
            return
        samples = self.samples.write(self) if self.samples is not None else []
        stop = False
        if self.health is not None:  # set on the main process only
            record = {"step": self.state.global_step, **{k: jsonable(v) for k, v in logs.items()}}
            stop = self.health.observe(record, samples) is not None
        if broadcast(stop):  # the main process's decision stops every rank at this step
            self.control.should_training_stop = True

    def grpokit_saved(self, folder: str) -> None:
        if self.selection is not None:
            self.selection.saved(self, folder)

    def grpokit_predict(self, model, inputs, trl_prediction):
        if not self.episodes_only:
            return trl_prediction()
        internals.play_and_score(self, inputs)  # the episodes and TRL's eval metrics, without the eval loss
        return torch.zeros((), device=self.accelerator.device), None, None

    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        if self.selection is not None and isinstance(resume_from_checkpoint, (str, Path)):
            self.selection.load(Path(resume_from_checkpoint))
        try:
            return super().train(resume_from_checkpoint, *args, **kwargs)
        finally:
            generation_internals.stop_generating_through(self)  # the trained model generates as itself from here on
            if self.progress is not None:
                self.progress.close()  # a live progress bar must not outlive an exception


class GrpokitSFTTrainer(RunFolderWrites, SFTTrainer):
    """TRL's SFTTrainer with its loss over the tree of shared prefixes (`logps`, grpokit.training.logps.TreeLogps):
    demonstrations that share a prompt, a system prompt or a tool block compute it once.

    TRL 1.16's SFTTrainer.compute_loss calls `model(input_ids, attention_mask, labels, fused_lm_head=True)` and
    reads per-token fields from the output; the model it is handed is wrapped (grpokit.training.logps.TreeForward)
    so that call runs over the tree. Every other call (a compute_loss_func, label smoothing, an auxiliary loss)
    goes to the model as it is."""

    def __init__(self, logps: TreeLogps, log: Callable[[str], None] = print, **trl_kwargs):
        self.logps = logps
        super().__init__(**trl_kwargs)
        self.remove_callback(PrinterCallback)  # grpokit's logger prints a compact line instead of the raw dict
        log(f"note: {logps.decision(self.model)}")

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        inner = self.accelerator.unwrap_model(model)
        plain = self.compute_loss_func is not None or self.label_smoother is not None or \
            getattr(self, "aux_loss_enabled", False)
        if self.logps.shared_prefix and not plain and refusal(inner, longest=inputs["input_ids"].size(1)) is None:
            model = TreeForward(model, self, inner)
        return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                    num_items_in_batch=num_items_in_batch)
