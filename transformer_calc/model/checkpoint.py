"""What a checkpoint stores: its tensors, each with its stored dtype, bytes and component.

A checkpoint (safetensors files or a GGUF file) is read header-only by `safetensors_file` and
`gguf_file`; this module holds what they produce and the rules both share:

- `Tensor`: one stored tensor: its name, stored dtype (safetensors' `BF16`, `F8_E4M3`, `I32`, ...
  or a ggml type such as `Q4_K`), shape, bytes (what the file's offsets span), the logical
  parameters it holds (a packed int4 `qweight` of I32 holds 8 per element; a scale, zero point or
  group index holds none) and its component.
- Components: embedding (token table, learned positions, OPT projections), attention (Q/K/V/O,
  MLA's projections and latent norms, q/k norms, sinks), mlp (a dense MLP, shared experts and their
  gate), experts (routed experts), router, norms (the blocks' and the final norm), head (an untied
  LM head), towers (vision/audio encoders and projectors of a multimodal checkpoint), mtp
  (multi-token-prediction modules: DeepSeek's layers past num_hidden_layers, `mtp.*`), other.
- Role: `weight` (holds parameters) or `scale` (quantization metadata: scales, zero points,
  group indices, bitsandbytes' quant state). A scale belongs to the component of its weight; the
  per-component report gives both.

Bytes are exact ints; nothing here reads a file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

COMPONENTS = ("embedding", "attention", "mlp", "experts", "router", "norms", "head", "towers", "mtp", "other")
WEIGHT, SCALE = "weight", "scale"

# Stored element types of safetensors (safetensors/src/tensor.rs `Dtype`) -> bits per element.
SAFETENSORS_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}

# Quantization metadata a weight carries beside it (the name's last part).
_SCALE_SUFFIXES = (
    "weight_scale_inv", "weight_scale", "weight_scale_2", "input_scale", "weight_global_scale",
    "input_global_scale", "weight_zero_point", "weight_shape", "weight_g_idx", "scales", "qzeros",
    "g_idx", "absmax", "quant_map", "nested_absmax", "nested_quant_map", "k_scale", "v_scale", "q_scale",
    "SCB", "weight_format",
)
_SCALE_RE = re.compile(r"(?:^|[._])(?:" + "|".join(map(re.escape, _SCALE_SUFFIXES)) + r")$")
_QUANT_STATE_RE = re.compile(r"\.quant_state\.")
_TOWER_RE = re.compile(
    r"(?:^|\.)(?:vision_tower|vision_model|visual|vision_encoder|vision|multi_modal_projector|mm_projector|"
    r"audio_tower|audio_model|audio_encoder|audio|embed_vision|embed_audio|image_newline|vision_embed_tokens|"
    r"merger|connector|vision_projection|mm_proj)(?:\.|$)"
)
_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer|decoder\.layers)\.(\d+)\.")


@dataclass(frozen=True)
class Tensor:
    """One stored tensor (see the module docstring)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    params: int
    component: str
    role: str


