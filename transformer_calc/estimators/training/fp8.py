"""FP8 training memory: a Transformer Engine-style recipe (Hopper FP8, Blackwell MXFP8).

Sources: Transformer Engine user guide — "Low precision training": "Performance Considerations /
Handling transposes" (a quantized tensor has a rowwise and a columnwise usage; FP8 GEMMs on
Hopper need the columnwise one physically transposed, so TE keeps both for weights), "FP8 Delayed
Scaling" and `transformer_engine.common.recipe.DelayedScaling(amax_history_len=1024)` (an fp32 amax
history of 1024 steps and a scale per FP8 tensor), "FP8 Current Scaling" (one fp32 scale per
tensor, computed from the current amax: no history), "MXFP8" (one E8M0 scale per 32 consecutive
values, Blackwell; rowwise and columnwise copies are quantized separately). Megatron-core's
`--fp8-recipe delayed|tensorwise|mxfp8|blockwise` names the recipes; `rowwise` is torchao's Float8
rowwise recipe (one fp32 scale per row); `nvfp4` is Megatron's `--fp4-recipe nvfp4` (TE
`NVFP4BlockScaling`: E2M1 values, one E4M3 scale per 16, an fp32 scale per tensor; arXiv:2509.25149
§2). The time these recipes take is estimators/training/precision.py.

What the recipe changes (docs/formulas.md §2.9):
- weights: the bf16 compute copy and the fp32 master stay (`fp8_model_params` off, TE's default);
  each GEMM weight also gets an FP8 copy in both usages, cached across micro-batches: 2 bytes per
  weight (+ 2/32 of E8M0 scales under MXFP8). Embedding, LM head and router stay in 16 bits.
- scaling state: per GEMM 3 forward (input, weight, output) and 2 backward (grad output, grad
  input) FP8 tensors; delayed scaling keeps amax_history_len + 2 fp32 values for each (history,
  scale, inverse scale), tensorwise 2, MXFP8 none beyond its block scales.
- activations: the inputs a GEMM keeps for its weight gradient are saved in FP8 (1 byte, + 1/32
  under MXFP8) instead of p: the attention input, W_O's input (FlashAttention still keeps its
  bf16 output, so the FP8 copy is added there), the MLP input, W_down's input, the routed experts'
  inputs. Norms, softmax statistics, the attention core and the activation function's inputs stay
  at p bytes.
"""

from __future__ import annotations

from transformer_calc.estimators.training.attention_blocks import attention_training
from transformer_calc.estimators.training.latent_moe import combine_input_elements
from transformer_calc.model.config import FP8Recipe, ModelConfig, Parallelism, Training

FP8_BYTES = 1
MX_BLOCK = 32  # MXFP8: one E8M0 (1-byte) scale per 32 consecutive values
BLOCKWISE_TILE = 128  # DeepSeek-V3 §3.3.1: one fp32 scale per 1x128 activation tile (per 128x128 weight block: fewer)
NVFP4_BLOCK = 16  # NVFP4: one E4M3 (1-byte) scale per 16 values, two E2M1 values per byte
AMAX_HISTORY = 1024  # DelayedScaling(amax_history_len=1024), TE's default
FP8_TENSORS_PER_GEMM = 5  # forward: input, weight, output; backward: grad output, grad input
SCALE_VALUES = 2  # scale and scale_inv, fp32 each


