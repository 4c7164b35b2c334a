"""Training FLOPs of a decoder-only transformer, per component, and what they cost in time.

Source: seed notes 003, "Training FLOPs" (QKV 6·B·S·D², scores 2·B·D·S², re-weighting 2·B·D·S²,
output projection 2·B·S·D², MLP 4·B·S·E·D², LM head 2·B·S·D·V, backward = 2 × forward),
generalized to GQA/MQA K/V widths, head_dim != D/A, gated MLPs (3 matrices), MoE (the router and
the top-k experts a token uses) and OPT's embedding projections. Korthikanti et al. 2022
("Reducing Activation Recomputation in Large Transformer Models", App. A) for model vs hardware
FLOPs; Chowdhery et al. 2022 (PaLM, App. B) for MFU; Hoffmann et al. 2022 (Chinchilla) for
compute-optimal sizing.

Conventions (where published tools differ):

- One multiply-add is 2 FLOPs; a matmul (m x k) @ (k x n) is 2·m·k·n FLOPs.
- Only matmuls are counted. Element-wise work (softmax, activations, norms, biases, residual adds,
  dropout, rotary rotation), the embedding lookup (a gather) and its gradient (a scatter-add),
  the loss and the optimizer step are not FLOPs here. This is what
  `torch.utils.flop_counter.FlopCounterMode` counts for eager attention (mm/addmm/bmm and their
  backward; an addmm's bias add is not counted): the totals are equal. (FlopCounterMode does not
  count CPU SDPA or `grouped_mm` MoE experts, and counts CUDA SDPA's backward as 2.5 x forward.)
- Backward = 2 × forward for every matmul: the input gradient and the weight gradient (for the
  attention core: the gradients of both operands) each cost one forward matmul (seed errata
  FLOP-3). Exact when every matmul input needs a gradient, as in pre-training.
- Attention scores and re-weighting are counted in full by default (S² per head, the causal mask
  applied afterwards, as eager PyTorch attention executes them). `causal=True` counts half, S²/2,
  the convention of FlashAttention's benchmarks (`flops(..., causal)`: `// (2 if causal else 1)`);
  with 2 FLOPs per multiply-add the halved count B·S²·A·h_d is still an exact integer. The exact
  number of unmasked entries, S·(S+1)/2, is not used.
- Model FLOPs: no recomputation. Hardware FLOPs add what activation recomputation executes again
  (Korthikanti et al. 2022, sec. 5): `full` one more forward of every transformer layer (the LM
  head and OPT's projections are outside the checkpointed layers), `selective` one more forward of
  the attention core (scores and re-weighting; softmax and dropout are not FLOPs). Korthikanti
  et al.'s eq. (8) for selective recomputation, 72·B·s·L·h²·(1 + s/(3h) + V/(12·L·h)), adds three
  times that forward; their HFU column uses it.
- Sliding-window and chunked layers (Mistral, Gemma 2/3, gpt-oss, Llama 4): by default counted
  as eager attention executes them, a full S x S masked (equal to FlopCounterMode); `windowed=True`
  counts what a windowed kernel computes, about S·W per head (`attended_pairs`).
- DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5; modeling_deepseek_v32.py): the lightning
  indexer of each indexer layer is counted apart (`indexer`), forward only: transformers runs it
  under `torch.no_grad()` (it is trained on its own KL loss, from a detached input, DeepSeek-V3.2 tech
  report §2.1). Its projections wq_b, wk, weights_proj cost 2 per weight per token; its scores
  q·k over every earlier token 2·H_I·d_I per pair and the head weighting 2·H_I per pair (S² pairs
  as eager executes them, halved when causal; a sparse kernel does not shrink the indexer). The
  main attention of a DSA layer reads only the index_topk tokens the indexer picks: counted so with
  `windowed=True` (a sparse kernel, FlashMLA's), as a full masked S x S by default (eager).
- MoE: the top-k routed experts a token is sent to, the shared experts every token passes through
  and the router. Hugging Face's Llama 4 code runs every expert on every token (FlopCounterMode sees
  n_experts, not top-k); tcalc counts the routed top-k, which is what the model needs.
- Parallel attention (GPT-J, PaLM) does not change the matmul count.
- Mixers other than attention (estimators/mixers/: Gated DeltaNet) count their projections, their
  depthwise conv and their mixing kernel as the reference torch implementation computes them
  (the chunked delta rule over the sequence padded to its chunk), plus the work FlopCounterMode
  cannot see (the chunked delta rule's triangular solves), each derived in the mixer's module.
  Their mixing kernel counts as an attention core (what selective recomputation repeats).
- FLOPs are exact ints; seconds, rates and ratios are floats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import TypeGuard

from transformer_calc.model.units import FLOPS_PER_MAC, SECONDS_PER_DAY, SECONDS_PER_HOUR  # noqa: F401 (SECONDS_PER_DAY: part of this module's API, docs/formulas.md)
from transformer_calc.model.config import ATTENTION_KINDS, LayerAttention, ModelConfig, Recompute, Workload
from transformer_calc.estimators.params import (
    GATED_MATRICES, PLAIN_MATRICES, count_params, latent_projections, layer_params, sliding_extra,
)
from transformer_calc.errors import TcalcError
from transformer_calc.estimators.deepseek_v4 import check as check_deepseek_v4, forward_flops as deepseek_v4_forward_flops
from transformer_calc.estimators.attention import attention_block
from transformer_calc.estimators.gemma_layers import layer_flops as varied_layer_flops
from transformer_calc.estimators.mla import indexer_flops as mla_indexer_flops
from transformer_calc.estimators.mixers import MIXERS
from transformer_calc.estimators.shared_block import shared_block_flops

BACKWARD_PER_FORWARD = 2  # input grad + weight grad, each one forward matmul
FORWARD_FLOPS_PER_PARAM = FLOPS_PER_MAC  # 2·N per token forward (one MAC per weight)
TRAIN_FLOPS_PER_PARAM = FORWARD_FLOPS_PER_PARAM * (1 + BACKWARD_PER_FORWARD)  # the 6 of 6·N
PALM_ATTENTION_FLOPS = 12  # PaLM App. B: 12·L·H·Q·T = 3 passes x 2 matmuls x 2 FLOPs/MAC
TOKENS_PER_PARAM_CHINCHILLA = 20  # Hoffmann et al. 2022 (Chinchilla: 70B params, 1.4T tokens)


@dataclass(frozen=True)
class LayerFlops:
    """Forward FLOPs of one transformer block over one step (B sequences of S tokens).

    A representative block: full attention, and the MoE MLP in a MoE model. Sliding-window,
    chunked and dense-MLP blocks differ; `StepFlops.layers` sums every block exactly.
    """

    qkv: int  # the Q, K, V projections: 2·B·S·D·(A + 2·n_kv)·h_d (MLA: its four projections)
    scores: int  # Q @ K^T per query head: 2·B·S²·A·h_d (half when causal)
    reweight: int  # softmax(scores) @ V per query head: 2·B·S²·A·h_v (half when causal)
    attn_out: int  # concat(heads) @ W_O: 2·B·S·A·h_v·D
    mlp: int  # the top-k experts' matrices: 2·B·S·D·F x (3 gated | 2) x k (a dense MLP: k = 1)
    shared_expert: int  # shared expert(s) on every token (+ its D x 1 gate)
    router: int  # MoE gate x @ W_router: 2·B·S·D·n_experts
    indexer: int = 0  # DSA's lightning indexer, forward only (not in `total`: it has no backward)

    @property
    def attention_core(self) -> int:
        """Scores and re-weighting: the S² terms (what selective recomputation repeats)."""
        return self.scores + self.reweight

    @property
    def attention(self) -> int:
        return self.qkv + self.attention_core + self.attn_out

    @property
    def mlp_total(self) -> int:
        return self.mlp + self.shared_expert + self.router

    @property
    def total(self) -> int:
        return self.attention + self.mlp_total


@dataclass(frozen=True)
class StepFlops:
    """FLOPs of one training step: forward and backward of B sequences of S tokens."""

    batch_size: int
    seq_len: int
    n_layers: int
    causal: bool
    windowed: bool
    layer: LayerFlops  # forward, one representative block (full attention; MoE MLP if MoE)
    layers: int  # forward FLOPs of all L blocks (every attention kind and MLP kind counted)
    attention_cores: int  # forward scores + re-weighting of all L blocks
    lm_head: int  # forward, h @ W_E^T: 2·B·S·d_embed·V
    embedding_projection: int  # forward, OPT project_in + project_out: 2 x 2·B·S·D·d_embed
    indexer: int = 0  # forward of every DSA indexer (no backward: run under no_grad)
    mixers: int = 0  # forward of the non-attention mixers (Gated DeltaNet, ...) of all blocks (in `layers`)
    shared_blocks: int = 0  # forward of every application of Zamba2's shared blocks (in `layers`)
    op_recompute: int = 0  # forward of the matmuls `--recompute op` repeats, all blocks (op_recompute_flops)

    @property
    def tokens(self) -> int:
        return self.batch_size * self.seq_len

    @property
    def forward(self) -> int:
        return self.layers + self.lm_head + self.embedding_projection + self.indexer

    @property
    def backward(self) -> int:
        return BACKWARD_PER_FORWARD * (self.forward - self.indexer)

    @property
    def total(self) -> int:
        """Model FLOPs of the step (Korthikanti et al. 2022): forward + backward, no recompute."""
        return self.forward + self.backward

    @property
    def per_token(self) -> int:
        """Model FLOPs per token; exact, since every term carries the factor B·S."""
        return self.total // self.tokens

    @property
    def attention_share(self) -> float:
        """Fraction of the model FLOPs in the attention core (scores + re-weighting)."""
        return self.attention_cores / self.forward

    def recompute_flops(self, recompute: Recompute) -> int:
        """FLOPs that activation recomputation executes again in the backward pass."""
        recompute = Recompute(recompute)  # "full" as well as Recompute.full
        if recompute is Recompute.full:
            return self.layers + self.indexer  # one more forward of every block (its indexer too), not of the head
        if recompute is Recompute.selective:
            return self.attention_cores
        if recompute is Recompute.op:
            return self.op_recompute
        return 0

    def hardware(self, recompute: Recompute, convention: str = "executed") -> int:
        """Hardware FLOPs (Korthikanti et al. 2022): model FLOPs + recomputed forward FLOPs.

        `executed` (default): what recomputation runs again, one forward of the attention core
        for selective. `paper`: Korthikanti et al.'s eq. (8) as printed, which adds the core three
        times (72·B·s·L·h²·(1 + s/(3h) + V/(12Lh))), so their HFU column can be reproduced.
        """
        if convention == "paper" and Recompute(recompute) is Recompute.selective:
            return self.total + 3 * self.attention_cores
        if convention not in ("executed", "paper"):
            raise ValueError(f"hfu convention ({str(convention)[:40]!r}) must be executed or paper")
        return self.total + self.recompute_flops(recompute)

    def as_dict(self) -> dict[str, int | float | bool]:
        """Flat breakdown in JSON order; FLOPs exact ints, the share a float."""
        out: dict[str, int | float | bool] = {
            "total": self.total,
            "forward": self.forward,
            "backward": self.backward,
            "per_token": self.per_token,
            "tokens": self.tokens,
            "causal": self.causal,
            "windowed": self.windowed,
            "attention_share": self.attention_share,
        }
        for recompute in (Recompute.none, Recompute.selective, Recompute.full):  # op: hardware(Recompute.op)
            out[f"hardware_{recompute.value}"] = self.hardware(recompute)
        out["layers"] = self.layers
        out["attention_cores"] = self.attention_cores
        out["lm_head"] = self.lm_head
        out["embedding_projection"] = self.embedding_projection
        out["indexer"] = self.indexer
        if self.mixers:  # hybrid models only: the key is absent for attention-only models
            out["mixers"] = self.mixers
        if self.shared_blocks:  # Zamba2 only
            out["shared_blocks"] = self.shared_blocks
        for f in fields(self.layer):
            out[f"per_layer_{f.name}"] = getattr(self.layer, f.name)
        out["per_layer"] = self.layer.total
        return out


def attended_pairs(m: ModelConfig, kind: LayerAttention, S: int, *, causal: bool, windowed: bool) -> tuple[int, int]:
    """(numerator, denominator) of the query-key pairs one head of one sequence scores, as a
    fraction of S² (kept exact: the FLOP counts below multiply before dividing).

    Full attention, or any layer when `windowed` is off (eager attention computes S x S and masks):
    S², half when causal. Windowed kernels: a sliding layer (window W) scores S·min(S, W) pairs,
    causal S·W - W²/2 once S >= W (query i sees min(i+1, W) keys, rounded as FlashAttention's
    benchmarks do); a chunked layer (chunk c) scores the sum of its chunks' squares (halved when
    causal).
    """
    if windowed and kind is LayerAttention.full and m.index_topk is not None:
        # DSA with a sparse kernel: query i attends min(i+1, index_topk) latent-cache tokens, as a
        # sliding layer of W = index_topk counts them (DeepSeek-V3.2 tech report §2.1)
        k = m.index_topk
        if not causal:
            return (S * min(S, k), 1)
        return ((S * S, 2) if S <= k else (2 * S * k - k * k, 2))
    if not windowed or kind is LayerAttention.full:
        return (S * S, 2 if causal else 1)
    if kind is LayerAttention.sliding:
        W = m.sliding_window or S
        if not causal:
            return (S * min(S, W), 1)
        return ((S * S, 2) if S <= W else (2 * S * W - W * W, 2))
    c = m.attention_chunk_size or S
    n, r = divmod(S, c)
    return (n * c * c + r * r, 2 if causal else 1)


def _core(m: ModelConfig, w: Workload, width: int, kind: LayerAttention, causal: bool, windowed: bool) -> int:
    """One of the two attention matmuls (scores: width h_d; re-weighting: h_v) for all heads."""
    num, den = attended_pairs(m, kind, w.seq_len, causal=causal, windowed=windowed)
    return FLOPS_PER_MAC * w.batch_size * m.n_heads * width * num // den  # exact: FLOPS_PER_MAC is even


def layer_flops(
    m: ModelConfig,
    w: Workload,
    *,
    causal: bool = False,
    windowed: bool = False,
    kind: LayerAttention = LayerAttention.full,
    moe: bool | None = None,
) -> LayerFlops:
    """Forward FLOPs of one block (seed "Training FLOPs", generalized; see the module docstring).

    Every projection costs 2·tokens·(its weights): 2·B·S·(W_Q + W_K + W_V) for the q/k/v
    projections whatever their form (GQA, MLA's low-rank down/up projections). GQA does not shrink
    the attention core: each of the A query heads attends over S keys of its shared K/V head, so
    scores and re-weighting scale with A, not n_kv. MLA scores over h_d = d_nope + d_rope and
    re-weights values of d_v.
    """
    B, S, D = w.batch_size, w.seq_len, m.d_model
    moe = m.is_moe if moe is None else moe
    p = layer_params(m, moe=moe)
    tokens = B * S
    n_matrices = GATED_MATRICES if m.gated_mlp else PLAIN_MATRICES  # W_up (+ W_gate), W_down
    if moe:
        mlp = FLOPS_PER_MAC * tokens * m.expert_d * m.moe_d_ff * n_matrices * m.experts_per_token  # active experts only
        mlp += FLOPS_PER_MAC * tokens * latent_projections(m)[0]  # LatentMoE: D -> ℓ before, ℓ -> D after
        shared = FLOPS_PER_MAC * tokens * D * m.shared_expert_d_ff * n_matrices
        shared += FLOPS_PER_MAC * tokens * D if m.shared_expert_gate else 0
        router = FLOPS_PER_MAC * tokens * D * m.n_experts if m.router else 0
    else:
        mlp = FLOPS_PER_MAC * tokens * D * m.d_ff * n_matrices
        shared = router = 0
    return LayerFlops(
        indexer=indexer_flops(m, w, causal=causal),
        qkv=FLOPS_PER_MAC * tokens * (p.attn_q + p.attn_k + p.attn_v),
        scores=_core(m, w, m.head_dim, kind, causal, windowed),
        reweight=_core(m, w, m.v_dim, kind, causal, windowed),  # (S x S) @ (S x h_v)
        attn_out=FLOPS_PER_MAC * tokens * p.attn_o,
        mlp=mlp,
        shared_expert=shared,
        router=router,
    )


def indexer_flops(m: ModelConfig, w: Workload, *, causal: bool = False) -> int:
    """Forward FLOPs of one DSA lightning indexer (`mla.indexer_flops`) over the pairs eager scores: S² (it
    scores them all and masks), halved when causal; 0 for a model without one."""
    pairs = attended_pairs(m, LayerAttention.full, w.seq_len, causal=causal, windowed=False)
    return mla_indexer_flops(m, w.batch_size * w.seq_len, w.batch_size, pairs)


def count_flops(m: ModelConfig, w: Workload, *, causal: bool = False, windowed: bool = False) -> StepFlops:
    """Exact matmul FLOPs of one training step, per component (conventions: module docstring).

    Blocks differ by attention kind (full, sliding, chunked: only the core differs, and only with
    `windowed`) and by MLP kind (MoE or dense); the sum over blocks is taken per kind.
    """
    if m.deepseek_v4 is not None:
        return _deepseek_v4_flops(m, w, causal=causal, windowed=windowed)
    B, S, D, V = w.batch_size, w.seq_len, m.d_model, m.vocab_size
    d_emb = m.d_embedding
    layer = layer_flops(m, w, causal=causal, windowed=windowed)
    n_moe = m.n_moe_layers()
    dense = layer_flops(m, w, causal=causal, windowed=windowed, moe=False) if m.is_moe else layer
    n_dense = m.n_layers - n_moe - m.n_channel_free_layers()  # one_mixer_per_layer: mixer blocks have no MLP
    mlp = n_moe * layer.mlp_total + n_dense * dense.mlp_total
    attention = cores = mixers = 0
    for kind in LayerAttention:
        n = m.n_attention_layers(kind)
        if n and kind in MIXERS:  # a mixer layer (estimators/mixers/): its projections, conv and core
            f_mix = MIXERS[kind].forward_flops(m, B, S)
            mixers += n * f_mix.total
            cores += n * (f_mix.core + f_mix.hidden)  # the mixing kernel: what selective recompute repeats
            if m.mixer_beside_attention:  # Falcon-H1: full attention beside the mixer in the same layer
                attention += n * layer.attention
                cores += n * layer.attention_core
        elif n and kind is not LayerAttention.none:  # none: an MLP block, no sequence mixer
            f = layer if kind is LayerAttention.full else layer_flops(m, w, causal=causal, windowed=windowed, kind=kind)
            attention += n * f.attention
            cores += n * f.attention_core
            if kind is LayerAttention.sliding:  # MiMo-V2-Flash: the sliding layers' extra K/V heads
                extra = sliding_extra(m, m.n_heads, m.n_kv_heads, m.kv_heads_of(kind))[0]
                attention += n * FLOPS_PER_MAC * B * S * extra
    projections = 2 * FLOPS_PER_MAC * B * S * D * d_emb if d_emb != D else 0
    if m.irregular_layers and not m.is_mla:  # Gemma 4: layers that differ by kind and depth
        core = {k: 2 * _core(m, w, m.kind_head_dim(k), k, causal, windowed) for k in ATTENTION_KINDS}  # scores + re-weighting
        attention, cores, extra_mlp, extra_projection = varied_layer_flops(m, w.batch_size * w.seq_len, core)
        mlp += extra_mlp
        projections += extra_projection
    # Zamba2's shared blocks (estimators/shared_block.py): every application, its attention full
    shared = shared_block_flops(m, B, S, attended_pairs(m, LayerAttention.full, S, causal=causal, windowed=False))
    cores += shared.core
    return StepFlops(
        batch_size=B,
        seq_len=S,
        n_layers=m.n_layers,
        causal=causal,
        windowed=windowed,
        layer=layer,
        layers=attention + mixers + mlp + shared.total,
        attention_cores=cores,
        lm_head=FLOPS_PER_MAC * B * S * d_emb * V,
        embedding_projection=projections,
        indexer=m.n_indexer_layers * layer.indexer,
        mixers=mixers,
        shared_blocks=shared.total,
        op_recompute=m.n_layers * op_recompute_flops(m, w) if op_recompute_refusal(m) is None else 0,
    )


def _deepseek_v4_flops(m: ModelConfig, w: Workload, *, causal: bool, windowed: bool) -> StepFlops:
    """DeepSeek-V4 (estimators/deepseek_v4.py `forward_flops`, docs/formulas.md §5.16): the executed
    convention only (every query scores the whole window and every compressed entry, as eager does);
    the indexers, and the compressors of layers too short to close a window, forward only (`indexer`). `layer` is a sliding-only block's (no compressor, no indexer, its
    hyper-connections in `layers` only); `layers` holds every block, the compressors, the
    hyper-connections and the hc_head."""
    if causal or windowed:
        from transformer_calc.estimators.support_table import Unpriced, refusal
        raise refusal(m, "causal or windowed attention FLOPs", Unpriced.windowed_flops)
    check_deepseek_v4(m)
    v4 = m.deepseek_v4
    assert v4 is not None  # count_flops sends only a DeepSeek-V4 model here
    B, S, D = w.batch_size, w.seq_len, m.d_model
    f = deepseek_v4_forward_flops(m, B, S)
    L, N = m.n_layers, B * S
    layer = LayerFlops(
        qkv=f.attention_proj // L, scores=FLOPS_PER_MAC * B * m.n_heads * S * S * m.head_dim,  # the window keys
        reweight=FLOPS_PER_MAC * B * m.n_heads * S * S * m.head_dim, attn_out=f.attn_out // L, mlp=f.experts // L,
        shared_expert=f.shared_expert // L, router=f.router // L,
        indexer=f.indexer // max(len(v4.csa_layer_ids), 1),
    )
    return StepFlops(
        batch_size=B, seq_len=S, n_layers=L, causal=False, windowed=False, layer=layer, layers=f.blocks,
        attention_cores=f.attention_cores, lm_head=FLOPS_PER_MAC * N * D * m.vocab_size, embedding_projection=0,
        indexer=f.indexer + f.idle_compressors,  # forward only: no gradient reaches them
    )


def op_recompute_refusal(m: ModelConfig) -> str | None:
    """Why `--recompute op` cannot price this model's blocks, or None when it can.

    torchtitan's per-op policy (torchtitan/parallelisms/parallelize_llama.py, `_custom_policy`)
    counts aten.mm calls in a block's forward and recomputes every second one. The count is
    defined for the blocks it was written for: bias-free standard attention (separate W_Q, W_K,
    W_V, W_O; a linear with a bias is aten.addmm, outside the count and the save list) and one
    dense MLP; MoE experts (grouped GEMMs), MLA's projections and non-attention mixers order
    their matmuls differently.
    """
    if m.is_moe:
        return "a MoE model (its experts' grouped GEMMs are outside torchtitan's mm count)"
    if not (block := attention_block(m)).op_recompute_priced:
        return f"{block.name} (its projections order the mm count differently)"
    if any(m.n_attention_layers(kind) for kind in MIXERS):
        return "non-attention mixer layers"
    if m.irregular_layers or m.shared_block_layer_ids or m.per_kind_attention:
        return "layers that differ from the base block (Gemma 4, Zamba2's shared blocks, MiMo-V2-Flash)"
    if m.qkv_bias or m.attn_out_bias or m.mlp_bias:
        return "linear biases (a biased linear is aten.addmm, outside the policy's mm count)"
    return None


def check_op_recompute(m: ModelConfig, recompute: Recompute, *, flash: bool = True, adapters: bool = False) -> None:
    """Refuse `--recompute op` where torchtitan's per-op policy is not what tcalc prices."""
    if Recompute(recompute) is not Recompute.op:
        return
    why = op_recompute_refusal(m)
    if why is None and not flash:
        why = "--flash off (the policy saves SDPA's flash/efficient kernel outputs; eager attention's bmm are recomputed)"
    if why is None and adapters:
        why = "adapters (the op policy is priced for full-weight training)"
    if why is not None:
        raise ValueError(f"--recompute op (torchtitan's per-op selective AC) is priced for bias-free dense "
                         f"Llama-style blocks with flash attention; here: {why}. Use --recompute selective or full")