def elements(shape: Iterable[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def is_scale(name: str) -> bool:
    """True for quantization metadata (scales, zero points, group indices, quant states)."""
    return bool(_SCALE_RE.search(name) or _QUANT_STATE_RE.search(name))


def component_of(name: str, n_layers: int | None = None) -> str:
    """The component of a Hugging Face (transformers) tensor name; `n_layers` (the config's
    num_hidden_layers) marks DeepSeek-style MTP layers stored as `model.layers.{n_layers + i}`."""
    low = name.lower()
    if _TOWER_RE.search(low):
        return "towers"
    if low.startswith("mtp.") or ".mtp." in low or low.startswith("mtp_"):
        return "mtp"
    match = _LAYER_RE.search(low)
    if match is not None and n_layers is not None and int(match.group(1)) >= n_layers:
        return "mtp"
    parts = [p for p in low.split(".") if p not in ("weight", "bias")]
    leaf = parts[-1] if parts else low
    parents = set(parts[:-1])
    if "shared_expert" in low or "shared_experts" in low or "shared_mlp" in low:
        return "mlp"
    if "router" in parts or leaf in ("router", "e_score_correction_bias") or (
        leaf == "gate" and parents & {"mlp", "block_sparse_moe", "feed_forward", "moe"}
    ) or leaf == "gate_inp" or "ffn_gate_inp" in low:
        return "router"
    if "experts" in parts or ".experts." in low or low.endswith(".experts"):
        return "experts"
    attention_parents = {"self_attn", "attn", "attention", "self_attention", "mixer_attn"}
    if ("norm" in leaf or leaf.startswith("ln")) and not parents & attention_parents:
        if leaf in ("word_embeddings_layernorm", "emb_ln", "embed_ln"):
            return "embedding"
        return "norms"
    if leaf in ("embed_tokens", "wte", "wpe", "word_embeddings", "embed_positions", "embed_in", "project_in",
                "position_embeddings", "tok_embeddings") or "embed_tokens" in parts:
        return "embedding"
    if leaf in ("lm_head", "embed_out", "project_out", "output") or parts[:1] == ["lm_head"]:
        return "head"
    if parents & attention_parents or leaf in ("q_proj", "k_proj", "v_proj", "o_proj", "query_key_value", "c_attn", "sinks"):
        return "attention"
    if parents & {"mlp", "feed_forward", "ffn", "block_sparse_moe", "moe"} or leaf in (
        "fc1", "fc2", "c_fc", "dense_h_to_4h", "dense_4h_to_h", "gate_proj", "up_proj", "down_proj",
    ):
        return "mlp"
    return "other"


@dataclass(frozen=True)
class Checkpoint:
    """The tensors of one checkpoint, read from its headers."""

    format: str  # "safetensors" | "gguf"
    source: str  # the folder, file or repo id@revision it was read from
    files: int
    tensors: tuple[Tensor, ...]
    file_bytes: int | None  # the files' sizes, headers included (None: not known)
    quantization: str | None = None  # the quant method its config names (fp8, gptq, awq, ...), GGUF's file type

    @property
    def total_bytes(self) -> int:
        """Bytes of tensor data (headers not included)."""
        return sum(t.nbytes for t in self.tensors)

    @property
    def params(self) -> int:
        """Logical parameters stored (scales and zero points not counted)."""
        return sum(t.params for t in self.tensors)

    def by_dtype(self) -> dict[str, dict[str, int]]:
        """dtype -> tensors, elements (as stored) and bytes, largest first."""
        out: dict[str, dict[str, int]] = {}
        for t in self.tensors:
            row = out.setdefault(t.dtype, {"tensors": 0, "elements": 0, "bytes": 0})
            row["tensors"] += 1
            row["elements"] += elements(t.shape)
            row["bytes"] += t.nbytes
        return dict(sorted(out.items(), key=lambda kv: (-kv[1]["bytes"], kv[0])))

    def by_component(self) -> dict[str, dict[str, int]]:
        """component -> params, weight bytes and scale bytes (in COMPONENTS order, present ones)."""
        out = {c: {"params": 0, "bytes": 0, "scale_bytes": 0, "tensors": 0} for c in COMPONENTS}
        for t in self.tensors:
            row = out[t.component]
            row["tensors"] += 1
            row["params"] += t.params
            row["bytes" if t.role == WEIGHT else "scale_bytes"] += t.nbytes
        return {c: row for c, row in out.items() if row["tensors"]}


# safetensors / ggml dtype of the matmul weights -> the compute dtype an engine runs them at
_COMPUTE_OF = {"F8_E4M3": "fp8", "F8_E5M2": "fp8", "BF16": "bf16", "F16": "fp16", "F32": "fp32"}


@dataclass(frozen=True)
class StoredWeights:
    """A checkpoint's bytes in the groups that shard differently (what inference needs of it):
    the token table and positions (gathered, split T ways), the routed experts (split ep x etp
    ways), the rest of the language model (attention, dense MLP, shared experts, router, norms,
    head: split T ways), the towers (vision/audio encoders, held whole on every GPU) and the MTP
    modules (not loaded for plain decoding)."""

    source: str
    embedding_bytes: int
    experts_bytes: int
    rest_bytes: int
    towers_bytes: int
    mtp_bytes: int
    compute_dtype: str  # the matmul weights' dtype as an engine runs them: fp8, bf16, fp16, fp32

    @property
    def resident_bytes(self) -> int:
        """What a serving engine loads: everything but the MTP modules."""
        return self.embedding_bytes + self.experts_bytes + self.rest_bytes + self.towers_bytes


def stored_weights(ckpt: Checkpoint) -> StoredWeights:
    """The checkpoint's bytes grouped for sharding (see StoredWeights)."""
    groups = {"embedding": 0, "experts": 0, "towers": 0, "mtp": 0, "rest": 0}
    matmul: dict[str, int] = {}
    for t in ckpt.tensors:
        group = t.component if t.component in groups else "rest"
        groups[group] += t.nbytes
        if t.role == WEIGHT and t.component in ("attention", "mlp", "experts") and len(t.shape) >= 2:
            matmul[t.dtype] = matmul.get(t.dtype, 0) + t.nbytes
    dominant = max(matmul.items(), key=lambda kv: (kv[1], kv[0]))[0] if matmul else "BF16"
    return StoredWeights(
        source=ckpt.source,
        embedding_bytes=groups["embedding"],
        experts_bytes=groups["experts"],
        rest_bytes=groups["rest"],
        towers_bytes=groups["towers"],
        mtp_bytes=groups["mtp"],
        compute_dtype=_COMPUTE_OF.get(dominant, "bf16"),
    )
