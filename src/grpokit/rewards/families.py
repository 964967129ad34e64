"""Imports every reward family so that each registers itself (one line per family)."""
from grpokit.rewards import format as _format  # noqa: F401
from grpokit.rewards import math as _math  # noqa: F401
from grpokit.rewards import json_schema as _json_schema  # noqa: F401
from grpokit.rewards import length as _length  # noqa: F401
from grpokit.rewards import sql_exec as _sql_exec  # noqa: F401
from grpokit.rewards import code as _code  # noqa: F401
