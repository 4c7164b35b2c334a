"""DeepSeek-V4's parameters, forward FLOPs and decode state, part by part (docs/formulas.md §5.16).

Source: transformers 5.23 models/deepseek_v4/modeling_deepseek_v4.py (the class named at each term)
and the DeepSeek-V4 technical report §2 (mHC §2.2, CSA §2.3.1, HCA §2.3.2, hash MoE §2.1).

Conventions: every parameter tensor once, as `sum(p.numel() for p in model.parameters())` counts it on
the model transformers builds (DeepseekV4ForCausalLM); buffers are not parameters: the hash router's
frozen `tid2eid` table (vocab_size x top-k token -> expert ids), the top-k router's
`e_score_correction_bias` and the rotary frequencies. Every linear of the attention, the compressors,
the indexer and the experts is built without a bias whatever `attention_bias` says; only the shared
expert (DeepseekV4MLP) takes `mlp_bias`. The multi-token-prediction layer the checkpoint carries
(`num_nextn_predict_layers`) is not built by transformers and not counted.

`tcalc params` (T = 1; `model_params`) and the FLOPs (`tcalc flops`, `mfu`; the default executed
convention: `step_flops`) price DeepSeek-V4, the whole-model counts params.py and flops.py pick for it;
`cache_elements` is its decode state, which the inference roofline holds as its KV cache
(estimators/inference/roofline.py `_deepseek_v4_shard`: `tcalc inference`, `serve`, `sweep` at T = 1, the
routed experts over ep GPUs; `check_layout` refuses T > 1): every other estimate refuses the model by name
(`ModelConfig.irregular_layers`, `require_deepseek_v4_priced`).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer_calc.errors import TcalcError
from transformer_calc.estimators.counts import LayerFlops, LayerParams, ModelParams, StepFlops
from transformer_calc.estimators.primitives import norm_params
from transformer_calc.model.config import DeepseekV4Blocks, ModelConfig, Workload

GATED_MATRICES = 3  # gate, up, down (SwiGLU; DeepseekV4Experts packs gate and up in one gate_up_proj)
HC_SCALES = 3  # DeepseekV4HyperConnection.scale: one scale each for the pre, post and comb weights
CSA_SERIES = 2  # a CSA compressor projects two overlapping series Ca, Cb per token (2·h_d wide)
KV_AND_GATE = 2  # a compressor buffers each open-window token's kv and its gate


@dataclass(frozen=True)
class V4LayerParts:
    """One DeepSeek-V4 layer's parameters by part (all layers share this shape except the compressor
    and the indexer, which depend on the layer's attention kind)."""

    attn_q: int  # q_a_proj D x r_q + q_b_proj r_q x A·h_d
    attn_kv: int  # kv_proj D x h_d: one head read as key and as value (shared-KV MQA)
    attn_o: int  # grouped o_a_proj (A·h_d/g) x g·d_g, and o_b_proj g·d_g x D
    latent_norms: int  # q_a_norm RMSNorm(r_q) + kv_norm RMSNorm(h_d) (q_b_norm has no weight)
    sinks: int  # one learned sink logit per query head
    experts: int  # E routed experts: gate_up_proj E x 2F x D, down_proj E x D x F
    shared_expert: int  # DeepseekV4MLP of moe_d_ff (+ biases with mlp_bias)
    router: int  # gate weight E x D (hash and top-k routers alike)
    norms: int  # input_layernorm, post_attention_layernorm
    hyper_connections: int  # attn_hc and ffn_hc


def _v4(m: ModelConfig) -> DeepseekV4Blocks:
    if m.deepseek_v4 is None:
        raise ValueError("not a DeepSeek-V4 model")
    return m.deepseek_v4


def hyper_connection_params(m: ModelConfig) -> int:
    """One DeepseekV4HyperConnection (mHC, report §2.2): fn (2 + n)·n x n·D maps the n flattened
    streams to the pre (n), post (n) and comb (n x n) weights, base (2 + n)·n, scale 3."""
    n, D = _v4(m).hc_mult, m.d_model
    mixes = (2 + n) * n  # pre + post + comb
    return mixes * n * D + mixes + HC_SCALES


