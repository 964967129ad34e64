"""The base of every recipe section (one rule for all of them): unknown keys are errors, assignments
are validated, and inf/nan are refused."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    # inf/nan are refused everywhere: `learning_rate: .inf` would otherwise fail at step 1 ("probability tensor
    # contains inf") after the model has loaded.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)