def op_recompute_flops(m: ModelConfig, w: Workload) -> int:
    """Forward FLOPs one block repeats under torchtitan's per-op selective AC (`--recompute op`).

    The policy (torchtitan/parallelisms/parallelize_llama.py, `_custom_policy`, at the December
    2024 benchmark's commit and since) saves the output of every odd-numbered aten.mm of the
    block's forward and recomputes the even-numbered ones. A Llama block's matmuls in forward
    order (torchtitan/models/llama/model.py) are wq, wk, wv, wo, then w1, w3, w2 (gated:
    w2(silu(w1 x) * w3 x)) or fc1, fc2 (plain): the 2nd, 4th and 6th are W_K, W_O and one D x F
    MLP matrix (w3, or the plain MLP's down projection). SDPA's outputs are saved: the attention
    core is not recomputed. 2 FLOPs per weight per token: 2·B·S·(W_K + W_O + D·F).
    """
    p = layer_params(m, moe=False)
    return FLOPS_PER_MAC * w.batch_size * w.seq_len * (p.attn_k + p.attn_o + m.d_model * m.d_ff)


def model_flops(m: ModelConfig, w: Workload, *, causal: bool = False, windowed: bool = False) -> int:
    """Model FLOPs of one step: forward + backward, no recomputation."""
    return count_flops(m, w, causal=causal, windowed=windowed).total


