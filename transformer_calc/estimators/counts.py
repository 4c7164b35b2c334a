"""The typed counts the estimators return: one block's and the whole model's parameters (`LayerParams`,
`ModelParams`: estimators/params.py's conventions), one block's and one training step's FLOPs (`LayerFlops`,
`StepFlops`: estimators/flops.py's conventions, with Korthikanti et al. 2022's model and hardware FLOPs).

They sit below params.py and flops.py, which fill them for a stack of layer kinds, and below the module of
a block that prices a model whole (estimators/deepseek_v4.py), so that each fills them without importing
the other; params.py and flops.py re-export them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from transformer_calc.model.config import Recompute

BACKWARD_PER_FORWARD = 2  # input grad + weight grad, each one forward matmul (seed errata FLOP-3)


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one transformer block.

    Standard attention: W_Q D x (A*h_d), W_K and W_V D x (n_kv*h_d), W_O (A*h_d) x D. Multi-head
    latent attention (DeepSeek-V2/V3, modeling_deepseek_v3.py): attn_q is q_a_proj + q_b_proj (or
    q_proj without q_lora_rank), attn_k is kv_a_proj_with_mqa (D x (r_kv + d_rope)) plus the key
    half of kv_b_proj (r_kv x A*d_nope), attn_v the value half (r_kv x A*d_v), attn_o
    (A*d_v) x D, and latent_norms the q_a/kv_a RMSNorms.
    """

    attn_q: int
    attn_k: int
    attn_v: int
    attn_o: int
    attn_bias: int  # q/k/v biases and the output bias, as configured
    qk_norm: int  # q and k norms (per head or full width)
    latent_norms: int  # MLA's q_a_layernorm + kv_a_layernorm
    sinks: int  # gpt-oss: one learned sink logit per head
    indexer: int  # DSA's lightning indexer (wq_b, wk, k_norm, weights_proj); 0 on a layer that reuses another's top-k
    mlp_weights: int  # the dense MLP's, or all routed experts' matrices
    mlp_bias: int
    activation: int  # learned scalars of the MLP activations (Apertus xIELU: alpha_p, alpha_n per MLP)
    shared_expert: int  # shared expert(s) matrices (+ its sigmoid gate)
    router: int  # MoE gate: D x n_experts (+ bias)
    norms: int  # the block's norms (scale + bias)

    @property
    def attention(self) -> int:
        return (
            self.attn_q + self.attn_k + self.attn_v + self.attn_o
            + self.attn_bias + self.qk_norm + self.latent_norms + self.sinks + self.indexer
        )  # fmt: skip

    @property
    def mlp(self) -> int:
        return self.mlp_weights + self.mlp_bias + self.shared_expert + self.router + self.activation

    @property
    def total(self) -> int:
        return self.attention + self.mlp + self.norms


# ModelParams fields that are JSON keys only when nonzero (models without them keep their JSON)
OPTIONAL_KEYS = ("shared_blocks", "sliding_extra", "per_layer_embedding", "per_layer_inputs", "attention_variants",
                 "mlp_variants", "altup", "laurel",  # keys only for the models that have them (Zamba2, MiMo, Gemma 4 / 3n)
                 "hyper_connections", "compressors", "n_hash_moe_layers")  # DeepSeek-V4 (estimators/deepseek_v4.py)
ATTENTION_FIELDS = ("attn_q", "attn_k", "attn_v", "attn_o", "attn_bias", "qk_norm", "latent_norms", "sinks")


