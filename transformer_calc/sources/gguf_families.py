"""The llama.cpp architectures tcalc reads and how each maps a GGUF file's metadata and tensors to a
ModelConfig spec (the Hugging Face model_type it mirrors, transformer_calc.sources.hf): one builder
per family (`llama_like`, `deepseek2`), the tensors the metadata implies (`Expected`), and the check
that the file holds exactly those (`check_tensors`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from transformer_calc.errors import TcalcError, clip
from transformer_calc.sources.gguf_reader import ArrayValue, TensorInfo


MAX_PATTERN = 4096  # layers a sliding-window pattern is derived from (ModelConfig.MAX_PATTERN)


# The architectures read here (general.architecture, src/llama-arch.cpp LLM_ARCH_NAMES) and the
# Hugging Face model_type whose tcalc spec (transformer_calc.sources.hf) each one mirrors.
ARCHITECTURES: dict[str, str] = {
    "llama": "llama (mistral, mixtral)",
    "qwen2": "qwen2",
    "qwen2moe": "qwen2_moe",
    "qwen3": "qwen3",
    "qwen3moe": "qwen3_moe",
    "gemma2": "gemma2",
    "gemma3": "gemma3_text",
    "phi3": "phi3",
    "deepseek2": "deepseek_v3",
    "gpt-oss": "gpt_oss",
}
SUPPORTED_ARCHITECTURES: tuple[str, ...] = tuple(ARCHITECTURES)

# Tensors llama.cpp stores that transformers builds no parameter for: Llama 3.1's rope scaling
# factors, Phi-3's LongRoPE factors, DeepSeek's e_score_correction_bias (exp_probs_b; a buffer in
# modeling_deepseek_v3.py). They are in the checkpoint (bytes, params) but not in count_params.
NOT_IN_TRANSFORMERS = re.compile(
    r"^(?:rope_freqs|rope_factors_long|rope_factors_short)\.weight$|^blk\.\d+\.exp_probs_b\.bias$"
)

_ATTENTION_NORMS = frozenset({"attn_q_norm", "attn_k_norm", "attn_q_a_norm", "attn_kv_a_norm"})
_BLOCK_RE = re.compile(r"^blk\.(\d+)\.(.+?)(?:\.(?:weight|bias))?$")


def not_in_transformers(name: str) -> bool:
    """True for a GGUF tensor llama.cpp adds that transformers does not build (see above)."""
    return bool(NOT_IN_TRANSFORMERS.match(name))


def component_of(name: str, mtp_from: int | None = None) -> str:
    """The checkpoint component of a GGUF tensor name (module docstring); blocks with index >=
    `mtp_from` (block_count - nextn_predict_layers) are NextN (MTP) layers."""
    match = _BLOCK_RE.match(name)
    if match is None:
        base = re.sub(r"\.(?:weight|bias)$", "", name)
        if base in ("token_embd", "position_embd"):
            return "embedding"
        if base == "output":
            return "head"
        if base == "output_norm":
            return "norms"
        return "other"
    layer, base = int(match.group(1)), match.group(2)
    if "nextn" in base or (mtp_from is not None and layer >= mtp_from):
        return "mtp"
    if base in _ATTENTION_NORMS:
        return "attention"
    if base.endswith("_norm"):
        return "norms"
    if base.startswith("attn_"):
        return "attention"
    if base.endswith("_shexp"):  # shared experts and their gate (ffn_gate_inp_shexp)
        return "mlp"
    if base in ("ffn_gate_inp", "exp_probs_b"):
        return "router"
    if base.endswith("_exps"):
        return "experts"
    if base in ("ffn_gate", "ffn_up", "ffn_down"):
        return "mlp"
    return "other"


# ---------------------------------------------------------------------------- metadata -> spec
class Meta:
    """The architecture's metadata keys (`{arch}.key`), read with type checks that name the key."""

    def __init__(self, kv: dict[str, Any], arch: str, where: str) -> None:
        self.kv, self.arch, self.where = kv, arch, where

    def opt_int(self, key: str) -> int | None:
        full = f"{self.arch}.{key}"
        value = self.kv.get(full)
        if value is None:
            return None
        if isinstance(value, ArrayValue):
            raise TcalcError(
                f"{self.where}: {full} is a per-layer array of {value.count}; tcalc reads {self.arch} "
                "models with one value for every layer"
            )
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TcalcError(f"{self.where}: {full} ({clip(value)}) must be a whole number >= 0")
        return value

    def int(self, key: str, minimum: int = 1) -> int:
        value = self.opt_int(key)
        if value is None:
            raise TcalcError(
                f"{self.where}: metadata key {self.arch}.{key} is missing; a {self.arch} GGUF needs it "
                "(convert the model again with a current llama.cpp)"
            )
        if value < minimum:
            raise TcalcError(f"{self.where}: {self.arch}.{key} ({value}) must be at least {minimum}")
        return value