def hardware_flops(
    m: ModelConfig, w: Workload, recompute: Recompute, *, causal: bool = False, windowed: bool = False
) -> int:
    """Hardware FLOPs of one step: model FLOPs plus what `recompute` executes again."""
    return count_flops(m, w, causal=causal, windowed=windowed).hardware(recompute)


# ============================================================================ closed forms, rules
def seed_model_flops(m: ModelConfig, w: Workload, *, lm_head: bool = False) -> int:
    """Seed eq. (model_flops): F ≈ 12·B·D·L·S·(S + (2+E)·D), with E·D = d_ff.

    Exact for an ungated MHA model without MoE (head_dim = D/A). The seed omits the LM head;
    `lm_head=True` adds its forward + backward, 6·B·S·D·V (seed errata FLOP-4; the seed's
    footnote prints only the forward part, 2·B·S·D·V).
    """
    B, S, L, D, F, V = w.batch_size, w.seq_len, m.n_layers, m.d_model, m.d_ff, m.vocab_size
    blocks = 12 * B * D * L * S * S + 12 * B * L * S * D * (2 * D + F)  # 12BDLS(S + 2D + ED)
    head = 6 * B * S * D * V if lm_head else 0
    return blocks + head


def _train_params(m: ModelConfig, include_embeddings: bool) -> int:
    """N of the 6·N rule: the parameters one token uses (MoE: top-k experts only)."""
    p = count_params(m)
    inactive = p.total - p.active
    n = p.total if include_embeddings else p.non_embedding
    return n - inactive