@dataclass(frozen=True)
class ModelParams:
    """Whole-model parameter count: the non-repeated parts plus the blocks.

    `layer` is one MoE block in a MoE model (one block of a dense model); `dense_layer` is a block
    with a dense MLP of width d_ff (DeepSeek's first_k_dense_replace layers, Qwen's mlp_only_layers,
    Llama 4's non-MoE layers; in a dense model the same as `layer`).
    """

    n_layers: int
    n_moe_layers: int
    embedding: int  # token embedding V x d_embed
    position: int  # learned position table (K + offset) x D
    embedding_projection: int  # OPT project_in / project_out when d_embed != D
    embedding_norm: int  # BLOOM's word_embeddings_layernorm
    layer: LayerParams
    dense_layer: LayerParams
    final_norm: int
    lm_head: int  # 0 when tied to the embedding
    lm_head_bias: int
    active_mlp_per_layer: int  # routed-expert parameters one token uses in a MoE layer (top-k)
    mtp: int  # multi-token-prediction modules the checkpoint stores (not built by transformers)
    n_indexer_layers: int  # DSA: blocks that hold an indexer (`layer.indexer` each); the others reuse its top-k
    # Hybrid models (estimators/mixers/): the layers with softmax attention (n_layers otherwise), and
    # the parameters of the other mixers (Gated DeltaNet, ...) summed over their layers. `layer` and
    # `dense_layer` describe a block with attention; a mixer layer swaps its attention for its mixer.
    n_attention_layers: int
    mixers: int
    n_channel_free_layers: int  # one_mixer_per_layer: the sequence-mixer blocks, which have no MLP (0 otherwise)
    # Gemma 4 and Gemma 3n (docs/formulas.md §5.14-5.15; 0 for every other model). `layer` is a block of the
    # base shape (head_dim, n_kv_heads, K and V); these are what the other blocks add or lack:
    per_layer_embedding: int  # the per-layer embedding table V_ple x L·P (embedding parameters)
    per_layer_inputs: int  # its model projection D x L·P and norm, and every layer's gate D x P, projection P x D, norm
    attention_variants: int  # full layers' other h_d / K/V heads, k=v (no W_V), kv-shared layers (no W_K, W_V, k_norm)
    mlp_variants: int  # the kv-shared layers' double-width MLP (its second d_ff)
    altup: int  # Gemma 3n: every layer's AltUp (coefficients, router, scale, norm) and the model's 2·(n-1) D x D projections
    laurel: int  # Gemma 3n: every layer's LAuReL residual D x r, r x D and its norm
    shared_blocks: int = 0  # Zamba2's shared attention+MLP blocks, adapters and linears, each tensor once (estimators/shared_block.py)
    sliding_extra: int = 0  # MiMo-V2-Flash: what its sliding layers hold beyond `layer`'s attention (more K/V heads, sinks)
    # DeepSeek-V4 (estimators/deepseek_v4.py; docs/formulas.md §5.16; 0 for every other model): `layer` is its
    # block (attn_q q_a+q_b, attn_k the shared K=V kv_proj, attn_o the grouped o_a_proj + o_b_proj, indexer on
    # the CSA layers); these are what it adds outside `layer`:
    hyper_connections: int = 0  # every layer's attn_hc and ffn_hc (mHC) and the model's hc_head
    compressors: int = 0  # the CSA and HCA layers' KV compressors (the CSA indexers are `layers_indexer`)
    n_hash_moe_layers: int = 0  # MoE layers routed by the frozen token-id table (same parameters as top-k routing)
    attention_by_field: tuple[tuple[str, int], ...] = ()  # the attention parts summed over the layers, when they vary

    @property
    def n_dense_layers(self) -> int:
        return self.n_layers - self.n_moe_layers - self.n_channel_free_layers

    @property
    def n_mixer_layers(self) -> int:
        return self.n_layers - self.n_attention_layers

    @property
    def layers(self) -> int:
        # `layer` and `dense_layer` carry one indexer each; GLM-5's shared layers have none
        idle_indexers = (self.n_layers - self.n_indexer_layers) * self.layer.indexer
        blocks = self.n_moe_layers * self.layer.total + self.n_dense_layers * self.dense_layer.total - idle_indexers
        blocks += self.n_channel_free_layers * (self.dense_layer.total - self.dense_layer.mlp)  # no MLP
        blocks += self.attention_variants + self.mlp_variants
        return blocks - self.n_mixer_layers * self.layer.attention + self.mixers + self.shared_blocks + self.sliding_extra

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.position
            + self.embedding_projection
            + self.embedding_norm
            + self.layers
            + self.final_norm
            + self.lm_head
            + self.lm_head_bias
            + self.per_layer_embedding
            + self.per_layer_inputs
            + self.altup
            + self.laurel
            + self.hyper_connections
            + self.compressors
        )

    @property
    def non_embedding(self) -> int:
        """Kaplan et al. 2020's N: everything but the token/position tables (Gemma 4's per-layer
        embedding table too) and an untied head."""
        return self.total - self.embedding - self.position - self.lm_head - self.per_layer_embedding

    @property
    def active(self) -> int:
        """Parameters a single token's forward pass touches (== total for dense models): all but
        the routed experts it is not sent to (the shared expert and the router are active)."""
        routed = self.layer.mlp_weights + self.layer.mlp_bias
        return self.total - self.n_moe_layers * (routed - self.active_mlp_per_layer)

    def as_dict(self) -> dict[str, int]:
        """Flat breakdown in JSON order; every value an exact int."""
        out: dict[str, int] = {"total": self.total, "non_embedding": self.non_embedding}
        out["active"] = self.active
        for f in fields(self):
            if f.name not in ("layer", "dense_layer", "attention_by_field") and (f.name not in OPTIONAL_KEYS or getattr(self, f.name)):
                out[f.name] = getattr(self, f.name)
        varied = dict(self.attention_by_field)
        out["per_layer"] = self.layer.total
        for f in fields(self.layer):
            out[f"per_layer_{f.name}"] = getattr(self.layer, f.name)
        for f in fields(self.layer):  # each component summed over every block (MoE and dense)
            if f.name in ATTENTION_FIELDS:  # the attention parts: only the layers that have attention
                out[f"layers_{f.name}"] = varied.get(f.name, self.n_attention_layers * getattr(self.layer, f.name))
                continue
            if f.name == "norms":  # every layer's, with an MLP or not
                out["layers_norms"] = self.n_layers * self.layer.norms
                continue
            out[f"layers_{f.name}"] = (
                self.n_moe_layers * getattr(self.layer, f.name) + self.n_dense_layers * getattr(self.dense_layer, f.name)
            )
        out["layers_indexer"] = self.n_indexer_layers * self.layer.indexer
        out["n_dense_layers"] = self.n_dense_layers
        out["per_dense_layer"] = self.dense_layer.total
        out["layers"] = self.layers
        out["total_with_mtp"] = self.total + self.mtp
        return out


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
        # the parts only some models have (mixers, shared blocks): a key only where the step has the part
        parts = (("mixers", self.mixers), ("shared_blocks", self.shared_blocks))
        out.update((key, value) for key, value in parts if value)
        for f in fields(self.layer):
            out[f"per_layer_{f.name}"] = getattr(self.layer, f.name)
        out["per_layer"] = self.layer.total
        return out