class Expected:
    """The tensors (name -> ggml shape, ne[0] first) a model with these metadata stores."""

    def __init__(self) -> None:
        self.shapes: dict[str, tuple[int, ...]] = {}

    def add(self, name: str, *ne: int) -> None:
        self.shapes[name] = ne


@dataclass(frozen=True)
class _Dims:
    """The shape numbers shared by the llama-like architectures."""

    L: int  # blocks
    D: int  # embedding_length
    A: int  # attention heads
    kv: int  # key/value heads
    hd: int  # head width (key_length)
    V: int  # vocabulary


def _present(names: set[str], pattern: str) -> bool:
    rx = re.compile(pattern)
    return any(rx.match(n) for n in names)


def _vocab(m: Meta, kv: dict[str, Any], infos: dict[str, TensorInfo]) -> int:
    """V: {arch}.vocab_size, else the tokenizer's token count (llama.cpp's n_vocab), else the
    token embedding's rows."""
    V = m.opt_int("vocab_size")
    tokens = kv.get("tokenizer.ggml.tokens")
    if V is None and isinstance(tokens, ArrayValue):
        V = tokens.count
    if V is None and "token_embd.weight" in infos and len(infos["token_embd.weight"].dims) == 2:
        V = infos["token_embd.weight"].dims[1]
    if not V:
        raise TcalcError(f"{m.where}: no vocabulary size: neither {m.arch}.vocab_size, tokenizer.ggml.tokens nor token_embd")
    return V


def _dims(m: Meta, kv: dict[str, Any], infos: dict[str, TensorInfo], n_tensors: int) -> _Dims:
    L, D, A = m.int("block_count"), m.int("embedding_length"), m.int("attention.head_count")
    if L > n_tensors:
        raise TcalcError(f"{m.where}: {m.arch}.block_count ({L:,}) is more than the {n_tensors:,} tensors in the file")
    kv_heads = m.opt_int("attention.head_count_kv") or A
    hd_k, hd_v = m.opt_int("attention.key_length"), m.opt_int("attention.value_length")
    if hd_k is not None and hd_v is not None and hd_k != hd_v:
        raise TcalcError(
            f"{m.where}: {m.arch}.attention.key_length ({hd_k}) differs from value_length ({hd_v}); "
            "tcalc models one head width for keys and values"
        )
    hd = hd_k or hd_v
    if hd is None:
        if D % A:
            raise TcalcError(
                f"{m.where}: {m.arch}.embedding_length ({D}) is not divisible by head_count ({A}) "
                "and no key_length is given"
            )
        hd = D // A
    return _Dims(L, D, A, kv_heads, hd, _vocab(m, kv, infos))


def mlp_attention_biases(qkv: bool, out: bool, mlp: bool) -> dict[str, bool]:
    """One `bias` when all agree, else the three flags (as transformer_calc.sources.hf writes them)."""
    if qkv == out == mlp:
        return {"bias": qkv}
    return {"bias": False, "qkv_bias": qkv, "attn_out_bias": out, "mlp_bias": mlp}


