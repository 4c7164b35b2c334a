"""The bytes one layer keeps for backward, by part: the type training memory (memory.py,
activations.py) and Gemma 4's layer classes (gemma4.py) both return, and the sizes of what a layer
saves. Its own module so that none of them imports another at load time."""

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


MASK_BYTES = 1  # a torch.bool dropout mask element (seed: "one byte of memory per element")
SOFTMAX_STAT_BYTES = 4  # FlashAttention keeps one fp32 logsumexp per query row and head
LOSS_BYTES = 4  # the cross-entropy keeps an fp32 softmax over the vocabulary (Megatron upcasts logits)
PLAIN_MLP_SAVED = 2  # pre-activation and activation output, F wide each (seed "MLP Activations")
GATED_MLP_SAVED = 4  # gate pre-activation, act(gate), up projection, their product (input to W_down)
FUSED_SWIGLU_SAVED = 3  # Megatron-core's fused SwiGLU: its [gate | up] input (2F) and W_down's input (F)
OUTPUT_GATE_SAVED = 2  # Qwen3-Next's gated attention output: sigmoid(gate) and the output it multiplies


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
