"""DeepSeek-V4's decode state for inference, part by part (docs/formulas.md §5.16, "Inference").

`tcalc inference`, `serve` and `sweep` price DeepSeek-V4 through the roofline of roofline.py, whose shard
of the model (`shard._deepseek_v4_shard`) holds its cache as sliding-window groups and compressed
groups; this module states that cache by part for the report (`decode_state`), and in bytes of one
sequence (`state_bytes`), from estimators/deepseek_v4.py `cache_elements` (equal to transformers 5.23's
cache tensors: tools/crosscheck/kv_cache_deepseek_v4.py; its measured bytes are test fixtures).

Conventions: the state is held at the KV-cache dtype (`kv_dtype`, by default the activation dtype: the
model's dtype, which transformers' cache tensors take); it stands in for the KV cache (DeepSeek-V4 has no
other cache). The window grows until it holds W - 1 tokens, the compressed entries grow by one per m (m')
tokens without end, the open-window buffers and the CSA overlap stay below a constant: a
constant-plus-growing state. Per GPU: T = 1 (estimators/deepseek_v4.py `check_layout`), every GPU holding its
own B sequences' state also when the routed experts are spread over ep GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from transformer_calc.errors import TcalcError
from transformer_calc.estimators import deepseek_v4 as v4
from transformer_calc.estimators.inference.roofline import KV_DTYPE_BITS, InferenceSpec
from transformer_calc.model.config import ModelConfig
from transformer_calc.model.units import BITS_PER_BYTE


def _bytes(elements: int, bits: int | Fraction) -> int:
    return int(-(-elements * bits // BITS_PER_BYTE))  # whole bytes, rounded up once


def _check(m: ModelConfig) -> None:
    if m.deepseek_v4 is None:
        raise TcalcError("DeepSeek-V4's decode state needs a deepseek_v4 model; give a deepseek_v4 config.json")
    v4.check(m)


def _check_context(context_len: object) -> None:
    if isinstance(context_len, bool) or not isinstance(context_len, int) or context_len < 1:
        raise TcalcError(f"context_len ({context_len!r}) must be a whole number >= 1; give a positive count")


def state_bytes(m: ModelConfig, context_len: int, kv_dtype: str = "bf16") -> int:
    """Decode-state bytes of one sequence after `context_len` tokens (`cache_elements` at the dtype)."""
    _check(m)
    _check_context(context_len)
    if kv_dtype not in KV_DTYPE_BITS:
        raise TcalcError(f"kv_dtype ({kv_dtype!r}) is not a cache dtype; use one of {', '.join(KV_DTYPE_BITS)}")
    return _bytes(v4.cache_elements(m, context_len).total, KV_DTYPE_BITS[kv_dtype])


def appended_elements(m: ModelConfig, context_len: int) -> int:
    """Values one decode token appends at position `context_len`: its window entry in every layer (h_d,
    2·h_d on a sliding-only layer; a full window drops one and adds one, the same count), and its kv and
    gate in every compressor's and indexer's open-window buffer (what roofline.py writes per decode token;
    the entry a closing window compresses is not counted)."""
    _check(m)
    blocks, hd = m.deepseek_v4, m.head_dim
    assert blocks is not None
    n_csa, n_hca = len(blocks.csa_layer_ids), len(blocks.hca_layer_ids)
    window = hd * (2 * (m.n_layers - n_csa - n_hca) + n_csa + n_hca)
    buffers = v4.KV_AND_GATE * (n_csa * v4.CSA_SERIES * (hd + blocks.index_head_dim) + n_hca * hd)
    return window + buffers


@dataclass(frozen=True)
class DecodeStateParts:
    """DeepSeek-V4's decode state at `context_len` tokens, by part, one sequence and B sequences (one GPU
    holds them all: T = 1; with ep GPUs each holds its own B). Each part is rounded up to whole bytes on its
    own; `bytes_per_sequence` once."""

    layers_by_kind: dict[str, int]  # sliding (window only), csa, hca
    compress_rates: dict[str, int]  # csa: m, hca: m'
    dtype: str
    context_len: int
    window_bytes_per_sequence: int  # the last min(c, W - 1) tokens' K = V head
    compressed_bytes_per_sequence: int  # floor(c / m) CSA entries (h_d + d_I), floor(c / m') HCA entries (h_d)
    buffer_bytes_per_sequence: int  # the open windows' c mod m tokens, kv and gate
    overlap_bytes_per_sequence: int  # CSA: the last full window's Ca slice, once c >= m
    bytes_per_sequence: int
    bytes_per_sequence_per_gpu: int
    total_bytes: int  # B sequences
    per_gpu_bytes: int


def decode_state(m: ModelConfig, spec: InferenceSpec, context_len: int | None = None) -> DecodeStateParts:
    """The decode state of `spec`'s B sequences at `context_len` (default: the peak, S + N_new - 1)."""
    _check(m)
    c = spec.peak_context_len if context_len is None else context_len
    _check_context(c)
    blocks = m.deepseek_v4
    assert blocks is not None
    bits = KV_DTYPE_BITS[spec.resolved_kv_dtype]
    parts = v4.cache_elements(m, c)
    n_csa, n_hca = len(blocks.csa_layer_ids), len(blocks.hca_layer_ids)
    per_seq = _bytes(parts.total, bits)
    return DecodeStateParts(
        layers_by_kind={"sliding": m.n_layers - n_csa - n_hca, "csa": n_csa, "hca": n_hca},
        compress_rates={"csa": blocks.csa_compress_rate, "hca": blocks.hca_compress_rate},
        dtype=spec.resolved_kv_dtype,
        context_len=c,
        window_bytes_per_sequence=_bytes(parts.window, bits),
        compressed_bytes_per_sequence=_bytes(parts.compressed, bits),
        buffer_bytes_per_sequence=_bytes(parts.buffers, bits),
        overlap_bytes_per_sequence=_bytes(parts.overlap, bits),
        bytes_per_sequence=per_seq,
        bytes_per_sequence_per_gpu=per_seq,
        total_bytes=spec.batch_size * per_seq,
        per_gpu_bytes=spec.batch_size * per_seq,
    )