def _shortest_period(items: list[str]) -> list[str]:
    """The shortest prefix whose cyclic repetition gives `items` (KMP prefix function, O(n); as
    transformer_calc.sources.hf_2024.shortest_period reduces HF layer_types)."""
    n = len(items)
    border, k = [0] * n, 0
    for i in range(1, n):
        while k and items[i] != items[k]:
            k = border[k - 1]
        if items[i] == items[k]:
            k += 1
        border[i] = k
    return items[: n - border[-1]] if n else items


def _window(m: Meta, fam: Family, L: int) -> dict[str, Any]:
    """Sliding-window layers as llama.cpp runs them: llama_hparams::set_swa_pattern(n) makes layer
    i slide when i % n < n - 1 (gemma2 and gpt-oss n = 2, gemma3 n = 6, fixed in
    llama-model.cpp load_hparams), with the window `{arch}.attention.sliding_window` (gemma2:
    4096 when absent). The pattern is the layers' kinds reduced to their shortest period, as
    transformer_calc.sources.hf_2024 reduces HF layer_types (a 2-layer gemma3 slides on both)."""
    if fam.window_every is None:
        return {}
    window = m.opt_int("attention.sliding_window")
    if window is None:
        window = fam.window_default
    if not window:
        return {}
    n = fam.window_every
    kinds = ["sliding" if i % n < n - 1 else "full" for i in range(min(L, MAX_PATTERN))]
    return {"attention_pattern": _shortest_period(kinds), "sliding_window": window}


def _attention(
    e: Expected, i: int, d: _Dims, qkv_bias: bool, out_bias: bool, fused: bool, qk_norm: bool, sinks: bool
) -> None:
    """llama-model.cpp: wq {D, hd*A}, wk/wv {D, hd*kv}, wo {hd*A, D} (Phi-3: wqkv {D, hd*(A+2kv)})."""
    p, D, q, k = f"blk.{i}.", d.D, d.hd * d.A, d.hd * d.kv
    if fused:
        e.add(p + "attn_qkv.weight", D, q + 2 * k)
        if qkv_bias:
            e.add(p + "attn_qkv.bias", q + 2 * k)
    else:
        e.add(p + "attn_q.weight", D, q)
        e.add(p + "attn_k.weight", D, k)
        e.add(p + "attn_v.weight", D, k)
        if qkv_bias:
            e.add(p + "attn_q.bias", q)
            e.add(p + "attn_k.bias", k)
            e.add(p + "attn_v.bias", k)
    e.add(p + "attn_output.weight", q, D)
    if out_bias:
        e.add(p + "attn_output.bias", D)
    if qk_norm:  # Qwen3, Gemma 3: RMSNorm(head_dim) shared by the heads
        e.add(p + "attn_q_norm.weight", d.hd)
        e.add(p + "attn_k_norm.weight", d.hd)
    if sinks:  # gpt-oss: one sink logit per head
        e.add(p + "attn_sinks.weight", d.A)


def _dense_mlp(e: Expected, i: int, D: int, F: int, bias: bool, fused_gate_up: bool) -> None:
    """ffn_gate/ffn_up {D, F}, ffn_down {F, D} (Phi-3: ffn_up {D, 2F} holds gate and up)."""
    p = f"blk.{i}."
    if fused_gate_up:
        e.add(p + "ffn_up.weight", D, 2 * F)
        if bias:
            e.add(p + "ffn_up.bias", 2 * F)
    else:
        e.add(p + "ffn_gate.weight", D, F)
        e.add(p + "ffn_up.weight", D, F)
        if bias:
            e.add(p + "ffn_gate.bias", F)
            e.add(p + "ffn_up.bias", F)
    e.add(p + "ffn_down.weight", F, D)
    if bias:
        e.add(p + "ffn_down.bias", D)