def element_bytes_ceil(n: int, recipe: FP8Recipe) -> int:
    """Bytes of n elements in one low-precision usage: n (per-tensor or per-row scales), n + ⌈n/32⌉
    (MXFP8), n + 4·⌈n/128⌉ (blockwise: an fp32 scale per 1x128 tile, the activations' granularity,
    an upper bound for the 128x128 weight blocks), ⌈n/2⌉ + ⌈n/16⌉ (NVFP4)."""
    if recipe is FP8Recipe.nvfp4:
        return -(-n // 2) + -(-n // NVFP4_BLOCK)
    if recipe is FP8Recipe.blockwise:
        return FP8_BYTES * n + 4 * -(-n // BLOCKWISE_TILE)
    return FP8_BYTES * n + (-(-n // MX_BLOCK) if recipe is FP8Recipe.mxfp8 else 0)


def weight_copy_bytes(elements: int, recipe: FP8Recipe) -> int:
    """The cached FP8 copies of `elements` GEMM weights: rowwise and columnwise (transposed)."""
    if recipe is FP8Recipe.none:
        return 0
    return 2 * element_bytes_ceil(elements, recipe)


def scaling_state_bytes(gemms: int, recipe: FP8Recipe) -> int:
    """Scaling metadata of `gemms` GEMMs (fp32 values): delayed 5·(1024 + 2)·4 bytes per GEMM."""
    if recipe is FP8Recipe.delayed:
        return gemms * FP8_TENSORS_PER_GEMM * (AMAX_HISTORY + SCALE_VALUES) * 4
    if recipe in (FP8Recipe.tensorwise, FP8Recipe.nvfp4):  # nvfp4: the fp32 per-tensor scale
        return gemms * FP8_TENSORS_PER_GEMM * SCALE_VALUES * 4
    return 0


def block_gemms(m: ModelConfig, moe: bool, T: int = 1, ep: int = 1, etp: int | None = None) -> tuple[int, int]:
    """(GEMM weight elements, GEMM modules) of one block on one rank (finetune.block_matrices:
    attention, dense or shared MLP, routed experts; the router stays 16-bit)."""
    from transformer_calc.estimators.training.finetune import block_matrices

    mats = block_matrices(m, moe, T, ep, etp)
    return sum(n * c for n, c in mats), sum(c for _, c in mats)


def activation_delta(
    m: ModelConfig, B: int, S: int, S_rep: int, tr: Training, par: Parallelism, moe: bool, *, flash: bool
) -> tuple[int, int]:
    """(attention, mlp) change of one block's stored activations when GEMM inputs are kept in FP8
    (see the module docstring); negative: bytes saved."""
    p, T, D, recipe = tr.p, par.tensor, m.d_model, tr.fp8_recipe

    def to_fp8(n: int) -> int:  # n elements stored at FP8 instead of p bytes
        return element_bytes_ceil(n, recipe) - p * n

    attn = mlp = 0
    attn += to_fp8(B * S_rep * attention_training(m).qkv_input_width(m))  # QKV input (the norm's output; MLA: none)
    o_in = B * S * (m.n_heads // T) * m.v_dim
    attn += element_bytes_ceil(o_in, recipe) if flash else to_fp8(o_in)  # flash keeps its bf16 output
    shared_input = m.parallel_attn and m.norms_per_layer == 1
    if not shared_input:
        mlp += to_fp8(B * S_rep * D)  # MLP input
    if moe:
        F = m.moe_d_ff // par.expert_tensor_size
        mlp += m.experts_per_token * (to_fp8(B * S * F) + to_fp8(B * S * m.expert_d))  # W_down inputs, routed copies
        mlp += to_fp8(combine_input_elements(m, B, S))  # LatentMoE: fc2_latent_proj's input (none without)
        if m.shared_expert_d_ff:
            mlp += to_fp8(B * S * (m.shared_expert_d_ff // T))
    else:
        mlp += to_fp8(B * S * (m.d_ff // T))  # W_down's input
    return attn, mlp


def mixer_activation_delta(m: ModelConfig, kind, B: int, S: int, S_rep: int, tr: Training, par: Parallelism,
                           *, fused: bool) -> int:
    """Change of one mixer layer's stored activations when its TE linears keep their inputs in FP8
    (support_table.FP8_MIXERS: Megatron-core's MambaMixer): in_proj's input (the norm's output,
    B·S_rep·D, which `mixer_activations` counts at p) and, where the profile keeps it for the weight
    gradient, out_proj's input (the fused kernels recompute it: none kept). The conv and scan
    tensors stay at p (bf16 kernels)."""
    from transformer_calc.estimators.mixers import MIXERS
    from transformer_calc.estimators.mixers.base import WEIGHT, WEIGHT_EAGER

    p, recipe = tr.p, tr.fp8_recipe

    def to_fp8(n: int) -> int:
        return element_bytes_ceil(n, recipe) - p * n

    delta = to_fp8(B * S_rep * m.d_model)  # in_proj's input
    kept = (WEIGHT,) if fused else (WEIGHT, WEIGHT_EAGER)
    for lin in MIXERS[kind].linears(m, par.tensor):
        if lin.reads in kept:
            delta += to_fp8(B * S * lin.d_in)
    return delta
