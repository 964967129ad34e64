"""Imports every reward family so that each registers itself (one line per family)."""
from grpokit.rewards import format as _format  # noqa: F401
from grpokit.rewards import math as _math  # noqa: F401