def _experts(e: Expected, i: int, D: int, Fe: int, E: int, bias: bool, router_bias: bool, names: set[str]) -> None:
    """Router ffn_gate_inp {D, E}; experts stacked: ffn_gate_exps/ffn_up_exps {D, Fe, E} (or one
    ffn_gate_up_exps {D, 2Fe, E}, convert_hf_to_gguf --fuse-gate-up-exps), ffn_down_exps {Fe, D, E};
    gpt-oss's biases {Fe, E}, {D, E} and the router's {E}."""
    p = f"blk.{i}."
    e.add(p + "ffn_gate_inp.weight", D, E)
    if router_bias:
        e.add(p + "ffn_gate_inp.bias", E)
    if p + "ffn_gate_up_exps.weight" in names:
        e.add(p + "ffn_gate_up_exps.weight", D, 2 * Fe, E)
        if bias:
            e.add(p + "ffn_gate_up_exps.bias", 2 * Fe, E)
    else:
        e.add(p + "ffn_gate_exps.weight", D, Fe, E)
        e.add(p + "ffn_up_exps.weight", D, Fe, E)
        if bias:
            e.add(p + "ffn_gate_exps.bias", Fe, E)
            e.add(p + "ffn_up_exps.bias", Fe, E)
    e.add(p + "ffn_down_exps.weight", Fe, D, E)
    if bias:
        e.add(p + "ffn_down_exps.bias", D, E)


def _shared(e: Expected, i: int, D: int, Fs: int, gate: bool) -> None:
    """Shared expert(s): ffn_gate_shexp/ffn_up_shexp {D, Fs}, ffn_down_shexp {Fs, D}; Qwen2-MoE's
    sigmoid gate ffn_gate_inp_shexp {D}."""
    p = f"blk.{i}."
    e.add(p + "ffn_gate_shexp.weight", D, Fs)
    e.add(p + "ffn_up_shexp.weight", D, Fs)
    e.add(p + "ffn_down_shexp.weight", Fs, D)
    if gate:
        e.add(p + "ffn_gate_inp_shexp.weight", D)


def _ends(e: Expected, D: int, V: int, tied: bool) -> None:
    e.add("token_embd.weight", D, V)
    e.add("output_norm.weight", D)
    if not tied:
        e.add("output.weight", D, V)


@dataclass(frozen=True)
class Family:
    """What distinguishes one llama-like architecture (llama-model.cpp load_tensors)."""

    mlp: str  # swiglu | geglu
    activation: str  # the HF hidden_act its config.json carries (ModelConfig.activation_impl)
    norms: tuple[str, ...]  # the block's norms
    qk_norm: bool = False
    sinks: bool = False
    moe: bool = False  # may hold routed experts
    experts_ff_key: str | None = None  # width of one expert (None: feed_forward_length)
    fused_gate_up: bool = False
    window_every: int | None = None  # llama.cpp's sliding-window period (None: full attention)
    window_default: int | None = None  # the window when the file gives none
    hf_extra: tuple[tuple[str, Any], ...] = ()