def six_n_flops_per_token(m: ModelConfig, *, include_embeddings: bool = True) -> int:
    """The rule of thumb 6·N FLOPs per token (seed eq. training_rule_of_thumb; Kaplan et al. 2020).

    2·N forward + 4·N backward: one multiply-add per weight per token. N is the parameter count
    (`count_params(m).total`; for a MoE, the active parameters: top-k experts); with
    `include_embeddings=False`, Kaplan et al.'s non-embedding N. It omits the attention core
    (the S² terms) and counts the embedding table as if it were a matmul (which, tied, it is:
    the LM head).
    """
    return TRAIN_FLOPS_PER_PARAM * _train_params(m, include_embeddings)


def palm_flops_per_token(m: ModelConfig, seq_len: int) -> int:
    """PaLM's MFU numerator per token: 6·N + 12·L·H·Q·T (Chowdhery et al. 2022, App. B).

    H heads of width Q (query heads and head_dim), T the sequence length, N all parameters
    (embeddings included: with N = 540.35e9, PaLM 540B's 238.3K tokens/s on 6144 TPU v4 chips
    gives the reported 46.2 % MFU; without the 4.7e9 embedding it would be 45.8 %). The attention
    term is the non-causal attention core, forward + backward.
    """
    L, H, Q, T = m.n_softmax_layers(), m.n_heads, m.head_dim, seq_len  # L: the layers with attention
    return six_n_flops_per_token(m) + PALM_ATTENTION_FLOPS * L * H * Q * T


