"""Precision recipes for the step time: which GEMMs run at which peak, and the quantize traffic (issue 24).

The memory side of the same recipes is fp8.py; this module prices their time. One recipe per
`--fp8-recipe` value:

| recipe     | GEMM dtype | bytes per quantized value            | scale from                     | source |
| ---        | ---        | ---                                  | ---                            | ---    |
| delayed    | fp8        | 1                                    | a 1024-step amax history       | TE "FP8 Delayed Scaling" |
| tensorwise | fp8        | 1                                    | the tensor's current amax      | TE "FP8 Current Scaling" |
| rowwise    | fp8        | 1 (+ an fp32 scale per row)          | each row's current amax        | torchao Float8 "rowwise" |
| blockwise  | fp8        | 1 + 4/128 (fp32 per 1x128 tile)      | each tile's amax (fused)       | DeepSeek-V3 §3.3.1 (arXiv:2412.19437) |
| mxfp8      | fp8        | 1 + 1/32 (E8M0 per 32)               | each block's amax (fused)      | TE "MXFP8", OCP MX spec |
| nvfp4      | fp4        | 1/2 + 1/16 (E4M3 per 16)             | tensor amax, then each block's | TE "NVFP4", arXiv:2509.25149 §2-4 |

Which GEMMs run low: in every recipe the three GEMMs of each Transformer Engine linear layer --
fprop (Y = X·W), dgrad (dX = dY·Wᵀ) and wgrad (dW = Xᵀ·dY) -- take quantized operands (TE
user guide "Introduction to FP8": "all three GEMMs in FP8"; DeepSeek-V3 §3.3: "Fprop, Dgrad and
Wgrad"; arXiv:2509.25149 §4: all three NVFP4). What stays at the bf16 peak: the attention core
(QKᵀ and the re-weighting by V run in FlashAttention / cuDNN fused attention, bf16), the LM head
(Megatron's output layer is not a TE module) and the MoE router (kept in fp32/bf16 by Megatron-core
and TE alike), and under nvfp4 the linear layers of a share of the blocks: NVIDIA's NVFP4 recipe
keeps "a few sensitive linear layers in higher precision (about 15 % of the network, the majority
at the end)" (arXiv:2509.25149 §4; Megatron-core expresses it as `--first-last-layers-bf16
--num-layers-at-start-in-bf16 N --num-layers-at-end-in-bf16 M`). tcalc keeps round(0.15·L) blocks
in bf16 under nvfp4 (the paper's share, not fitted; whether the Megatron-Bridge performance
recipes keep exactly this share was not read). The FP8 recipes keep none (Megatron's
`--first-last-layers-bf16` is off by default).

Quantize traffic (memory-bound, priced at the HBM bandwidth with the step's memory efficiency):
- every GEMM input that is an activation (the linear layers' inputs in fprop, their output
  gradients in dgrad) is read once at p bytes and written twice, a rowwise and a columnwise
  (transposed) quantized copy, since wgrad and dgrad consume the transposed layout (TE
  "Handling transposes": Hopper FP8 GEMMs take only the TN layout; MXFP8 and NVFP4 scale along
  the other axis for the columnwise usage, so it is quantized separately). Current scaling
  (tensorwise, nvfp4's per-tensor scale) reads the tensor once more to find its amax before
  casting (TE "FP8 Current Scaling": "an additional pass"); delayed scaling takes the amax from
  history and per-row/per-block recipes compute theirs inside the cast kernel.
- weights are cast once per optimizer step, not per micro-batch (Megatron passes
  `is_first_microbatch` so TE caches the quantized weights across micro-batches): read p, write
  both usages.
- nvfp4's 16x16 random Hadamard transform of the wgrad inputs is assumed fused into the cast of
  their columnwise copy (TE applies it in the quantize kernel): no traffic of its own.

Achievable rate: a low-precision GEMM reaches LOW_PRECISION_GEMM_RATIO of the efficiency a bf16
GEMM reaches, of its own (fp8 or fp4) dense peak. Measured single GEMMs reach about the same
fraction of the fp8 peak as of the bf16 peak at large shapes (tile-ai/tilelang benchmark on an
H800 SXM, M = N = 8192, K = 16384: fp8 1541 TFLOP/s = 0.779 of 1979, fp16 766 = 0.774 of 989;
github:xwhzz/tilelang benchmark/matmul_fp8/README.md and benchmark/matmul/README.md); whole training
steps do not (their FP8 GEMMs are smaller per rank, and TE's FP8 linears carry work the fraction
does not see). The ratio is therefore FITTED, on one source only: NeMo 24.07's FP8 performance
summary on H100 (7 runs, tools/validation/train_runs.yaml ids nemo-*); it is validated on the
Megatron-Bridge 25.11/26.02 FP8-CS, MXFP8 and NVFP4 runs (H100, B200, B300, GB200, GB300) in the
same file. Blackwell and fp4 take the Hopper fp8 fit (no Blackwell run fitted; an assumption the
validation shows).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer_calc.estimators.training.attention_blocks import attention_training
from transformer_calc.estimators.training.latent_moe import expert_io_width, projection_quantize_values
from transformer_calc.model.config import FP8Recipe, ModelConfig, Parallelism, Recompute, Training

NVFP4_BF16_SHARE = 0.15  # arXiv:2509.25149 §4: about 15 % of the linear layers stay in high precision


@dataclass(frozen=True)
class RecipeTime:
    """What a recipe costs in time: its GEMMs' dtype and its quantize traffic per value."""

    gemm_dtype: str  # the dense peak its GEMMs run at: fp8 | fp4
    value_bytes: float  # one quantized usage of one value, scales included
    amax_pass: bool  # current scaling: one more read of the tensor for its amax
    bf16_share: float = 0.0  # share of the blocks whose linear layers stay in bf16