_PRE = ("attn_norm", "ffn_norm")
FAMILIES: dict[str, Family] = {
    # src/llama-model.cpp LLM_ARCH_LLAMA: Llama, Mistral, Mixtral (experts {D, n_ff, E})
    "llama": Family("swiglu", "silu", _PRE, moe=True),
    "qwen2": Family("swiglu", "silu", _PRE),  # LLM_ARCH_QWEN2: q/k/v biases
    "qwen3": Family("swiglu", "silu", _PRE, qk_norm=True, hf_extra=(("qk_norm_scope", "head"),)),
    "qwen2moe": Family("swiglu", "silu", _PRE, moe=True, experts_ff_key="expert_feed_forward_length",
                        hf_extra=(("moe_layer_step", 1),)),
    "qwen3moe": Family("swiglu", "silu", _PRE, qk_norm=True, moe=True, experts_ff_key="expert_feed_forward_length",
                        hf_extra=(("qk_norm_scope", "head"), ("moe_layer_step", 1), ("all_linear_experts", True))),
    # LLM_ARCH_GEMMA2/3: pre- and post-norms around attention and the MLP; set_swa_pattern(2) / (6)
    "gemma2": Family("geglu", "gelu_pytorch_tanh", ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"),
                      window_every=2, window_default=4096, hf_extra=(("norms_per_layer", 4),)),
    "gemma3": Family("geglu", "gelu_pytorch_tanh", ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"),
                      qk_norm=True, window_every=6, hf_extra=(("norms_per_layer", 4), ("qk_norm_scope", "head"))),
    # LLM_ARCH_PHI3: wqkv {D, D + 2*n_embd_gqa}, ffn_up {D, 2*n_ff}; its sliding window is read
    # and switched off ("Phi SWA is currently disabled", llama.cpp PR 13676): full attention
    "phi3": Family("swiglu", "silu", _PRE, fused_gate_up=True,
                    hf_extra=(("fused_qkv", True), ("fused_gate_up", True))),
    # LLM_ARCH_OPENAI_MOE (src/models/openai-moe.cpp): attn_norm + post_attention_norm, sinks,
    # biased experts and router; set_swa_pattern(2)
    "gpt-oss": Family("swiglu", "silu", ("attn_norm", "post_attention_norm"), sinks=True, moe=True,
                       experts_ff_key="expert_feed_forward_length", window_every=2),
}


def llama_like(arch: str, m: Meta, kv: dict[str, Any], infos: dict[str, TensorInfo]) -> tuple[dict[str, Any], Expected]:
    fam = FAMILIES[arch]
    names = set(infos)
    d = _dims(m, kv, infos, len(infos))
    tied = "output.weight" not in names
    fused_qkv = _present(names, r"^blk\.\d+\.attn_qkv\.weight$")
    qkv_bias = _present(names, r"^blk\.\d+\.attn_(?:q|k|v|qkv)\.bias$")
    out_bias = _present(names, r"^blk\.\d+\.attn_output\.bias$")
    mlp_bias = _present(names, r"^blk\.\d+\.ffn_(?:gate|up|down|gate_up)(?:_exps)?\.bias$")
    F = m.opt_int("feed_forward_length")
    E = (m.opt_int("expert_count") or 0) if fam.moe else 0
    spec: dict[str, Any] = {
        "n_layers": d.L, "d_model": d.D, "n_heads": d.A, "n_kv_heads": d.kv, "vocab_size": d.V,
        "max_seq_len": m.int("context_length"), "positional": "rotary", "norm": "rmsnorm",
        "tied_embeddings": tied, "mlp": fam.mlp,
    } | mlp_attention_biases(qkv_bias, out_bias, mlp_bias)
    if m.opt_int("attention.key_length") is not None or m.opt_int("attention.value_length") is not None:
        spec["head_dim"] = d.hd
    if fam.qk_norm:
        spec["qk_norm"] = True
    if fam.sinks:
        spec["attention_sinks"] = True
    e = Expected()
    _ends(e, d.D, d.V, tied)
    Fe = Fs = 0
    shared_gate = False
    if E:
        Fe = m.int(fam.experts_ff_key) if fam.experts_ff_key else m.int("feed_forward_length")
        k = m.int("expert_used_count")
        router_bias = _present(names, r"^blk\.\d+\.ffn_gate_inp\.bias$")
        spec |= {"n_experts": E, "experts_per_token": k, "router": True}
        if router_bias:
            spec["router_bias"] = True
        if fam.experts_ff_key:
            spec["moe_d_ff"] = Fe
        if arch == "llama":  # Mixtral (hf.FUSED_LINEARS)
            spec["all_linear_experts"] = True
        if _present(names, r"^blk\.\d+\.ffn_up_shexp\.weight$"):
            # llama-model.cpp QWEN2MOE: n_ff_shexp = expert_shared_feed_forward_length or n_ff
            Fs = m.opt_int("expert_shared_feed_forward_length") or m.int("feed_forward_length")
            shared_gate = _present(names, r"^blk\.\d+\.ffn_gate_inp_shexp\.weight$")
            spec |= {"shared_expert_d_ff": Fs, "shared_expert_gate": shared_gate}
        spec["d_ff"] = F or Fe
    else:
        spec["d_ff"] = m.int("feed_forward_length")
    for i in range(d.L):  # L <= the file's tensor count (checked in _dims)
        for norm in fam.norms:
            e.add(f"blk.{i}.{norm}.weight", d.D)
        _attention(e, i, d, qkv_bias, out_bias, fused_qkv, fam.qk_norm, fam.sinks)
        if E:
            _experts(e, i, d.D, Fe, E, mlp_bias, "router_bias" in spec, names)
            if Fs:
                _shared(e, i, d.D, Fs, shared_gate)
        else:
            _dense_mlp(e, i, d.D, spec["d_ff"], mlp_bias, fam.fused_gate_up)
    spec |= _window(m, fam, d.L)
    spec |= dict(fam.hf_extra)
    spec["activation_impl"] = fam.activation
    return spec, e