# ============================================================================ training budget
def train_flops_for_tokens(
    m: ModelConfig,
    seq_len: int,
    tokens: int,
    *,
    exact: bool = True,
    causal: bool = False,
    recompute: Recompute = Recompute.none,
) -> int:
    """FLOPs to train on `tokens` tokens in sequences of `seq_len`.

    exact=True: the exact count per token (one step's FLOPs / (B·S); independent of B) times
    tokens, with the `causal` and `recompute` conventions. exact=False: the seed's rule of thumb
    6·N·tokens (model FLOPs; causal and recompute do not apply).
    """
    _check_positive_int("seq_len", seq_len, "give the training sequence length in tokens")
    _check_positive_int("tokens", tokens, "give the token budget, e.g. 300_000_000_000")
    recompute = Recompute(recompute)
    if not exact:
        if causal or recompute is not Recompute.none:
            raise ValueError(
                "causal and recompute apply to the exact count; use exact=True or drop them"
            )
        return six_n_flops_per_token(m) * tokens
    step = count_flops(m, Workload(seq_len=seq_len, batch_size=1), causal=causal)
    return step.hardware(recompute) // step.tokens * tokens


def training_time_s(
    total_flops: int | float, n_gpus: int, peak_flops_per_gpu: float, mfu: float
) -> float:
    """Wall-clock seconds to execute `total_flops` at utilization `mfu` of `n_gpus` peaks.

    The seed's rule, (achievable FLOP/s) x time = FLOPs, with achievable = mfu x peak x GPUs.
    Pass model FLOPs with an MFU, or hardware FLOPs with an HFU.
    """
    _check_non_negative("total_flops", total_flops, "give the training FLOPs")
    _check_gpus(n_gpus)
    _check_positive("peak_flops_per_gpu", peak_flops_per_gpu, "give the dense peak in FLOP/s")
    if not 0 < mfu <= 1:
        raise ValueError(f"mfu ({mfu}) must be in (0, 1]; give a fraction, e.g. 0.4 for 40 %")
    return total_flops / (n_gpus * peak_flops_per_gpu * mfu)