RECIPES: dict[FP8Recipe, RecipeTime] = {
    FP8Recipe.delayed: RecipeTime("fp8", 1.0, amax_pass=False),
    FP8Recipe.tensorwise: RecipeTime("fp8", 1.0, amax_pass=True),
    FP8Recipe.rowwise: RecipeTime("fp8", 1.0, amax_pass=False),
    FP8Recipe.blockwise: RecipeTime("fp8", 1.0 + 4 / 128, amax_pass=False),
    FP8Recipe.mxfp8: RecipeTime("fp8", 1.0 + 1 / 32, amax_pass=False),
    FP8Recipe.nvfp4: RecipeTime("fp4", 0.5 + 1 / 16, amax_pass=True, bf16_share=NVFP4_BF16_SHARE),
}
USAGES = 2  # a rowwise and a columnwise (transposed) quantized copy of every quantized tensor
# FITTED (module docstring): the low-precision GEMMs' efficiency / the bf16 GEMMs' efficiency, each of
# its own dense peak. 0.747 gives a median error of 0 on NeMo 24.07's 7 H100 FP8 runs (the only
# source it is fitted on); fp4 takes the fp8 value (an assumption). On other GPUs the fp8 value moves
# with the GPU's measured FP8 / BF16 MAMF efficiency (FP8_MAMF_RATIO, over the H100's it was fitted at).
LOW_PRECISION_GEMM_RATIO = {"fp8": 0.747, "fp4": 0.747}
# Maximum achievable matmul FLOPS, FP8 (float8_e4m3fn) over BF16, each as a fraction of its own dense
# peak, measured per GPU (stas00/ml-engineering compute/accelerator/README.md, "Maximum Achievable
# Matmul FLOPS comparison table", 2026 revision: BF16 H100 80.3 %, H200 = H100, GH200 83.8 %, B200
# 77.6 %, B300 78.6 %, GB200 72.9 %; FP8 H100 70.9 %, H200 73.4 %, GH200 77.6 %, B200 76.3 %, B300
# 74.5 %, GB200 72.3 %). Hopper's FP8 tensor cores lose more of their peak than Blackwell's (FP8
# accumulation through the CUDA cores' promotion on Hopper, DeepSeek-V3 §3.3.2; native on Blackwell).
# GB300 takes B300's (the same Blackwell Ultra die); a GPU not listed takes the H100's (the fit's).
FP8_MAMF_RATIO = {"H100": 0.709 / 0.803, "H800": 0.709 / 0.803, "H200": 0.734 / 0.803, "GH200": 0.776 / 0.838,
                  "B200": 0.763 / 0.776, "B300": 0.745 / 0.786, "GB200": 0.723 / 0.729, "GB300": 0.745 / 0.786}  # fmt: skip
FIT_GPU = "H100"  # where LOW_PRECISION_GEMM_RATIO was fitted


def low_precision_ratio(dtype: str, gpu_name: str) -> float:
    """LOW_PRECISION_GEMM_RATIO of `dtype` on `gpu_name`: the fp8 fit scaled by the GPU's FP8/BF16
    MAMF ratio over the fit GPU's (FP8_MAMF_RATIO); fp4 as fitted (no FP4 MAMF measured)."""
    ratio = LOW_PRECISION_GEMM_RATIO[dtype]
    if dtype != "fp8":
        return ratio
    key = gpu_name.upper()
    measured = next((FP8_MAMF_RATIO[k] for k in sorted(FP8_MAMF_RATIO, key=len, reverse=True) if key.startswith(k)),
                    FP8_MAMF_RATIO[FIT_GPU])
    return ratio * measured / FP8_MAMF_RATIO[FIT_GPU]


