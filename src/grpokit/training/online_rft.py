"""Online rejection-sampling fine-tuning (`train.algorithm: rft`): GRPO's step with the SFT loss on the right rows.

Each step samples and scores its completions exactly as GRPO does (same prompts, groups, sampler, rewards, logs,
health, probe and evaluation); then, instead of GRPO's policy-gradient loss, the completions the correctness reward
gives full marks are trained with the SFT loss (the mean negative log-likelihood of their tokens, the model's own
tokens as sampled, at temperature 1) and the rest are dropped. This is RAFT / expert iteration run online: the
literature's strongest baseline for GRPO (expert iteration matches PPO at 7-13B: Havrilla et al., 2024; RAFT++ leads
GRPO early and GRPO overtakes it later, once RAFT's samples lose their diversity: Xiong et al., 2025; docs/sources.md). GRPO's margin
over it is what it learns from the wrong answers.

    parts = Parts(..., rft=OnlineRFT("countdown"), loss_steps=(RFTLoss(),))     # grpokit.training.factory does it

Where the numbers come from: TRL scores each generation batch and logs every reward per completion
(`_logs["rewards"]`); `mark` reads this process's rows of the correctness reward right after each scoring call
(a refill's extra calls too, whose rows the refill's merge carries along), and `finish` counts the right tokens of
the whole generation batch, all processes. The loss of one micro-batch is the right rows' summed token NLL over
that count, scaled as TRL scales the dapo loss across gradient accumulation, so the micro-batches of one step add
up to the SFT loss of all its right completions as one batch (`grpokit data mine-solutions` then `grpokit sft` on
those completions: tests/test_online_rft.py). A step with no right completion trains nothing (a zero loss over
the trainable weights, as grpokit.training.no_signal returns).

Logged: `grpokit/rft/right_frac` (the share of the step's completions kept). Not covered: multimodal rows and tool
episodes (refused by the recipe check), and several optimisation passes over one generation batch
(num_iterations > 1: the SFT loss of a later pass is taken on the same rows as the first).
"""
from __future__ import annotations

import torch

from grpokit import internals
from grpokit.training.no_signal import keep_rows  # the rows kept, their padding columns trimmed

RIGHT = "grpokit_rft_right"  # (B,) 1.0 for a completion the correctness reward gave full marks, else 0.0
RIGHT_TOKENS = "grpokit_rft_tokens"  # (B,) the generation batch's right completion tokens (all processes), per row
FULL_MARKS = 1.0 - 1e-6  # the correctness reward's full marks: what evaluation counts as passed


class OnlineRFT:
    """The right rows of each scored batch, for RFTLoss (the module docstring)."""

    def __init__(self, correctness: str):
        self.correctness = correctness

    def mark(self, trainer, batch: dict) -> dict:
        """`batch` (one TRL scoring call's, this process's rows) with RIGHT from the correctness reward's scores;
        an evaluation's batch (the model not training) is left as it is, for TRL's own loss."""
        if not trainer.model.training:
            return batch
        rows = batch[internals.COMPLETION_IDS].shape[0]
        processes, rank = trainer.accelerator.num_processes, trainer.accelerator.process_index
        _, rewards = internals.generation_rewards(trainer, rows * processes)
        scores = rewards.get(self.correctness)
        if scores is None or len(scores) < rows * processes:
            raise RuntimeError(f"online RFT: the correctness reward {self.correctness!r} scored no row of this batch "
                               f"(logged: {sorted(rewards)})")
        mine = scores[rank * rows:(rank + 1) * rows]
        batch[RIGHT] = torch.tensor([float(v is not None and v == v and v >= FULL_MARKS) for v in mine],
                                    device=batch[internals.COMPLETION_IDS].device)
        return batch

    def finish(self, trainer, batch: dict) -> dict:
        """The whole generation batch: RIGHT_TOKENS per row (the right tokens of every process's rows), the share
        of right completions logged."""
        if RIGHT not in batch:
            return batch
        right = batch[RIGHT]
        tokens = (batch[internals.COMPLETION_MASK].sum(dim=1).to(right.dtype) * right).sum()
        counts = trainer.accelerator.gather(torch.stack([tokens, right.sum(), torch.tensor(
            float(right.numel()), device=right.device)]).reshape(1, 3)).reshape(-1, 3).sum(dim=0)
        batch[RIGHT_TOKENS] = counts[0].expand(right.shape[0]).clone()
        internals.log_metric(trainer, "grpokit/rft/right_frac", float(counts[1] / counts[2].clamp(min=1.0)))
        return batch


class RFTLoss:
    """The loss step of `train.algorithm: rft` (the last and only one): the SFT loss of the micro-batch's right
    rows, normalised by the generation batch's right tokens; TRL's GRPO loss is never called."""

    def __call__(self, trainer, model, batch: dict, loss):
        if RIGHT not in batch:  # an evaluation's batch: TRL's loss, as GRPO reports it
            return loss(batch)
        right = batch[RIGHT] > 0
        total = float(batch[RIGHT_TOKENS][0]) if batch[RIGHT_TOKENS].numel() else 0.0
        if not bool(right.any()) or total <= 0:
            return sum(p.sum() * 0.0 for p in model.parameters() if p.requires_grad)
        kept = keep_rows(batch, right)
        logps = internals.policy_logps(trainer, model, kept)
        mask = kept[internals.COMPLETION_MASK].to(logps.dtype)
        # TRL's dapo scaling: a generation batch spans steps_per_generation micro-batches, an optimizer step
        # current_gradient_accumulation_steps of them; per process its share of the tokens.
        scale = trainer.current_gradient_accumulation_steps / trainer.args.steps_per_generation
        normaliser = total / trainer.accelerator.num_processes * scale
        return -(logps * mask).sum() / normaliser
