"""Cross-check cases for tools/crosscheck/hf_params.py (see its docstring): random generators per
model_type, edge cases and real published shapes."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

Cfg = dict[str, Any]
R = random.Random

GENERATORS: dict[str, Callable[[R], Cfg]] = {}
EDGE: list[tuple[str, Cfg]] = []
REAL: list[tuple[str, Cfg, int | None]] = []
