"""The base of every recipe section (one rule for all of them): unknown keys are errors, assignments
are validated, inf/nan are refused, and a number field refuses a boolean."""
from __future__ import annotations

import types
import typing

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


def _numeric(annotation) -> bool:
    """An int or float field (or an optional one) that has no bool of its own to accept."""
    if annotation in (int, float):
        return True
    args = typing.get_args(annotation)
    return (typing.get_origin(annotation) in (typing.Union, types.UnionType)
            and any(a in (int, float) for a in args) and bool not in args)


class Section(BaseModel):
    # inf/nan are refused everywhere: `learning_rate: .inf` would otherwise fail at step 1 ("probability tensor
    # contains inf") after the model has loaded.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value, info: ValidationInfo):
        # pydantic's lax mode reads true as 1: `--set train.max_steps=true` trained one step.
        if isinstance(value, bool) and info.field_name and _numeric(cls.model_fields[info.field_name].annotation):
            raise ValueError(f"{str(value).lower()} is a boolean, not a number: write the number itself")
        return value