def deepseek2(m: Meta, kv: dict[str, Any], infos: dict[str, TensorInfo]) -> tuple[dict[str, Any], Expected]:
    """LLM_ARCH_DEEPSEEK2 (src/llama-model.cpp; convert_hf_to_gguf.py DeepseekV2Model): multi-head
    latent attention, leading dense blocks, routed and shared experts. Newer converts store MLA as
    MQA over the latent (head_count_kv 1, key_length kv_lora_rank + rope, key_length_mla /
    value_length_mla the real heads) with kv_b split into attn_k_b {nope, kv_lora, A} and attn_v_b
    {kv_lora, v, A}; older ones key_length / value_length and attn_kv_b {kv_lora, A*(nope + v)}.

    Longer than 60 lines on purpose: one family's metadata keys and tensor shapes, in the order
    llama-model.cpp reads and creates them, so that it can be checked against that file."""
    names = set(infos)
    L_all, D, A = m.int("block_count"), m.int("embedding_length"), m.int("attention.head_count")
    if L_all > len(infos):
        raise TcalcError(f"{m.where}: {m.arch}.block_count ({L_all:,}) is more than the {len(infos):,} tensors in the file")
    nextn = m.opt_int("nextn_predict_layers") or 0
    if nextn >= L_all:
        raise TcalcError(f"{m.where}: {m.arch}.nextn_predict_layers ({nextn}) must be below block_count ({L_all})")
    L, V = L_all - nextn, _vocab(m, kv, infos)
    r_kv, rope = m.int("attention.kv_lora_rank"), m.int("rope.dimension_count")
    r_q = m.opt_int("attention.q_lora_rank") or None
    mla = m.opt_int("attention.key_length_mla") is not None
    if mla:
        nope, dv = m.int("attention.key_length_mla") - rope, m.int("attention.value_length_mla")
    else:
        nope, dv = m.int("attention.key_length") - rope, m.int("attention.value_length")
    if nope < 1:
        raise TcalcError(f"{m.where}: {m.arch} key length minus rope.dimension_count ({rope}) leaves {nope}; need >= 1")
    E = m.opt_int("expert_count") or 0
    first = m.opt_int("leading_dense_block_count") or 0
    F = m.int("feed_forward_length")
    tied = "output.weight" not in names
    spec: dict[str, Any] = {
        "n_layers": L, "d_model": D, "n_heads": A, "vocab_size": V, "d_ff": F,
        "max_seq_len": m.int("context_length"), "positional": "rotary", "norm": "rmsnorm",
        "tied_embeddings": tied, "mlp": "swiglu", "q_lora_rank": r_q, "kv_lora_rank": r_kv,
        "qk_rope_head_dim": rope, "qk_nope_head_dim": nope, "v_head_dim": dv, "bias": False,
    }
    Fe = n_shared = 0
    if E:
        Fe, k = m.int("expert_feed_forward_length"), m.int("expert_used_count")
        n_shared = m.opt_int("expert_shared_count") or 0
        spec |= {
            "n_experts": E, "experts_per_token": k, "router": True, "moe_d_ff": Fe,
            "shared_expert_d_ff": n_shared * Fe, "first_dense_layers": min(first, L), "all_linear_experts": True,
        }
    if nextn:
        spec["mtp_layers"] = nextn
    spec["activation_impl"] = "silu"
    e = Expected()
    _ends(e, D, V, tied)
    for i in range(L_all):  # L_all <= the file's tensor count
        p = f"blk.{i}."
        e.add(p + "attn_norm.weight", D)
        if r_q:
            e.add(p + "attn_q_a.weight", D, r_q)
            e.add(p + "attn_q_a_norm.weight", r_q)
            e.add(p + "attn_q_b.weight", r_q, A * (nope + rope))
        else:
            e.add(p + "attn_q.weight", D, A * (nope + rope))
        e.add(p + "attn_kv_a_mqa.weight", D, r_kv + rope)
        e.add(p + "attn_kv_a_norm.weight", r_kv)
        if mla:
            e.add(p + "attn_k_b.weight", nope, r_kv, A)
            e.add(p + "attn_v_b.weight", r_kv, dv, A)
        else:
            e.add(p + "attn_kv_b.weight", r_kv, A * (nope + dv))
        e.add(p + "attn_output.weight", A * dv, D)
        e.add(p + "ffn_norm.weight", D)
        if E and i >= first:
            _experts(e, i, D, Fe, E, False, False, names)
            if n_shared:
                _shared(e, i, D, n_shared * Fe, False)
        else:
            _dense_mlp(e, i, D, F, False, False)
        if i >= L:  # a NextN (MTP) block: llama-model.cpp LLM_TENSOR_NEXTN_* (as params.count_params' mtp)
            e.add(p + "nextn.eh_proj.weight", 2 * D, D)
            e.add(p + "nextn.enorm.weight", D)
            e.add(p + "nextn.hnorm.weight", D)
            e.add(p + "nextn.shared_head_norm.weight", D)
            e.add(p + "nextn.embed_tokens.weight", D, V)
            e.add(p + "nextn.shared_head_head.weight", D, V)
    return spec, e