def recipe_time(recipe: FP8Recipe) -> RecipeTime | None:
    return RECIPES.get(recipe)


def bf16_block_count(m: ModelConfig, recipe: FP8Recipe) -> int:
    """Blocks whose linear layers stay in bf16 under the recipe (at most all L)."""
    rt = RECIPES.get(recipe)
    return 0 if rt is None else min(m.n_layers, round(rt.bf16_share * m.n_layers))


def compute_s(
    executed: int, high_precision: int, bf16_peak: float, low_peak: float, eff: float, recipe: FP8Recipe,
    gpu_name: str = FIT_GPU,
) -> float:
    """Seconds of `executed` FLOPs on one GPU when `high_precision` of them run at the bf16 peak and
    the rest at the recipe's peak: high / (bf16_peak·η) + (executed − high) / (low_peak·η·ratio),
    ratio the GPU's (`low_precision_ratio`)."""
    rt = RECIPES[recipe]
    low = max(executed - high_precision, 0)
    ratio = low_precision_ratio(rt.gemm_dtype, gpu_name)
    return high_precision / (bf16_peak * eff) + low / (low_peak * eff * ratio)


def high_precision_flops(m: ModelConfig, step, tr: Training, linear_layer_flops: float) -> int:
    """FLOPs of one step that stay at the bf16 peak under a recipe: the attention cores (forward,
    backward = 2 forwards, a recomputed forward), the LM head and embedding projection (3 passes),
    the router (3 passes), a hybrid's mixer convs and scans (`mixer_high_precision_flops`), and the
    linear layers of the bf16 blocks (`linear_layer_flops`: one block's linear-layer FLOPs over the
    step, all passes)."""
    recompute = 1 if tr.recompute in (Recompute.selective, Recompute.full) else 0  # op saves SDPA's outputs
    cores = step.attention_cores * (3 + recompute)
    head = 3 * (step.lm_head + step.embedding_projection)
    router = 3 * step.layer.router * m.n_moe_layers()
    mixers = mixer_high_precision_flops(m, step, tr)  # a hybrid's conv and scan (0 otherwise)
    return int(cores + head + router + mixers + bf16_block_count(m, tr.fp8_recipe) * linear_layer_flops)


def activation_quantize_bytes(m: ModelConfig, tr: Training, par: Parallelism, moe: bool) -> float:
    """Bytes one GPU moves per token of one block to quantize its GEMMs' activation operands in one
    forward + backward (module docstring): per quantized value p read (+ p for an amax pass) and
    USAGES copies written. Quantized per token: the inputs of QKV (D), W_O (A·h_v/T), the MLP
    (D) and W_down (F/T) in fprop; their output gradients (QKV width/T, D, the up (and gate)
    width/T, D) in dgrad; under a MoE block the routed experts' inputs and gradients k times, the
    shared expert's once. Widths per tensor-parallel rank (with SP the D-wide tensors are a 1/T
    share of the tokens: the same bytes per GPU). MLA's low-rank projections (q_a/q_b, kv_a/kv_b)
    are approximated by a QKV of A·h_d outputs."""
    rt = RECIPES[tr.fp8_recipe]
    T, D, p = par.tensor, m.d_model, tr.p
    values = attention_quantize_values(m, T)  # attention: fprop inputs, dgrad output gradients
    n_up = 2 if m.gated_mlp else 1

    def mlp(width: float, copies: float, d: float = D / T) -> float:  # fc1 input, fc2 input, fc1/fc2 out-grads
        return copies * (d + width + n_up * width + d)

    if moe:
        etp = par.expert_tensor_size
        # LatentMoE (latent_moe.py): experts in ℓ; fc1/fc2_latent_proj: inputs D and ℓ, out-grads ℓ and D
        values += (mlp(m.moe_d_ff / etp, m.experts_per_token, expert_io_width(m, D / T))
                   + projection_quantize_values(m, D / T))
        if m.shared_expert_d_ff:
            values += mlp(m.shared_expert_d_ff / T, 1)
    else:
        values += mlp(m.d_ff / T, 1)
    read = p * (2 if rt.amax_pass else 1)
    return values * (read + USAGES * rt.value_bytes)


# The mixer kinds priced under an FP8 recipe: estimators/support_table.py FP8_MIXERS (Mamba-2's TE linears).


def mixer_quantize_values(m: ModelConfig, kind, T: int) -> float:
    """Values one token quantizes in one mixer layer, forward + backward: each TE linear's input
    (fprop) and output gradient (dgrad), per tensor-parallel rank; the D-wide side of a column- or
    row-parallel linear counted D/T, as `activation_quantize_bytes` counts QKV's input and W_O's
    output gradient (with SP a 1/T share of the tokens)."""
    from transformer_calc.estimators.mixers import MIXERS

    def values(lin) -> float:
        return {"col": lin.d_in / T + lin.d_out, "row": lin.d_in + lin.d_out / T}.get(lin.split, lin.d_in + lin.d_out)

    return sum(values(lin) for lin in MIXERS[kind].linears(m, T))


