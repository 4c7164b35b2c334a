"""The inference input: batch, lengths, dtypes of the weights, KV cache and activations, parallelism
(`InferenceSpec`), and the dtype tables it is checked against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from transformer_calc.devices.hardware import COLLECTIVE_LATENCY_S, DTYPES, DTYPE_ALIASES
from transformer_calc.errors import TcalcError
from transformer_calc.estimators.inference.quant import FORMATS, resolve_format
from transformer_calc.estimators.inference.rank_parts import KV_TENSORS  # noqa: F401  (re-exported)
from transformer_calc.model.units import BITS_PER_BYTE

if TYPE_CHECKING:  # a checkpoint's module: only a source with a checkpoint imports it (issue 39)
    from transformer_calc.model.checkpoint import StoredWeights



ALL_REDUCES_PER_LAYER = 2  # Megatron-LM: after the attention output and after the MLP output


# Storage dtypes for weights, the KV cache and activations -> bits per element.
DTYPE_BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}


# KV-cache dtypes: the plain ones, and llama.cpp's block-quantized cache types (`--cache-type-k/v`:
# ggml-common.h blocks of 32 values: q8_0 34 B, q4_0 18 B, q4_1 20 B, q5_0 22 B, q5_1 24 B,
# iq4_nl 18 B), as bits per value.
KV_DTYPE_BITS: dict[str, int | Fraction] = DTYPE_BITS | {
    "q8_0": Fraction(34 * 8, 32), "q4_0": Fraction(18 * 8, 32), "q4_1": Fraction(20 * 8, 32),
    "q5_0": Fraction(22 * 8, 32), "q5_1": Fraction(24 * 8, 32), "iq4_nl": Fraction(18 * 8, 32),
}


CHECKPOINT = "checkpoint"  # weight_dtype: the bytes a checkpoint's headers give (InferenceSpec.stored)


_FLOAT_COMPUTE = ("fp32", "fp16", "bf16", "fp8")  # weight dtypes that are also the matmul dtype


_ACTIVATION_DEFAULT = ("fp32", "fp16", "bf16")  # compute dtypes that are also the activation dtype


COMPUTE, MEMORY, MIXED = "compute", "memory", "mixed"


STATE_DTYPE = "fp32"  # a mixer's recurrent state: transformers' LinearAttentionLayer keeps the fp32 state the delta rule returns


MLA_CACHE_KINDS = ("latent", "decompressed")


MAX_TENSOR_PARALLEL = 1024  # the largest T `min_tensor_parallel` tries (beyond any NVLink domain)


MAX_CONTEXT_SEARCH = 2**62  # the longest prompt `inference_memory` reports (bounds its bisection)


# ============================================================================ the input
@dataclass(frozen=True)
class InferenceSpec:
    """What is run: B prompts of S tokens, N_new new tokens each, on T tensor-parallel GPUs.

    Dtypes left as None are derived: compute_dtype (whose peak the roofline uses) is the weight
    dtype for fp32/fp16/bf16/fp8 weights and bf16 for int8/int4 (weight-only quantization:
    kernels dequantize to bf16); activation_dtype (all-reduces, workspace) is the compute dtype
    when that is fp32/fp16/bf16, else bf16; kv_dtype is the activation dtype.

    cache_kv_heads changes the cache only (its size, reads and writes), not the weights: the
    seed's Falcon-40B study pretends MHA this way. To change the model itself, override the
    ModelConfig's n_kv_heads.
    """

    batch_size: int  # B, concurrent sequences
    prompt_len: int  # S, prompt tokens per sequence
    new_tokens: int = 1  # N_new, generated tokens per sequence (the first comes from the prefill)
    tensor_parallel: int = 1  # T
    expert_parallel: int = 1  # ep: each GPU holds n_experts / ep routed experts (weights and reads)
    weight_dtype: str = "bf16"
    kv_dtype: str | None = None
    compute_dtype: str | None = None
    activation_dtype: str | None = None
    cache_kv_heads: int | None = None  # K/V heads the cache holds; None: the model's n_kv_heads
    kv_cache: bool = True  # False: the seed's naive inference, every step reprocesses the context
    collective_latency_s: float = COLLECTIVE_LATENCY_S
    mla_cache: str = "latent"  # MLA: "latent" (r_kv + d_rope per token, transformers 5) or "decompressed"
    stored: StoredWeights | None = None  # a checkpoint's stored bytes, used when weight_dtype is "checkpoint"
    # images per sequence, encoded by the vision tower in the prefill; their tokens are part of
    # prompt_len (`with_images` adds both)
    images: int = 0
    state_dtype: str | None = None  # hybrids: the recurrent (delta-rule / SSM) state's dtype; None: fp32
    # MoE: redundant expert slots (SGLang --ep-num-redundant-experts, DeepSeek's EPLB): the ep GPUs
    # hold n_experts + r expert copies, (n_experts + r) / ep each; routing (k per token) is unchanged
    redundant_experts: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.redundant_experts, bool) or not isinstance(self.redundant_experts, int) or self.redundant_experts < 0:
            raise ValueError(f"redundant_experts ({str(self.redundant_experts)[:40]!r}) must be a whole number >= 0")
        for name in ("batch_size", "prompt_len", "new_tokens", "tensor_parallel", "expert_parallel"):
            check_positive_int(name, getattr(self, name))
        if isinstance(self.images, bool) or not isinstance(self.images, int) or self.images < 0:
            raise ValueError(f"images ({str(self.images)[:40]!r}) must be a whole number >= 0")
        if self.cache_kv_heads is not None:
            check_positive_int("cache_kv_heads", self.cache_kv_heads)
        if not isinstance(self.kv_cache, bool):
            raise ValueError(f"kv_cache ({self.kv_cache!r}) must be true or false")
        if self.mla_cache not in MLA_CACHE_KINDS:
            raise ValueError(f"mla_cache ({str(self.mla_cache)[:80]!r}) must be one of {', '.join(MLA_CACHE_KINDS)}")
        latency = self.collective_latency_s
        if isinstance(latency, bool) or not isinstance(latency, (int, float)) or not (
            math.isfinite(latency) and latency >= 0
        ):
            raise ValueError(
                f"collective_latency_s ({latency!r}) must be a finite number of seconds >= 0"
            )
        if isinstance(self.weight_dtype, str) and self.weight_dtype.strip().lower() == CHECKPOINT:
            if self.stored is None:
                raise ValueError("weight_dtype 'checkpoint' needs a checkpoint (a model folder, repo id or .gguf file)")
            weight = CHECKPOINT
        else:
            weight = _weight_dtype(self.weight_dtype)
        if self.compute_dtype is None:
            compute = self.stored.compute_dtype if weight == CHECKPOINT and self.stored is not None else (
                weight if weight in _FLOAT_COMPUTE else "bf16")
        else:
            compute = checked_dtype("compute_dtype", self.compute_dtype, DTYPES)
        if self.activation_dtype is None:
            activation = compute if compute in _ACTIVATION_DEFAULT else "bf16"
        else:
            activation = checked_dtype("activation_dtype", self.activation_dtype, DTYPE_BITS)
        kv = activation if self.kv_dtype is None else checked_dtype("kv_dtype", self.kv_dtype, KV_DTYPE_BITS)
        state = STATE_DTYPE if self.state_dtype is None else checked_dtype("state_dtype", self.state_dtype, DTYPE_BITS)
        for name, value in (
            ("weight_dtype", weight),
            ("compute_dtype", compute),
            ("activation_dtype", activation),
            ("kv_dtype", kv),
            ("state_dtype", state),
            ("collective_latency_s", float(latency)),
        ):
            object.__setattr__(self, name, value)  # resolved once; the dataclass stays frozen

    @property
    def peak_context_len(self) -> int:
        """Tokens per sequence in the cache at the last decode step: S + N_new - 1."""
        return self.prompt_len + self.new_tokens - 1

    # The derived dtypes as __post_init__ resolved them: a None given is never left in a built spec.
    @property
    def resolved_kv_dtype(self) -> str:
        assert self.kv_dtype is not None  # resolved in __post_init__
        return self.kv_dtype

    @property
    def resolved_compute_dtype(self) -> str:
        assert self.compute_dtype is not None  # resolved in __post_init__
        return self.compute_dtype

    @property
    def resolved_state_dtype(self) -> str:
        assert self.state_dtype is not None  # resolved in __post_init__
        return self.state_dtype

    @property
    def resolved_activation_dtype(self) -> str:
        assert self.activation_dtype is not None  # resolved in __post_init__
        return self.activation_dtype


def check_positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} ({value!r}) must be a whole number >= 1")


def checked_dtype(name: str, value: object, allowed: dict[str, int] | dict[str, int | Fraction] | tuple[str, ...]) -> str:
    key = value.strip().lower() if isinstance(value, str) else None
    key = DTYPE_ALIASES.get(key, key) if key is not None else None
    if key is None or key not in allowed:
        raise ValueError(f"{name} ({value!r}) is not supported; use one of {', '.join(allowed)}")
    return key


def _weight_dtype(value: object) -> str:
    """A plain dtype (DTYPE_BITS) or a quantization format with its scales (quant.FORMATS)."""
    if isinstance(value, str) and (fmt := resolve_format(value)) is not None:
        return fmt
    try:
        return checked_dtype("weight_dtype", value, DTYPE_BITS)
    except TcalcError:
        raise
    except ValueError:
        raise ValueError(
            f"weight_dtype ({str(value)[:40]!r}) is not supported; use one of {', '.join(DTYPE_BITS)} "
            f"or a quantized format: {', '.join(FORMATS)}"
        ) from None


def dtype_bytes(dtype: str) -> Fraction:
    """Bytes per element: bits / 8, exact (int4: 1/2)."""
    return Fraction(DTYPE_BITS[checked_dtype("dtype", dtype, DTYPE_BITS)], BITS_PER_BYTE)


def storage_bytes(elements: int, bits: int | Fraction) -> int:
    """Whole bytes holding `elements` values of `bits` bits (int4: rounded up once)."""
    return -(-elements * bits // BITS_PER_BYTE)