def _summary(spec: dict[str, Any]) -> str:
    keys = ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff", "vocab_size", "n_experts", "moe_d_ff")
    return ", ".join(f"{k}={spec[k]}" for k in keys if spec.get(k) is not None)


def _strip(dims: tuple[int, ...]) -> tuple[int, ...]:
    """ggml pads ne with 1s to four dims: trailing 1s do not change a shape."""
    out = list(dims)
    while out and out[-1] == 1:
        out.pop()
    return tuple(out)


def check_tensors(where: str, arch: str, spec: dict[str, Any], expected: Expected, infos: list[TensorInfo]) -> None:
    """Every tensor of the file is one the metadata implies (by name and ggml shape), or one of
    NOT_IN_TRANSFORMERS; every implied tensor is there (llama-model.cpp create_tensor)."""
    about = f"{arch} metadata ({_summary(spec)})"
    for t in infos:
        want = expected.shapes.get(t.name)
        if want is None:
            if not_in_transformers(t.name):
                continue
            raise TcalcError(
                f"{where}: tensor {clip(t.name)} {list(t.dims)} is not part of the model the {about} describes, "
                "so tcalc cannot count this file's parameters exactly"
            )
        if _strip(t.dims) != _strip(want):
            raise TcalcError(
                f"{where}: tensor {clip(t.name)} has ggml shape {list(t.dims)}, but the {about} gives "
                f"{list(want)}; the file's metadata and tensors disagree"
            )
    present = {t.name for t in infos}
    for name in expected.shapes:
        if name not in present:
            raise TcalcError(
                f"{where}: tensor {clip(name)} is missing: the {about} implies it; the file is incomplete "
                "(a split GGUF's shard?) or its metadata is wrong"
            )
