"""Hybrid layer layouts in llama.cpp's GGUF formats: sequence-mixer layers beside attention (estimators/mixers/:
Gated DeltaNet, Mamba, short convolution, ...) and Nemotron-H's one block per layer (a mixer, attention or an
MLP alone).

Source: llama.cpp src/llama-quant.cpp `llama_tensor_get_type`, whose per-tensor rules (which tensors take more
bits, which stay unquantized) quant.py follows for attention, MLP and expert tensors; for a mixer's tensors
(ssm_in, ssm_conv1d, ssm_out, ...) the rules differ by mixer and llama.cpp version and are not modeled, so a
GGUF format is refused for these layouts. The other formats quantize the mixers' Linear modules (quant.py).
"""

from __future__ import annotations

from transformer_calc.estimators.mixers import MIXERS
from transformer_calc.model.config import ModelConfig


def check_gguf(m: ModelConfig, fmt: str) -> None:
    """ValueError naming the mixer kinds when a GGUF format `fmt` is asked of a hybrid layout (nothing for a
    model of attention and MLP layers)."""
    if m.is_hybrid or m.one_mixer_per_layer:
        kinds = ", ".join(MIXERS[k].name for k in m.mixer_kinds)
        raise ValueError(f"{fmt} is a GGUF (llama.cpp) format, whose per-tensor rules for {kinds} layers (which of "
                         "their tensors stay unquantized differs by mixer and llama.cpp version) are not modeled; use "
                         "gptq-int4, awq-int4, nvfp4 or mxfp4, or the checkpoint's own bytes (--weights)")