def hyper_head_params(m: ModelConfig) -> int:
    """DeepseekV4HyperHead, the final collapse of the n streams: hc_fn n x n·D, hc_base n, hc_scale 1."""
    n, D = _v4(m).hc_mult, m.d_model
    return n * n * D + n + 1


def compressor_params(m: ModelConfig, csa: bool) -> int:
    """One layer's compressor (its indexer apart). DeepseekV4CSACompressor (report §2.3.1, eqs. 9-12):
    kv_proj and gate_proj D x 2·h_d (the two series Ca, Cb), position_bias m x 2·h_d, kv_norm
    RMSNorm(h_d). DeepseekV4HCACompressor (§2.3.2, eqs. 20-23): kv_proj and gate_proj D x h_d,
    position_bias m' x h_d, kv_norm RMSNorm(h_d)."""
    v4, D, hd = _v4(m), m.d_model, m.head_dim
    width = CSA_SERIES * hd if csa else hd
    rate = v4.csa_compress_rate if csa else v4.hca_compress_rate
    return 2 * D * width + rate * width + hd


def indexer_params(m: ModelConfig) -> int:
    """One CSA layer's lightning indexer, DeepseekV4Indexer (report §2.3.1, eqs. 13-17): its own
    compressor at d_I (kv_proj, gate_proj D x 2·d_I, position_bias m x 2·d_I, kv_norm RMSNorm(d_I)),
    q_b_proj r_q x H_I·d_I (queries from the attention's q_lora_rank latent) and the scorer's
    weights_proj D x H_I."""
    v4, D = _v4(m), m.d_model
    d_i, h_i = v4.index_head_dim, v4.index_n_heads
    compressor = 2 * D * CSA_SERIES * d_i + v4.csa_compress_rate * CSA_SERIES * d_i + d_i
    return compressor + v4.q_lora_rank * h_i * d_i + D * h_i


def layer_parts(m: ModelConfig) -> V4LayerParts:
    """DeepseekV4DecoderLayer's parameters but for the compressor and the indexer."""
    v4 = _v4(m)
    D, A, hd, r_q, F, E = m.d_model, m.n_heads, m.head_dim, v4.q_lora_rank, m.moe_d_ff, m.n_experts
    g, d_g = v4.o_groups, v4.o_lora_rank
    shared_bias = (2 * F + D) if m.mlp_bias else 0  # DeepseekV4MLP: gate/up/down take mlp_bias
    return V4LayerParts(
        attn_q=D * r_q + r_q * A * hd,
        attn_kv=D * hd,
        # DeepseekV4GroupedLinear(A·h_d/g, g·d_g, g): weight g·d_g x A·h_d/g = A·h_d·d_g; o_b_proj g·d_g x D
        attn_o=A * hd * d_g + g * d_g * D,
        latent_norms=r_q + hd,
        sinks=A,
        experts=E * GATED_MATRICES * D * F,
        shared_expert=GATED_MATRICES * D * F + shared_bias,
        router=E * D,
        norms=2 * D,
        hyper_connections=2 * hyper_connection_params(m),
    )


@dataclass(frozen=True)
class V4Cache:
    """Elements transformers' DeepSeek-V4 cache holds for one sequence at `context_len` tokens, by part,
    summed over the layers (modeling_deepseek_v4.py DeepseekV4HCACache, DeepseekV4CSACache; sliding-only
    layers: cache_utils.py DynamicSlidingWindowLayer). All in the model's dtype."""

    context_len: int
    window: int  # the last W - 1 tokens' K = V head: h_d each (a sliding-only layer keeps K and V apart: 2·h_d)
    compressed: int  # compressed entries so far, floor(c / m) per CSA layer (h_d + the indexer's d_I), floor(c / m') per HCA (h_d)
    buffers: int  # the c mod m tokens waiting for their window: kv and gate, 2·h_d (+ 2·d_I) per CSA token, h_d per HCA
    overlap: int  # CSA: the last full window's Ca slice, kv and gate, m x h_d (+ m x d_I), once c >= m

    @property
    def total(self) -> int:
        return self.window + self.compressed + self.buffers + self.overlap