def layer_quantize_bytes(m: ModelConfig, tr: Training, par: Parallelism) -> float:
    """A hybrid's cast bytes per token, summed over its L layers: attention layers as
    `activation_quantize_bytes` prices an attention block's attention part, mixer layers their
    linears (`mixer_quantize_values`), each MLP by its kind (MoE or dense), channel-free layers
    (Nemotron-H's mixer-only layers) none."""
    from transformer_calc.estimators.training.finetune import layer_counts
    from transformer_calc.model.kinds import ATTENTION_KINDS

    rt = RECIPES[tr.fp8_recipe]
    per_value = tr.p * (2 if rt.amax_pass else 1) + USAGES * rt.value_bytes
    counts, T = layer_counts(m), par.tensor
    attention = attention_quantize_values(m, T) * per_value
    dense_mlp = activation_quantize_bytes(m, tr, par, moe=False) - attention  # a block less its attention part
    moe_mlp = activation_quantize_bytes(m, tr, par, moe=True) - attention
    total = counts.moe * moe_mlp + counts.dense * dense_mlp
    from transformer_calc.estimators.mixers import MIXERS

    for kind, n in counts.sequence.items():  # kind `none` (an MLP-only layer): no sequence mixer to cast
        if kind in ATTENTION_KINDS:
            total += n * attention
        elif kind in MIXERS:
            total += n * mixer_quantize_values(m, kind, T) * per_value
    return total


def attention_quantize_values(m: ModelConfig, T: int) -> float:
    """An attention part's values per token (`activation_quantize_bytes`): QKV and W_O inputs in
    fprop, their output gradients in dgrad."""
    D = m.d_model
    qkv_out = (attention_training(m).qkv_out_heads(m) * m.head_dim) / T  # MLA: A·h_d (attention_blocks.py)
    return D / T + m.n_heads * m.v_dim / T + qkv_out + D / T


def mixer_high_precision_flops(m: ModelConfig, step, tr: Training) -> int:
    """A hybrid's mixer FLOPs that stay in bf16 under a recipe: every mixer layer's conv and scan
    (all but its projections), forward, backward 2x, a recomputed forward under full recompute."""
    from transformer_calc.estimators.mixers import MIXERS

    passes = 3 + (1 if tr.recompute is Recompute.full else 0)
    cores = 0
    for kind in dict.fromkeys(m.attention_pattern):
        if kind in MIXERS and (n := m.n_attention_layers(kind)):
            f = MIXERS[kind].forward_flops(m, step.batch_size, step.seq_len)
            cores += n * (f.total - f.projections)
    return passes * cores


def weight_quantize_bytes(elements: int, tr: Training) -> float:
    """Bytes to cast `elements` GEMM weights once per step: read p, write both usages."""
    rt = RECIPES[tr.fp8_recipe]
    return elements * (tr.p * (2 if rt.amax_pass else 1) + USAGES * rt.value_bytes)


def layer_cast_bytes(m: ModelConfig, tr: Training, par: Parallelism) -> tuple[float, float]:
    """(activation bytes per token, weight bytes per step) of a recipe's casts in one layer on one GPU, averaged
    over the L layers of a hybrid's layer plan (hybrid_layers.cast_bytes_per_layer picks it)."""
    from transformer_calc.estimators.training.finetune import layer_counts, layer_matrices, quantized

    elems = quantized(layer_matrices(m, layer_counts(m), par.tensor, par.expert, par.expert_tensor))[0]
    return layer_quantize_bytes(m, tr, par) / m.n_layers, weight_quantize_bytes(elems, tr) / m.n_layers


def block_cast_bytes(m: ModelConfig, tr: Training, par: Parallelism) -> tuple[float, float]:
    """The same for a model without mixers, block by block: a MoE block's and a dense block's."""
    from transformer_calc.estimators.training.fp8 import block_gemms

    T, ep, etp = par.tensor, par.expert, par.expert_tensor
    n_moe = m.n_moe_layers()
    blocks = [(moe, count) for moe, count in ((True, n_moe), (False, m.n_layers - n_moe)) if count]
    q_act = sum(count * activation_quantize_bytes(m, tr, par, moe) for moe, count in blocks) / m.n_layers
    q_w = sum(count * weight_quantize_bytes(block_gemms(m, moe, T, ep, etp)[0], tr) for moe, count in blocks) / m.n_layers
    return q_act, q_w
