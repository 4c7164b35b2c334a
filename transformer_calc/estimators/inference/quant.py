"""Weight-only quantization formats with their real storage: codes, group scales, zero points.

A format stores a matrix in blocks of `block` consecutive weights along its input dimension (a
row of the transposed weight: ggml's `ne[0]`, GPTQ's group axis), each block taking `block_bytes`
bytes with its scales; plus fixed bytes per tensor. A matrix of `out` rows and `in` inputs then
takes out·ceil(in/block)·block_bytes bytes (exact when `block` divides `in`; GGUF falls back to
another type as llama.cpp does, the other formats pad a tensor-parallel shard to whole blocks).
Tensors a format leaves unquantized keep `rest_bits` per element.

| format | block | bytes per block | layout | source |
| --- | --- | --- | --- | --- |
| gptq-int4 | 128 | 64 + 2 + 0.5, and 4 per input per matrix | int4 codes, one fp16 scale and one int4 zero point per group and output column (zeros packed 8 to an int32), an int32 g_idx per input | AutoGPTQ / transformers GPTQ `QuantLinear`: qweight int32 [in/8, out], qzeros int32 [in/g, out/8], scales fp16 [in/g, out], g_idx int32 [in] |
| awq-int4 | 128 | 64 + 2 + 0.5 | as GPTQ without g_idx | AutoAWQ `WQLinear_GEMM`: qweight int32 [in, out/8], qzeros int32 [in/g, out/8], scales fp16 [in/g, out] |
| q8_0 | 32 | 34 | fp16 d + 32 int8 | ggml-common.h `block_q8_0` |
| q4_k | 256 | 144 | fp16 d, dmin + 12 B of 6-bit scales/mins + 128 B of 4-bit codes | `block_q4_K` |
| q5_k | 256 | 176 | as q4_k + 32 B of high bits | `block_q5_K` |
| q6_k | 256 | 210 | 128 B low 4 bits + 64 B high 2 bits + 16 int8 scales + fp16 d | `block_q6_K` |
| q5_0, q5_1 | 32 | 22, 24 | llama.cpp's fallbacks for q4_k, q5_k when 256 does not divide a row | `block_q5_0`, `block_q5_1` |
| mxfp4 | 32 | 17 | 32 E2M1 codes (16 B) + one E8M0 scale | OCP Microscaling Formats (MX) v1.0 (MXFP4: k = 32, E8M0 scale); gpt-oss `*_blocks` uint8 [.., 16] + `*_scales` uint8 |
| nvfp4 | 16 | 9, and 8 per tensor | 16 E2M1 codes (8 B) + one FP8 E4M3 scale; fp32 `weight_scale_2` and `input_scale` per tensor | NVIDIA TensorRT Model Optimizer NVFP4 checkpoints |

So GPTQ and AWQ store 66.5 B per 128 weights (4.156 bits per weight) plus, for GPTQ, 4 B per input
of every matrix; MXFP4 4.25 and NVFP4 4.5 bits per weight; Q8_0 8.5, Q4_K 4.5, Q5_K 5.5, Q6_K 6.5625.

Which tensors each format quantizes (the rest stays at `rest_bits`):

- gptq-int4, awq-int4, nvfp4: every linear layer of the decoder blocks (Q, K, V, O or MLA's
  projections, the MLP or every expert and shared expert); not the embedding, the LM head, the
  router, norms or biases (AutoGPTQ, AutoAWQ and ModelOpt defaults). The rest is fp16 (GPTQ, AWQ)
  or bf16 (NVFP4).
- mxfp4 (gpt-oss as published): the routed experts' matrices only; a dense model: every block
  linear. The rest bf16, expert biases included.
- GGUF q8_0, q4_k_m, q5_k_m: llama.cpp's `llama_tensor_get_type` (src/llama-quant.cpp), which
  this module follows for non-Falcon architectures: every 2-D weight except norms, the router
  (`ffn_gate_inp`) and learned positions at the base type (q8_0, q4_k, q5_k); the LM head at
  q6_k (q8_0 for q8_0, and when 256 does not divide its row); `attn_v` (MLA: `attn_kv_b`) and
  `ffn_down` at q6_k in the layers where use_more_bits(i, n) = i < n/8 or i >= 7n/8 or
  (i - n/8) % 3 == 2 holds (n: the count of such tensors: for ffn_down, routed plus shared
  tensors); a 70B llama (80 layers, GQA) takes q5_k for its other `attn_v`; an 8-expert model
  stores `attn_v` and `attn_k` at q8_0 and `attn_output` at q5_k (q4_k_m). A row not divisible by
  256 falls back to q5_0 (q4_k), q5_1 (q5_k), q8_0 (q6_k); unquantized tensors are f32 (the
  converter writes 1-D tensors and the router in f32). Whole model on one GPU only (llama.cpp
  splits a GGUF by layers, not tensor-parallel).
- Gemma 4 (inference/gemma_layers.py `gemma4_matrices`): each layer's own matrices (its kind's
  head width and K/V heads, no W_V with k = v, no W_K/W_V on a kv-shared layer, the double-wide
  MLP, the per-layer gate and projection `inp_gate`, `proj`, which the linear formats quantize with
  the other decoder-layer Linear modules); `per_layer_model_proj` and the per-layer table
  `per_layer_token_embd` stay at rest_bits outside GGUF and take the base type in GGUF (an
  assumption: llama.cpp names no rule for them). Checked against published Gemma 4 31B GGUF sizes
  (docs/formulas.md).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from transformer_calc.model.config import ATTENTION_KINDS, ModelConfig
from transformer_calc.estimators.attention import attention_block
from transformer_calc.estimators.gemma_layers import per_layer_table_rank
from transformer_calc.estimators.inference import gemma_layers as varied_layers
from transformer_calc.estimators.mixers import MIXERS, require_uniform_blocks
from transformer_calc.estimators.inference.rank_parts import Matrix, QuantizedWeights  # noqa: F401  (re-exported)
from transformer_calc.estimators.params import (
    GATED_MATRICES,
    PLAIN_MATRICES,
    count_params,
    kv_heads_per_rank,
    mlp_params_per_expert,
    shard_params,
    tensor_parallel_params,
)

if TYPE_CHECKING:  # a checkpoint's module: only a source with a checkpoint imports it (issue 39)
    from transformer_calc.model.checkpoint import StoredWeights

MAX_LAYERS = 10_000  # the most layers whose matrices are listed one by one (bounds the loop)


@dataclass(frozen=True)
class Block:
    """`block` weights stored in `block_bytes` bytes (codes and their scales)."""

    name: str
    block: int
    block_bytes: int


GPTQ_INT4 = Block("gptq-int4", 128, 64 + 2)  # codes + fp16 scale; the packed zero is added apart
AWQ_INT4 = Block("awq-int4", 128, 64 + 2)
INT4_ZERO_BITS = 4  # one int4 zero point per group and output column, packed 8 to an int32
G_IDX_BYTES = 4  # GPTQ's int32 group index per input feature (act-order)
Q8_0 = Block("q8_0", 32, 34)
Q4_K = Block("q4_k", 256, 144)
Q5_K = Block("q5_k", 256, 176)
Q6_K = Block("q6_k", 256, 210)
Q5_0 = Block("q5_0", 32, 22)
Q5_1 = Block("q5_1", 32, 24)
MXFP4 = Block("mxfp4", 32, 16 + 1)
NVFP4 = Block("nvfp4", 16, 8 + 1)
NVFP4_TENSOR_BYTES = 4 + 4  # fp32 weight_scale_2 and input_scale per quantized tensor
F16_BITS, F32_BITS = 16, 32
OUTSIDE_BLOCKS = ("output", "token_embd", "per_layer_model_proj", "per_layer_token_embd")  # not decoder-block linears
GGUF_FALLBACK = {"q4_k": Q5_0, "q5_k": Q5_1, "q6_k": Q8_0}

# format -> (its block, what it quantizes, bits of the tensors it leaves)
FORMATS: dict[str, tuple[Block, str, int]] = {
    "gptq-int4": (GPTQ_INT4, "linear", F16_BITS),
    "awq-int4": (AWQ_INT4, "linear", F16_BITS),
    "nvfp4": (NVFP4, "linear", F16_BITS),
    "mxfp4": (MXFP4, "experts", F16_BITS),
    "q8_0": (Q8_0, "gguf", F32_BITS),
    "q4_k_m": (Q4_K, "gguf", F32_BITS),
    "q5_k_m": (Q5_K, "gguf", F32_BITS),
}
FORMAT_ALIASES = {"gptq": "gptq-int4", "awq": "awq-int4", "gguf-q8_0": "q8_0", "gguf-q4_k_m": "q4_k_m",
                  "gguf-q5_k_m": "q5_k_m", "q4_k": "q4_k_m", "q5_k": "q5_k_m"}


def block_matrices(m: ModelConfig, T: int = 1, ep: int = 1) -> list[Matrix]:
    """The linear layers of the decoder blocks held by one rank, layer by layer (routed experts:
    one Matrix per layer holding every local expert), plus the embedding and the LM head (Gemma 4: its
    layer classes' own matrices and the per-layer embedding tensors, inference/gemma_layers.py)."""
    if m.n_layers > MAX_LAYERS:
        raise ValueError(f"n_layers ({m.n_layers}) is above {MAX_LAYERS:,}, the most a quantization format is costed for")
    return varied_layers.block_matrices(m, T, ep, uniform_matrices)


def uniform_matrices(m: ModelConfig, T: int = 1, ep: int = 1) -> list[Matrix]:
    """`block_matrices` of a model whose blocks all take one layer's shapes: per layer its mixer's or its
    attention block's tensors (or both), then its MLP's or its experts' and shared experts'."""
    require_uniform_blocks(m, "a quantized weight format")  # every block from one layer's shapes
    D, A = m.d_model, m.n_heads
    q_rank, kv_rank = A // T, kv_heads_per_rank(m.n_kv_heads, T, "n_kv_heads")
    gated = m.gated_mlp
    out: list[Matrix] = []
    moe_layers = set(_moe_layer_ids(m))
    n_local = m.n_experts // ep if m.is_moe else 0
    pattern = m.attention_pattern
    for i in range(m.n_layers):  # bounded by the model's layer count (a config, validated)
        kind = pattern[i % len(pattern)]
        if kind in MIXERS:  # a hybrid's mixer layer: its Linear modules but the per-head gates
            out += [Matrix(f"ssm_{x.name}", x.d_in, x.d_in * x.d_out, i) for x in MIXERS[kind].linears(m, T)
                    if not x.per_head]
        attends = kind in ATTENTION_KINDS or (kind in MIXERS and m.mixer_beside_attention)  # Falcon-H1: both
        if attends:  # its softmax-attention block's tensors (estimators/attention.py)
            out += [Matrix(name, d_in, n, i) for name, d_in, n in attention_block(m).matrices(m, q_rank, kv_rank)]
        if m.n_channel_free_layers(i, i + 1):
            continue  # a layer without a channel block (Nemotron-H's mixer blocks): no MLP
        if i in moe_layers:
            Fe = m.moe_d_ff // T
            if gated:
                out.append(Matrix("ffn_gate_exps", D, n_local * D * Fe, i, True))
            out += [Matrix("ffn_up_exps", D, n_local * D * Fe, i, True),
                    Matrix("ffn_down_exps", Fe, n_local * Fe * D, i, True)]
            Fs = m.shared_expert_d_ff // T
            if Fs:
                if gated:
                    out.append(Matrix("ffn_gate_shexp", D, D * Fs, i))
                out += [Matrix("ffn_up_shexp", D, D * Fs, i), Matrix("ffn_down_shexp", Fs, Fs * D, i)]
        else:
            F = m.d_ff // T
            if gated:
                out.append(Matrix("ffn_gate", D, D * F, i))
            out += [Matrix("ffn_up", D, D * F, i), Matrix("ffn_down", F, F * D, i)]
    d_emb = m.d_embedding
    rows = -(-m.vocab_size // T)
    out.append(Matrix("output", d_emb, rows * d_emb, None))
    if not m.tied_embeddings:
        out.append(Matrix("token_embd", d_emb, rows * d_emb, None))
    return out


def _moe_layer_ids(m: ModelConfig) -> list[int]:
    if not m.is_moe:
        return []
    return [i for i in range(m.n_layers) if m.n_moe_layers(i, i + 1)]


def resolve_format(name: str) -> str | None:
    """The canonical format name, or None when `name` is not a quantization format."""
    key = name.strip().lower()
    key = FORMAT_ALIASES.get(key, key)
    return key if key in FORMATS else None


def use_more_bits(i: int, n: int) -> bool:
    """llama.cpp's choice of the layers that get more bits (src/llama-quant.cpp), with C's
    integer division and remainder (truncating toward zero)."""
    def c_mod(a: int, b: int) -> int:
        r = abs(a) % b
        return r if a >= 0 else -r
    return i < n // 8 or i >= 7 * n // 8 or c_mod(i - n // 8, 3) == 2


def _gguf_types(m: ModelConfig, fmt: str, matrices: list[Matrix]) -> list[Block]:
    """The ggml block type of each matrix under llama.cpp's rules for `fmt` (module docstring)."""
    base = FORMATS[fmt][0]
    n_v = sum(1 for x in matrices if x.name in ("attn_v", "attn_kv_b"))
    n_down = sum(1 for x in matrices if x.name.startswith("ffn_down"))
    eight_experts = m.is_moe and m.n_experts == 8
    is_70b = m.n_layers == 80 and m.n_kv_heads < m.n_heads and not m.is_moe  # llama.cpp LLM_TYPE_70B
    i_v = i_down = 0
    types: list[Block] = []
    for x in matrices:
        t = base
        if x.name == "output" or (x.name == "token_embd" and m.tied_embeddings):
            t = Q8_0 if base is Q8_0 or x.inputs % base.block else Q6_K
        elif x.name == "token_embd":
            t = base
        elif x.name in ("attn_v", "attn_kv_b"):
            if fmt in ("q4_k_m", "q5_k_m") and use_more_bits(i_v, n_v):
                t = Q6_K
            if is_70b and t is Q4_K:
                t = Q5_K
            if eight_experts:
                t = Q8_0
            i_v += 1
        elif x.name == "attn_k" and eight_experts:
            t = Q8_0
        elif x.name.startswith("ffn_down"):
            layer = x.layer if m.is_moe and x.layer is not None else i_down  # MoE: parsed from the name
            if fmt in ("q4_k_m", "q5_k_m") and use_more_bits(layer, n_down):
                t = Q6_K
            i_down += 1
        elif x.name == "attn_output" and eight_experts and fmt == "q4_k_m":
            t = Q5_K
        if x.inputs % t.block:  # tensor_type_fallback
            t = GGUF_FALLBACK.get(t.name, t)
            if x.inputs % t.block:
                t = Block("f16", 1, 2)
        types.append(t)
    return types


def _blocks(x: Matrix, b: Block) -> int:
    """Blocks of a matrix: its rows times ceil(inputs / block). A tensor-parallel shard whose inputs
    the block does not divide (gpt-oss's 2880-wide experts over T = 8: 360 inputs) is padded to
    whole blocks, as engines pad such shards (an upper bound of a few bytes per row)."""
    rows = x.elements // x.inputs if x.inputs else 0
    return rows * -(-x.inputs // b.block)


@functools.lru_cache(maxsize=64)
def quantized_weights(m: ModelConfig, fmt: str, T: int = 1, ep: int = 1) -> QuantizedWeights:
    """Bytes of one of T tensor-parallel (ep expert-parallel) ranks' weights stored in `fmt`."""
    block, scope, rest_bits = FORMATS[fmt]
    if scope == "gguf":
        # llama.cpp's per-tensor rules (src/llama-quant.cpp llama_tensor_get_type) for a mixer's tensors (ssm_in,
        # ssm_conv1d, ssm_out, ...) differ by mixer and llama.cpp version: not modeled, refused by the table
        from transformer_calc.estimators.support_table import Unpriced, refuse

        refuse(m, f"the GGUF (llama.cpp) format {fmt}", Unpriced.gguf)
    if scope == "gguf" and (T > 1 or ep > 1):
        raise ValueError(f"{fmt} is a GGUF (llama.cpp) format, split by layers, not tensor- or expert-parallel; use T = 1 and ep = 1")
    matrices = block_matrices(m, T, ep)
    in_blocks = [x for x in matrices if x.name not in OUTSIDE_BLOCKS]
    if scope == "experts" and m.is_moe:
        in_blocks = [x for x in in_blocks if x.expert]
    if scope == "gguf":
        chosen = list(zip(matrices, _gguf_types(m, fmt, matrices)))
    else:
        chosen = [(x, block) for x in in_blocks]
    q_params = sum(x.elements for x, b in chosen if b.block > 1)
    q_bytes: Fraction = sum((Fraction(_blocks(x, b) * b.block_bytes) for x, b in chosen), Fraction(0))
    if fmt == "gptq-int4" or fmt == "awq-int4":  # the packed int4 zero point per group and column
        q_bytes += sum(Fraction(_blocks(x, b) * INT4_ZERO_BITS, 8) for x, b in chosen)
    if fmt == "gptq-int4":
        q_bytes += sum(G_IDX_BYTES * x.inputs for x, _ in chosen)
    if fmt == "nvfp4":
        q_bytes += NVFP4_TENSOR_BYTES * len(chosen)
    total_params = tensor_parallel_params(m, T, ep)
    other = total_params - sum(x.elements for x, _ in chosen)
    if other < 0:  # pragma: no cover - the matrices are a subset of the parameters
        raise AssertionError("quantized more elements than the model holds")
    other_bytes = -(-other * rest_bits // 8)
    quantized = -(-q_bytes.numerator // q_bytes.denominator)
    expert_bytes, expert_params = _one_expert(m, chosen, T, ep, rest_bits)
    gathered = _gathered_bytes(m, chosen, T, rest_bits)
    return QuantizedWeights(
        format=fmt,
        quantized_params=q_params,
        other_params=other,
        quantized_bytes=quantized,
        other_bytes=other_bytes,
        total_bytes=quantized + other_bytes,
        expert_bytes=expert_bytes,
        expert_params=expert_params,
        gathered_bytes=gathered,
        bits_per_quantized_weight=float(8 * q_bytes / q_params) if q_params else 0.0,
    )


def _one_expert(m: ModelConfig, chosen: list[Any], T: int, ep: int, rest_bits: int) -> tuple[Fraction, int]:
    """(bytes, parameters) of one routed expert of one layer, as stored (biases at rest_bits): the mean over the
    MoE layers (GGUF stores some layers' experts at more bits), so that k idle experts in every layer cost exactly
    what they store in all."""
    expert_bytes, expert_params = Fraction(0), 0
    if not (m.is_moe and m.n_moe_layers()):
        return expert_bytes, expert_params
    experts = [(x, b) for x, b in chosen if x.expert]
    n_local, n_moe = m.n_experts // ep, m.n_moe_layers()
    for x, b in experts:
        expert_bytes += Fraction(_blocks(x, b) * b.block_bytes, n_local * n_moe)
        expert_params += x.elements // (n_local * n_moe)
    n_in = (GATED_MATRICES if m.gated_mlp else PLAIN_MATRICES) - 1
    bias = (n_in * m.moe_d_ff // T + m.d_model) if m.mlp_bias else 0
    if not experts:  # experts left unquantized
        weights = (n_in + 1) * m.d_model * (m.moe_d_ff // T)
        expert_bytes, expert_params = Fraction(weights * rest_bits, 8), weights
    return expert_bytes + Fraction(bias * rest_bits, 8), expert_params + bias


def _gathered_bytes(m: ModelConfig, chosen: list[Any], T: int, rest_bits: int) -> int:
    """Bytes of the rows a token gathers from the embedding tables (token, learned positions, Gemma 4's
    per-layer table, as roofline's plain-dtype `gathered_params` counts them), as stored."""
    embedding = [(x, b) for x, b in chosen if x.name == "token_embd"]
    if embedding:
        x, b = embedding[0]
        gathered = _blocks(x, b) * b.block_bytes
    elif m.tied_embeddings:
        gathered = 0
    else:
        gathered = -(-(-(-m.vocab_size // T) * m.d_embedding) * rest_bits // 8)
    gathered += -(-count_params(m).position * rest_bits // 8)
    table = [(x, b) for x, b in chosen if x.name == "per_layer_token_embd"]
    if table:
        gathered += _blocks(table[0][0], table[0][1]) * table[0][1].block_bytes
    else:  # Gemma 4's per-layer table at the rest's bits (0 rows without per-layer inputs)
        gathered += -(-per_layer_table_rank(m, T) * rest_bits // 8)
    return gathered


def stored_shard(m: ModelConfig, stored: StoredWeights, T: int = 1, ep: int = 1, etp: int = 1) -> QuantizedWeights:
    """Bytes of one of T tensor-parallel (ep expert-parallel) ranks' weights as a checkpoint
    stores them (its headers' bytes, `checkpoint.StoredWeights`), scales included.

    Each group of the checkpoint is split as its parameters are (`params.shard_params`,
    Megatron-LM's layout): the token table and positions by the rank's share of them, the routed
    experts by ep·etp, the rest of the language model by the rank's share of its parameters (norms
    and the router are replicated, so this is exact at T = 1 and within the replicated bytes'
    share otherwise); vision/audio towers are held whole on every rank (none with text_only); MTP modules are not
    loaded. `etp`: each routed expert's tensor-parallel width (`inference.expert_layout`). At
    T = ep = 1 the total is the checkpoint's bytes less its MTP modules, exactly."""
    full = count_params(m)
    emb_all = full.embedding + full.position + full.embedding_projection + full.embedding_norm
    n_moe = m.n_moe_layers() if m.is_moe else 0
    per_expert = sum(mlp_params_per_expert(m)) if m.is_moe else 0
    experts_all = n_moe * m.n_experts * per_expert
    rest_all = full.total - emb_all - experts_all
    if T == 1 and ep == 1:
        emb_rank, experts_rank, rest_rank = emb_all, experts_all, rest_all
    else:
        sh = shard_params(m, T, ep, etp)
        emb_rank = sh.embedding
        experts_rank = n_moe * sh.routed_experts
        rest_rank = sh.total(m) - emb_rank - experts_rank

    def part(nbytes: int, rank: int, whole: int) -> Fraction:
        return Fraction(nbytes * rank, whole) if whole else Fraction(nbytes)

    emb = part(stored.embedding_bytes, emb_rank, emb_all)
    experts = part(stored.experts_bytes, experts_rank, experts_all)
    rest = part(stored.rest_bytes, rest_rank, rest_all)
    # the towers whole on every rank, unless the model drops them (Towers.text_only: the language model alone)
    towers = 0 if m.towers is not None and m.towers.text_only else stored.towers_bytes
    total = emb + experts + rest + towers
    one_expert = Fraction(stored.experts_bytes, n_moe * m.n_experts * etp) if experts_all else Fraction(0)
    whole = -(-total.numerator // total.denominator)
    return QuantizedWeights(
        format="checkpoint",
        quantized_params=0,
        other_params=emb_rank + experts_rank + rest_rank,
        quantized_bytes=0,
        other_bytes=whole,
        total_bytes=whole,
        expert_bytes=one_expert,
        expert_params=per_expert // etp if experts_all else 0,
        gathered_bytes=-(-emb.numerator // emb.denominator),
        bits_per_quantized_weight=0.0,
    )
