"""Trainable parameters (what PEFT's `get_nb_trainable_parameters()` reports) and whether the LM head
is trained: the record, and full training's count (every parameter) without importing the adapter
modules (finetune.py, gemma4.py: issue 39, start-up imports what the request needs). The entry point
callers ask is layer_structure.trainable_params; adapters are priced in finetune.py and gemma4.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformer_calc.model.config import ModelConfig, Training


@dataclass(frozen=True)
class Trainable:
    """Trainable parameters of the whole model (T = 1), by where they sit."""

    adapters: int  # LoRA A and B (+ DoRA magnitudes) in every block and on OPT's projections
    embedding: int  # the token table, when trained (modules_to_save)
    head: int  # the untied LM head (+ bias), when trained
    adapted_modules: int

    @property
    def total(self) -> int:
        return self.adapters + self.embedding + self.head


def all_trainable(m: ModelConfig) -> Trainable:
    """Full training: every parameter gets a gradient (counted with the head, as before: one total)."""
    from transformer_calc.estimators.params import count_params

    return Trainable(adapters=0, embedding=0, head=count_params(m).total, adapted_modules=0)


def head_trained(m: ModelConfig, tr: Training) -> bool:
    """Whether the LM head's weight gets a gradient (its input is kept only then): full training,
    a trained head, or a tied head whose embedding is trained."""
    return not tr.adapters or tr.train_head or (m.tied_embeddings and tr.train_embeddings)
