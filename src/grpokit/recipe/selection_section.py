"""The recipe's `selection:` section: which prompts each step trains on, and DAPO's dynamic sampling.

    selection: {enabled: true, mixed_share: 0.6, refill: true}

What the settings do is grpokit.training.selection (pass-rate bands, the sampler) and
grpokit.training.refill (the trainer side); this module only validates them, before any model loads.
"""
from __future__ import annotations

from pydantic import Field, model_validator

from grpokit.recipe.section import Section

_SHARE_SLACK = 1e-9  # float slack when two shares that should sum to 1 are compared


class SelectionConfig(Section):
    """`selection:` in a recipe: which prompts each step trains on (grpokit.training.selection, grpokit.training.refill)."""

    enabled: bool = Field(False, description="Choose each step's prompts by their estimated pass rate "
                          "(off: TRL's order, shuffled by train.shuffle_dataset).")
    mixed_share: float = Field(0.6, ge=0, le=1, description="Share of a step's prompts drawn from prompts whose "
                               "estimated pass rate is strictly between 0 and 1 (they carry a learning signal).")
    unseen_share: float = Field(0.3, ge=0, le=1, description="Share drawn from prompts not sampled yet "
                                "(exploration); the rest revisits never- and always-solved prompts.")
    ema: float = Field(0.5, gt=0, le=1, description="Weight of a prompt's newest group in its pass-rate estimate.")
    band_margin: float = Field(0.05, ge=0, lt=0.5, description="An estimate within this of 0 or 1 counts as never / "
                               "always solved.")
    refill: bool = Field(False, description="DAPO's dynamic sampling: when a generation batch has fewer groups "
                         "with a reward spread than it holds, generate more groups before the update and train on "
                         "those with a spread; with several processes each keeps whole groups of its share "
                         "(per_device_train_batch_size x steps_per_generation a multiple of num_generations).")
    refill_max_rounds: int = Field(2, ge=1, description="Extra generation batches per step at most (each the size "
                                   "of the step's own); what is still missing trains as tied groups.")
    refill_upfront: bool = Field(False, description="Generate the refill_max_rounds extra batches in the same "
                                 "generate call as the step's own, every step, instead of one after another when the "
                                 "step's own groups tie: one decoding loop for all rows "
                                 "(docs/measurements.md 'What the measurements decided').")

    @model_validator(mode="after")
    def _shares(self):
        if self.mixed_share + self.unseen_share > 1 + _SHARE_SLACK:
            raise ValueError(f"mixed_share {self.mixed_share} + unseen_share {self.unseen_share} is above 1; "
                             "lower one of them (the rest of 1 goes to revisits)")
        return self
