"""The bytes one layer keeps for backward, by part: the type training memory (memory.py) and Gemma 4's
layer classes (gemma4.py) both return. Its own module so that neither imports the other at load time."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerActivations:
    """Bytes one transformer block keeps for backward, for one micro-batch, on one GPU."""

    attention: int
    mlp: int
    norm: int

    @property
    def total(self) -> int:
        return self.attention + self.mlp + self.norm