def cache_elements(m: ModelConfig, context_len: int) -> V4Cache:
    """The decode state of one sequence after `context_len` tokens (a prompt and decode steps alike:
    the buffers drain whenever a window of m tokens closes, whatever the call it closes in).

    Sliding window (DynamicSlidingWindowLayer.update): min(c, W - 1) tokens of the one K = V head of
    h_d; a CSA or HCA layer stores that tensor once (`self.values = self.keys`), a sliding-only layer
    as keys and values (two tensors). Compressor (`store_compression_weights`,
    `update_compressor_states`, report §2.3.1-2.3.2): floor(c / m) compressed entries of h_d; the
    c mod m tokens of the open window as kv and gate, each 2·h_d wide on a CSA layer (Ca and Cb),
    h_d on an HCA layer. CSA overlap (`update_overlap_state`): the Ca half of the last full window,
    kv and gate, m x h_d each. The CSA indexer holds the same three at d_I."""
    v4 = _v4(m)
    c, hd, W = context_len, m.head_dim, m.sliding_window or 1
    n_csa, n_hca = len(v4.csa_layer_ids), len(v4.hca_layer_ids)
    n_sliding = m.n_layers - n_csa - n_hca
    seen = min(c, W - 1)
    m_csa, m_hca, d_i = v4.csa_compress_rate, v4.hca_compress_rate, v4.index_head_dim
    csa_width = hd + d_i  # the compressor's series and the indexer's, side by side
    return V4Cache(
        context_len=c,
        window=seen * hd * (2 * n_sliding + n_csa + n_hca),
        compressed=n_csa * (c // m_csa) * csa_width + n_hca * (c // m_hca) * hd,
        buffers=KV_AND_GATE * (n_csa * (c % m_csa) * CSA_SERIES * csa_width + n_hca * (c % m_hca) * hd),
        overlap=KV_AND_GATE * n_csa * m_csa * csa_width if c >= m_csa else 0,
    )


FLOPS_PER_MAC = 2  # one multiply, one add (model/units.py)


@dataclass(frozen=True)
class V4Flops:
    """Forward matmul FLOPs of every DeepSeek-V4 block over B sequences of S tokens, by part, summed over
    the layers; what FlopCounterMode counts of transformers' eager forward (aten.mm, aten.bmm)."""

    attention_proj: int  # q_a_proj, q_b_proj, kv_proj: 2·N·(D·r_q + r_q·A·h_d + D·h_d) per layer
    attention_cores: int  # Q·K^T and P·V over the S window keys plus the T compressed entries: 2 x 2·B·A·S·(S + T)·h_d
    attn_out: int  # grouped o_a_proj 2·N·A·h_d·d_g (a bmm per group) + o_b_proj 2·N·g·d_g·D
    compressors: int  # CSA kv_proj, gate_proj 2 x 2·N·D·2·h_d; HCA 2 x 2·N·D·h_d (those that close a window)
    idle_compressors: int  # the compressors of layers whose S < m (m'): no entry, so no gradient: forward only
    hyper_connections: int  # per layer 2 x (fn 2·N·n·D·(2 + n)·n + comb 2·N·n²·D); hc_head 2·N·n·D·n once
    experts: int  # the top-k routed experts 2·N·k·3·D·F
    shared_expert: int  # 2·N·3·D·F
    router: int  # 2·N·D·E (hash routing too: its scores weight the table's experts)
    indexer: int  # every CSA indexer, forward only: no gradient reaches it through its top-k indices

    @property
    def blocks(self) -> int:
        """Everything but the indexers (which have no backward)."""
        return (self.attention_proj + self.attention_cores + self.attn_out + self.compressors
                + self.hyper_connections + self.experts + self.shared_expert + self.router)


def forward_flops(m: ModelConfig, B: int, S: int) -> V4Flops:
    """Forward FLOPs of all the blocks for B sequences of S tokens, without a cache (a training step).

    modeling_deepseek_v4.py, eager attention: the keys are the S window keys (the sliding window is a
    mask: every pair is computed) concatenated with the T = floor(S / m) compressed entries of a CSA
    layer (floor(S / m') on an HCA layer, 0 on a sliding-only one); the compressors pool with
    elementwise softmax weights (no matmul) after their two projections; the indexer projects its own
    compressor (D x 2·d_I twice), its queries (r_q x H_I·d_I) and head weights (D x H_I) and scores
    every query against the T entries (2·B·S·H_I·T·d_I). A compressor of a layer with S < m (no window
    closes: T = 0) still runs its two projections, but nothing reads them: they get no backward
    (`idle_compressors`, forward only like the indexers); the hyper-connections' fn is one linear per
    mixer on the n·D flattened streams, the comb mix a batched n x n matmul of the n streams."""
    v4 = _v4(m)
    N, D, A, hd, r_q = B * S, m.d_model, m.n_heads, m.head_dim, v4.q_lora_rank
    n, L, F, E, k = v4.hc_mult, m.n_layers, m.moe_d_ff, m.n_experts, m.experts_per_token
    n_csa, n_hca = len(v4.csa_layer_ids), len(v4.hca_layer_ids)
    n_sliding = L - n_csa - n_hca
    t_csa, t_hca = S // v4.csa_compress_rate, S // v4.hca_compress_rate

    def core(T: int) -> int:
        return 2 * FLOPS_PER_MAC * B * A * S * (S + T) * hd  # scores and re-weighting

    d_i, h_i = v4.index_head_dim, v4.index_n_heads
    indexer = FLOPS_PER_MAC * N * (2 * D * CSA_SERIES * d_i + r_q * h_i * d_i + D * h_i) + FLOPS_PER_MAC * B * S * h_i * t_csa * d_i
    hc_layer = 2 * FLOPS_PER_MAC * N * (n * D * (2 + n) * n + n * n * D)
    return V4Flops(
        attention_proj=L * FLOPS_PER_MAC * N * (D * r_q + r_q * A * hd + D * hd),
        attention_cores=n_sliding * core(0) + n_csa * core(t_csa) + n_hca * core(t_hca),
        attn_out=L * FLOPS_PER_MAC * N * (A * hd * v4.o_lora_rank + v4.o_groups * v4.o_lora_rank * D),
        compressors=2 * FLOPS_PER_MAC * N * D * (n_csa * CSA_SERIES * hd * (t_csa > 0) + n_hca * hd * (t_hca > 0)),
        idle_compressors=2 * FLOPS_PER_MAC * N * D * (n_csa * CSA_SERIES * hd * (t_csa == 0) + n_hca * hd * (t_hca == 0)),
        hyper_connections=L * hc_layer + FLOPS_PER_MAC * N * n * D * n,
        experts=L * FLOPS_PER_MAC * N * k * GATED_MATRICES * D * F,
        shared_expert=L * FLOPS_PER_MAC * N * GATED_MATRICES * D * F,
        router=L * FLOPS_PER_MAC * N * D * E,
        indexer=n_csa * indexer,
    )


def step_flops(m: ModelConfig, w: Workload, *, causal: bool, windowed: bool) -> StepFlops:
    """One training step's FLOPs (flops.count_flops' count for DeepSeek-V4: `flops.STEP_FLOPS`; `forward_flops`,
    docs/formulas.md §5.16): the executed
    convention only (every query scores the whole window and every compressed entry, as eager does);
    the indexers, and the compressors of layers too short to close a window, forward only (`indexer`). `layer` is a sliding-only block's (no compressor, no indexer, its
    hyper-connections in `layers` only); `layers` holds every block, the compressors, the
    hyper-connections and the hc_head."""
    if causal or windowed:
        from transformer_calc.estimators.support_table import Unpriced, refusal

        raise refusal(m, "causal or windowed attention FLOPs", Unpriced.windowed_flops)
    check(m)
    v4 = m.deepseek_v4
    assert v4 is not None  # count_flops sends only a DeepSeek-V4 model here
    B, S, D = w.batch_size, w.seq_len, m.d_model
    f = forward_flops(m, B, S)
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


def model_params(m: ModelConfig) -> ModelParams:
    """The whole model's parameters (params.count_params' count for DeepSeek-V4: `params.STRUCTURES`;
    modeling_deepseek_v4.py DeepseekV4ForCausalLM): embedding
    V x D, untied lm_head V x D, final norm D, and every layer a DeepseekV4DecoderLayer (its attention,
    MoE of E routed experts and one shared expert, two norms, two hyper-connections), a compressor on the
    CSA and HCA layers and an indexer on the CSA layers; the hc_head once."""
    check(m)
    blocks = m.deepseek_v4
    assert blocks is not None
    L, D, V = m.n_layers, m.d_model, m.vocab_size
    p = layer_parts(m)
    layer = LayerParams(
        attn_q=p.attn_q, attn_k=p.attn_kv, attn_v=0, attn_o=p.attn_o, attn_bias=0, qk_norm=0,
        latent_norms=p.latent_norms, sinks=p.sinks, indexer=indexer_params(m), mlp_weights=p.experts,
        mlp_bias=0, activation=0, shared_expert=p.shared_expert, router=p.router, norms=p.norms,
    )
    n_csa, n_hca = len(blocks.csa_layer_ids), len(blocks.hca_layer_ids)
    w_expert = GATED_MATRICES * D * m.moe_d_ff
    return ModelParams(
        n_layers=L, n_moe_layers=L, embedding=V * D, position=0, embedding_projection=0, embedding_norm=0,
        layer=layer, dense_layer=layer, final_norm=norm_params(m, D), lm_head=0 if m.tied_embeddings else V * D,
        lm_head_bias=0, active_mlp_per_layer=m.experts_per_token * w_expert, mtp=0, n_indexer_layers=n_csa,
        n_attention_layers=L, mixers=0, n_channel_free_layers=0, per_layer_embedding=0, per_layer_inputs=0,
        attention_variants=0, mlp_variants=0, altup=0, laurel=0,
        hyper_connections=L * p.hyper_connections + hyper_head_params(m),
        compressors=n_csa * compressor_params(m, csa=True) + n_hca * compressor_params(m, csa=False),
        n_hash_moe_layers=len(blocks.hash_moe_layer_ids),
    )


def check(m: ModelConfig) -> None:
    """What transformers requires of the shapes (DeepseekV4Attention: the heads' A·h_d split into o_groups)."""
    v4 = _v4(m)
    if (m.n_heads * m.head_dim) % v4.o_groups:
        raise TcalcError(f"deepseek_v4.o_groups ({v4.o_groups}) must divide n_heads x head_dim "
                         f"({m.n_heads * m.head_dim}); use a divisor of it")


def check_layout(m: ModelConfig, T: int, ep: int) -> None:
    """DeepSeek-V4's parallel layouts. transformers' plans for it (configuration_deepseek_v4.py
    base_model_tp_plan, base_model_ep_plan) keep the attention, its compressors and indexers, the
    hyper-connections and the shared expert whole on every rank and split only the routed experts: by
    expert over ep ranks (priced: the inference roofline's expert parallelism with T = 1, every GPU its own
    sequences' attention), or by width over T ranks (refused: no query head is split, which is the
    Megatron layout tensor parallelism prices, with its two all-reduces per layer)."""
    if m.deepseek_v4 is not None and T > 1:
        from transformer_calc.estimators.support_table import Unpriced, refusal

        raise refusal(m, f"tensor parallelism (T {T}, ep {ep})", Unpriced.tensor)


def require_deepseek_v4_priced(m: ModelConfig, what: str) -> None:
    """Refuse, in one line, an estimate that does not price DeepSeek-V4's blocks (all but tcalc params)."""
    if m.deepseek_v4 is not None:
        from transformer_calc.estimators.support_table import Unpriced, refusal

        raise refusal(m, what, Unpriced.attention_only)