def gpu_hours(time_s: float, n_gpus: int) -> float:
    """GPU-hours of a run of `time_s` seconds on `n_gpus` GPUs (days: time_s / SECONDS_PER_DAY)."""
    _check_non_negative("time_s", time_s, "give the run time in seconds")
    _check_gpus(n_gpus)
    return time_s * n_gpus / SECONDS_PER_HOUR


# ============================================================================ compute-optimal sizing
@dataclass(frozen=True)
class ComputeOptimal:
    """A Chinchilla-optimal pair: about 20 tokens per parameter, C = 6·N·D_tokens."""

    params: int
    tokens: int

    @property
    def flops(self) -> int:
        return TRAIN_FLOPS_PER_PARAM * self.params * self.tokens


def chinchilla_for_params(n_params: int) -> ComputeOptimal:
    """Compute-optimal tokens for N parameters: 20·N (Hoffmann et al. 2022, an approximation)."""
    _check_positive_int("n_params", n_params, "give the parameter count")
    return ComputeOptimal(params=n_params, tokens=TOKENS_PER_PARAM_CHINCHILLA * n_params)


def chinchilla_for_flops(flop_budget: int | float) -> ComputeOptimal:
    """Compute-optimal N and tokens for a FLOP budget C (Hoffmann et al. 2022, approximated).

    With tokens = 20·N and C = 6·N·tokens = 120·N²: N = sqrt(C / 120), rounded down to the
    largest whole N whose run fits the budget (`.flops <= C`).
    """
    _check_positive("flop_budget", flop_budget, "give the training budget in FLOPs, e.g. 1e23")
    per_param_squared = TRAIN_FLOPS_PER_PARAM * TOKENS_PER_PARAM_CHINCHILLA  # 120
    budget = int(Decimal(repr(flop_budget)))  # 5.88e23 as written, not the double below it
    n = math.isqrt(budget // per_param_squared)
    if n < 1:
        raise ValueError(
            f"flop_budget ({flop_budget}) is below {per_param_squared} FLOPs, "
            "the cost of one parameter; give a larger budget"
        )
    return chinchilla_for_params(n)


# ============================================================================ utilization
def achieved_flops_per_gpu(flops_per_step: int | float, step_time_s: float, n_gpus: int) -> float:
    """Achieved FLOP/s per GPU: FLOPs of one (global) step / (step time x GPUs)."""
    _check_non_negative("flops_per_step", flops_per_step, "give the FLOPs of one step")
    _check_positive("step_time_s", step_time_s, "give the measured seconds per step")
    _check_gpus(n_gpus)
    return flops_per_step / (step_time_s * n_gpus)


def mfu(
    model_flops_per_step: int | float, step_time_s: float, n_gpus: int, peak_flops_per_gpu: float
) -> float:
    """Model FLOPs utilization: model FLOPs per step / (step time x GPUs x dense peak).

    Source: Chowdhery et al. 2022 (PaLM), sec. 4.1 and App. B; Korthikanti et al. 2022, App. A.
    `model_flops_per_step` counts the whole (global) batch the `n_gpus` GPUs process in one step.
    """
    _check_positive("peak_flops_per_gpu", peak_flops_per_gpu, "give the dense peak in FLOP/s")
    return achieved_flops_per_gpu(model_flops_per_step, step_time_s, n_gpus) / peak_flops_per_gpu


def hfu(
    hardware_flops_per_step: int | float,
    step_time_s: float,
    n_gpus: int,
    peak_flops_per_gpu: float,
) -> float:
    """Hardware FLOPs utilization: as `mfu`, with the FLOPs recomputation executes included."""
    return mfu(hardware_flops_per_step, step_time_s, n_gpus, peak_flops_per_gpu)


def mfu_from_throughput(
    flops_per_token: int | float, tokens_per_s: float, n_gpus: int, peak_flops_per_gpu: float
) -> float:
    """MFU from a throughput τ in tokens/s: flops_per_token x τ / (GPUs x dense peak).

    The seed's MFU formula multiplies the FLOPs of a whole batch by τ (seed errata FLOP-5);
    only FLOPs *per token* x tokens/s is a rate.
    """
    _check_non_negative("flops_per_token", flops_per_token, "give the FLOPs per token")
    _check_positive("tokens_per_s", tokens_per_s, "give the measured throughput in tokens/s")
    _check_gpus(n_gpus)
    _check_positive("peak_flops_per_gpu", peak_flops_per_gpu, "give the dense peak in FLOP/s")
    return flops_per_token * tokens_per_s / (n_gpus * peak_flops_per_gpu)


# ============================================================================ input checks
def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_positive(name: str, value: object, fix: str) -> None:
    if not _is_number(value) or value <= 0:
        raise ValueError(f"{name} ({value!r}) must be a positive number; {fix}")


def _check_non_negative(name: str, value: object, fix: str) -> None:
    if not _is_number(value) or value < 0:
        raise ValueError(f"{name} ({value!r}) must be a number >= 0; {fix}")


def _check_positive_int(name: str, value: object, fix: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} ({value!r}) must be a whole number >= 1; {fix}")


def _check_gpus(n_gpus: object) -> None:
    _check_positive_int("n_gpus", n_gpus, "give the number of GPUs (accelerator chips), e.g. 8")
