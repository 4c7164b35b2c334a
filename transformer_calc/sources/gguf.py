"""A GGUF file (llama.cpp) -> a tcalc model spec and its tensors' exact bytes, header only.

`read_gguf(path)` reads the header and the tensor-info table of one GGUF file and returns
(spec, checkpoint): a raw ModelConfig spec (the field names `transformer_calc.sources.hf` produces for the
same family) and a `Checkpoint` with one `Tensor` per GGUF tensor. Tensor data is never read.

The header is walked here with `struct`, not handed to `gguf.GGUFReader`: that reader memory-maps
the file and trusts every length in it (a string "of 2^40 bytes" or an array "of 2^40 items" is
taken at its word), and it builds a numpy view per tokenizer string (seconds for a 256k vocabulary).
The `gguf` package (llama.cpp's gguf-py) supplies the format's constants: the magic, the value
types, the ggml types and their block sizes (gguf-py/gguf/constants.py `GGML_QUANT_SIZES`), and
the file types (`LlamaFileType`). Layout (ggml/src/gguf.cpp, docs in ggml/docs/gguf.md):

    magic "GGUF" | u32 version (2, 3) | u64 n_tensors | u64 n_kv
    n_kv x (string key, u32 value type, value)              string = u64 length + bytes
    n_tensors x (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset)
    padding to `general.alignment` (default 32) | tensor data, each at data start + offset

Every length is checked against the file's size before it is used, and the counts are capped
(module constants below), so a hostile file gives one TcalcError line, in milliseconds, with no
large allocation. Every tensor must be of a known ggml type, have rows its block divides, start at
an aligned offset and end inside the file, and not overlap another (gguf.cpp refuses the same).

Bytes of a tensor: elements / block * type_size (`GGML_QUANT_SIZES`), which is what its data
spans in the file. `Tensor.shape` is in numpy / PyTorch order (ggml's ne reversed), as safetensors
lists it; `params` is its element count (GGUF stores logical shapes); role is always "weight".

Tensor names -> checkpoint components (gguf-py/gguf/constants.py TENSOR_NAMES, src/llama-arch.cpp):
token_embd, position_embd: embedding; output: head; output_norm and blk.N.*_norm: norms, but the
q/k norms and MLA's latent norms (attn_q_norm, attn_k_norm, attn_q_a_norm, attn_kv_a_norm):
attention; blk.N.attn_*: attention; ffn_gate_inp, exp_probs_b: router; ffn_*_exps: experts;
ffn_*_shexp, ffn_gate_inp_shexp, ffn_gate/up/down: mlp; NextN (MTP) layers (`nextn` in the name,
or block index >= block_count - nextn_predict_layers): mtp; anything else (rope_freqs, ...): other.

The spec reproduces the file exactly: every tensor the metadata implies is checked against the
file by name and ggml shape, as llama.cpp's loader does (src/llama-model.cpp `create_tensor`), and
a missing, extra or misshapen tensor is an error, so `count_params(build_model(spec)).total`
(+ `.mtp` with NextN layers) equals the file's elements except the tensors llama.cpp stores that
transformers has no parameter for (`NOT_IN_TRANSFORMERS`: rope_freqs, rope_factors_long/short,
DeepSeek's exp_probs_b, which transformers keeps as a buffer).

Flags the metadata does not carry are read from the tensors present: tied embeddings (no
`output`), q/k/v, output and MLP biases, Phi-3's fused qkv. Sliding windows follow what llama.cpp
runs, not the Hugging Face config: gemma2 and gpt-oss every other layer, gemma3 five layers in six;
phi3 (its window is switched off in llama.cpp) and Mistral GGUFs (llama architecture: no window
key) run full attention.
"""

from __future__ import annotations

import math
import mmap
import os
import re
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformer_calc.model.checkpoint import WEIGHT, Checkpoint, Tensor
from transformer_calc.sources.files import regular_file
from transformer_calc.errors import TcalcError, clip

# ---------------------------------------------------------------------------- limits
# Far above any published model (Llama-3.1-405B: 1,138 tensors, about 40 KVs; the largest
# tokenizer arrays hold a few 100k strings), far below what would cost memory or time.
MAX_TENSORS = 100_000
MAX_KVS = 10_000
MAX_KEY_BYTES = 1024  # keys are under 100 bytes (ggml/docs/gguf.md allows 2^16 - 1)
MAX_NAME_BYTES = 63  # GGML_MAX_NAME (64) with its NUL: gguf.cpp refuses longer tensor names
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ARRAY_ITEMS = 1 << 24  # items of one numeric metadata array
MAX_STRING_ITEMS = 1 << 21  # strings of one metadata array (each length is walked: 2M in ~0.2 s)
KEEP_STRING_BYTES = 1024  # longer string values (chat templates) are skipped, not decoded
# So at most MAX_KVS * (MAX_KEY_BYTES + KEEP_STRING_BYTES) = 20 MB of metadata is ever decoded;
# arrays are skipped (their item type and length are kept), whatever their size.
MAX_ELEMENTS = 2**63 - 1  # gguf.cpp: a tensor's ne product must fit int64_t
MAX_PATTERN = 4096  # layers a sliding-window pattern is derived from (ModelConfig.MAX_PATTERN)
DEFAULT_ALIGNMENT = 32  # GGUF_DEFAULT_ALIGNMENT (gguf-py/gguf/constants.py)
GGUF_VERSIONS = (2, 3)  # gguf.cpp and GGUFReader: v1 (2023) had 32-bit counts

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


# ---------------------------------------------------------------------------- the header
@dataclass(frozen=True)
class _Array:
    """A metadata array: its item type and length (its items are skipped)."""

    item_type: int
    count: int


@dataclass(frozen=True)
class _Skipped:
    """A string value too long to keep (a chat template): only its length."""

    length: int


@dataclass(frozen=True)
class _Info:
    """One tensor-info entry: ggml dims (ne[0] first), ggml type, offset in the data section."""

    name: str
    dims: tuple[int, ...]
    ggml_type: int
    offset: int


# GGUF value types (gguf-py/gguf/constants.py GGUFValueType) -> struct codes of the scalars
_STRING, _ARRAY = 8, 9
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class Reader:
    """A bounds-checked cursor over the mapped file: every read names what it reads."""

    def __init__(self, buf: Any, size: int, where: str) -> None:
        self.buf, self.size, self.where, self.pos, self.endian = buf, size, where, 0, "<"

    def fail(self, problem: str) -> TcalcError:
        return TcalcError(f"{self.where}: {problem}")

    def need(self, n: int, what: str) -> None:
        if n > self.size - self.pos:
            raise self.fail(
                f"truncated header: {what} at byte {self.pos:,} needs {n:,} bytes but the file ends at byte "
                f"{self.size:,}; the file is incomplete or not a GGUF file (download it again)"
            )

    def unpack(self, code: str, what: str) -> Any:
        fmt = self.endian + code
        n = struct.calcsize(fmt)
        self.need(n, what)
        value = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += n
        return value

    def length(self, what: str) -> int:
        n: int = self.unpack("Q", f"the length of {what}")
        if n > self.size - self.pos:
            raise self.fail(
                f"{what} at byte {self.pos - 8:,} declares {n:,} bytes, past the end of the file "
                f"({self.size:,} bytes); the file is damaged or not a GGUF file"
            )
        return n

    def text(self, what: str, limit: int) -> str:
        """A string decoded as UTF-8, at most `limit` bytes long."""
        n = self.length(what)
        if n > limit:
            raise self.fail(f"{what} at byte {self.pos - 8:,} is {n:,} bytes long; at most {limit:,} are allowed")
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} at byte {self.pos - n:,} is not UTF-8 text ({clip(raw, 40)})") from None

    def value(self, vtype: int, key: str) -> Any:
        """One metadata value (gguf.cpp gguf_read_emplace_helper); arrays are not nested."""
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype], f"the value of {clip(key, 60)}")
        if vtype == _STRING:
            n = self.length(f"the string value of {clip(key, 60)}")
            start, self.pos = self.pos, self.pos + n
            if n > KEEP_STRING_BYTES:
                return _Skipped(n)
            return bytes(self.buf[start : start + n]).decode("utf-8", errors="replace")
        if vtype != _ARRAY:
            raise self.fail(f"metadata {clip(key, 60)} has value type {vtype}, not a GGUF type (0-12); the file is damaged")
        item = self.unpack("I", f"the item type of {clip(key, 60)}")
        count = self.unpack("Q", f"the length of {clip(key, 60)}")
        left = self.size - self.pos
        if item == _STRING:
            if count > MAX_STRING_ITEMS:
                raise self.fail(
                    f"metadata array {clip(key, 60)} declares {count:,} strings; at most {MAX_STRING_ITEMS:,} are read"
                )
            if count * 8 > left:  # each string has at least its 8-byte length
                raise self.fail(
                    f"metadata array {clip(key, 60)} declares {count:,} strings, more than the {left:,} bytes "
                    "left in the file can hold; the file is damaged or truncated"
                )
            fmt, buf, size, pos = self.endian + "Q", self.buf, self.size, self.pos
            for _ in range(count):  # bounded: count * 8 <= the bytes left
                if pos + 8 > size:
                    self.pos = pos
                    self.need(8, f"a string of {clip(key, 60)}")
                (n,) = struct.unpack_from(fmt, buf, pos)
                pos += 8 + n
                if pos > size:
                    raise self.fail(
                        f"a string of {clip(key, 60)} at byte {pos - n - 8:,} declares {n:,} bytes, past the end of "
                        f"the file ({size:,} bytes); the file is damaged or truncated"
                    )
            self.pos = pos
            return _Array(item, count)
        if item not in _SCALARS:
            what = "arrays of arrays are not read" if item == _ARRAY else f"item type {item} is not a GGUF type"
            raise self.fail(f"metadata array {clip(key, 60)}: {what}; the file is damaged or not a model file")
        if count > MAX_ARRAY_ITEMS:
            raise self.fail(f"metadata array {clip(key, 60)} declares {count:,} items; at most {MAX_ARRAY_ITEMS:,} are read")
        width = struct.calcsize(_SCALARS[item])
        self.need(count * width, f"the {count:,} items of {clip(key, 60)}")
        self.pos += count * width
        return _Array(item, count)


def _parse(buf: Any, size: int, where: str) -> tuple[dict[str, Any], list[_Info], int, int]:
    """(metadata, tensor infos, data section start, alignment), every length checked."""
    r = Reader(buf, size, where)
    r.need(4, "the magic")
    if bytes(buf[0:4]) != b"GGUF":
        raise r.fail(f"not a GGUF file (it starts with {clip(bytes(buf[0:4]))}, not b'GGUF'); give a llama.cpp .gguf model")
    r.pos = 4
    version = r.unpack("I", "the version")
    if version & 0xFFFF == 0 and version != 0:  # a big-endian file (gguf-py GGUFReader does the same)
        r.endian, version = ">", struct.unpack(">I", struct.pack("<I", version))[0]
    if version not in GGUF_VERSIONS:
        hint = (
            "version 1 files (before August 2023) are no longer read by llama.cpp: convert the model again"
            if version == 1 else "the file is damaged or not a GGUF model"
        )
        raise r.fail(f"GGUF version {version} is not supported (llama.cpp reads versions 2 and 3); {hint}")
    n_tensors = r.unpack("Q", "the tensor count")
    n_kv = r.unpack("Q", "the metadata count")
    if n_tensors > MAX_TENSORS:
        raise r.fail(
            f"declares {n_tensors:,} tensors; at most {MAX_TENSORS:,} are read (published models hold a few thousand)"
        )
    if n_kv > MAX_KVS:
        raise r.fail(f"declares {n_kv:,} metadata keys; at most {MAX_KVS:,} are read (published models hold about 50)")
    meta: dict[str, Any] = {}
    for _ in range(n_kv):
        key = r.text("a metadata key", MAX_KEY_BYTES)
        if key in meta:
            raise r.fail(f"metadata key {clip(key, 60)} is given twice; the file is damaged")
        vtype = r.unpack("I", f"the value type of {clip(key, 60)}")
        meta[key] = r.value(vtype, key)
    infos: list[_Info] = []
    seen: set[str] = set()
    for _ in range(n_tensors):
        name = r.text("a tensor name", MAX_NAME_BYTES)
        if name in seen:
            raise r.fail(f"tensor {clip(name)} is listed twice; the file is damaged")
        seen.add(name)
        n_dims = r.unpack("I", f"the dimension count of tensor {clip(name)}")
        if n_dims > MAX_DIMS:
            raise r.fail(f"tensor {clip(name)} has {n_dims:,} dimensions; ggml tensors have at most {MAX_DIMS}")
        dims = tuple(r.unpack("Q", f"dimension {j} of tensor {clip(name)}") for j in range(n_dims))
        ggml_type = r.unpack("I", f"the ggml type of tensor {clip(name)}")
        offset = r.unpack("Q", f"the offset of tensor {clip(name)}")
        infos.append(_Info(name, dims, ggml_type, offset))
    alignment = meta.get("general.alignment", DEFAULT_ALIGNMENT)
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
        raise r.fail(f"general.alignment ({clip(alignment)}) must be a power of two (gguf.cpp); the file is damaged")
    data_start = -(-r.pos // alignment) * alignment
    return meta, infos, data_start, alignment


def _tensor_bytes(
    infos: list[_Info], data_start: int, alignment: int, size: int, where: str, g: Any
) -> list[tuple[_Info, str, int]]:
    """(info, ggml type name, stored bytes) per tensor: known types, whole blocks, aligned
    offsets, inside the file, no overlaps (gguf.cpp gguf_init_from_file_impl)."""
    out: list[tuple[_Info, str, int]] = []
    for t in infos:
        name = clip(t.name)
        try:
            qtype = g.GGMLQuantizationType(t.ggml_type)
            block, type_size = g.GGML_QUANT_SIZES[qtype]
        except TcalcError:
            raise
        except (ValueError, KeyError):
            raise TcalcError(
                f"{where}: tensor {name} has ggml type {t.ggml_type}, which the installed gguf package does not "
                "know (a removed type, or one newer than the package): upgrade it (pip install -U gguf) or "
                "convert the model again"
            ) from None
        n = 1
        for d in t.dims:
            if d > MAX_ELEMENTS:
                raise TcalcError(f"{where}: tensor {name} has dimension {d:,}, above int64; the file is damaged")
            n *= d
        if n > MAX_ELEMENTS:
            raise TcalcError(
                f"{where}: tensor {name} dims {list(t.dims)} hold {n:.3e} elements, more than int64 can count; "
                "the file is damaged"
            )
        row = t.dims[0] if t.dims else 1
        if row % block:
            raise TcalcError(
                f"{where}: tensor {name} has rows of {row:,} elements, not a multiple of the {qtype.name} block "
                f"of {block}; the file is damaged"
            )
        if t.offset % alignment:
            raise TcalcError(
                f"{where}: tensor {name} starts at offset {t.offset:,}, not a multiple of the alignment {alignment}"
            )
        nbytes = n // block * type_size
        end = data_start + t.offset + nbytes
        if end > size:
            raise TcalcError(
                f"{where}: tensor {name} ({nbytes:,} bytes at offset {t.offset:,}) runs past the end of the file "
                f"({size:,} bytes); the file is truncated or damaged (download it again)"
            )
        out.append((t, qtype.name, nbytes))
    spans = sorted((t.offset, t.offset + nbytes, t.name) for t, _, nbytes in out)
    for (_, end_a, a), (start_b, _, b) in zip(spans, spans[1:]):
        if start_b < end_a:
            raise TcalcError(f"{where}: tensors {clip(a)} and {clip(b)} overlap in the data section; the file is damaged")
    return out


# ---------------------------------------------------------------------------- metadata -> spec
class _Meta:
    """The architecture's metadata keys (`{arch}.key`), read with type checks that name the key."""

    def __init__(self, kv: dict[str, Any], arch: str, where: str) -> None:
        self.kv, self.arch, self.where = kv, arch, where

    def opt_int(self, key: str) -> int | None:
        full = f"{self.arch}.{key}"
        value = self.kv.get(full)
        if value is None:
            return None
        if isinstance(value, _Array):
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


class _Expected:
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


def _vocab(m: _Meta, kv: dict[str, Any], infos: dict[str, _Info]) -> int:
    """V: {arch}.vocab_size, else the tokenizer's token count (llama.cpp's n_vocab), else the
    token embedding's rows."""
    V = m.opt_int("vocab_size")
    tokens = kv.get("tokenizer.ggml.tokens")
    if V is None and isinstance(tokens, _Array):
        V = tokens.count
    if V is None and "token_embd.weight" in infos and len(infos["token_embd.weight"].dims) == 2:
        V = infos["token_embd.weight"].dims[1]
    if not V:
        raise TcalcError(f"{m.where}: no vocabulary size: neither {m.arch}.vocab_size, tokenizer.ggml.tokens nor token_embd")
    return V


def _dims(m: _Meta, kv: dict[str, Any], infos: dict[str, _Info], n_tensors: int) -> _Dims:
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


def _window(m: _Meta, fam: Family, L: int) -> dict[str, Any]:
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
    e: _Expected, i: int, d: _Dims, qkv_bias: bool, out_bias: bool, fused: bool, qk_norm: bool, sinks: bool
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


def _dense_mlp(e: _Expected, i: int, D: int, F: int, bias: bool, fused_gate_up: bool) -> None:
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


def _experts(e: _Expected, i: int, D: int, Fe: int, E: int, bias: bool, router_bias: bool, names: set[str]) -> None:
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


def _shared(e: _Expected, i: int, D: int, Fs: int, gate: bool) -> None:
    """Shared expert(s): ffn_gate_shexp/ffn_up_shexp {D, Fs}, ffn_down_shexp {Fs, D}; Qwen2-MoE's
    sigmoid gate ffn_gate_inp_shexp {D}."""
    p = f"blk.{i}."
    e.add(p + "ffn_gate_shexp.weight", D, Fs)
    e.add(p + "ffn_up_shexp.weight", D, Fs)
    e.add(p + "ffn_down_shexp.weight", Fs, D)
    if gate:
        e.add(p + "ffn_gate_inp_shexp.weight", D)


def _ends(e: _Expected, D: int, V: int, tied: bool) -> None:
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


def _llama_like(arch: str, m: _Meta, kv: dict[str, Any], infos: dict[str, _Info]) -> tuple[dict[str, Any], _Expected]:
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
    e = _Expected()
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


def _deepseek2(m: _Meta, kv: dict[str, Any], infos: dict[str, _Info]) -> tuple[dict[str, Any], _Expected]:
    """LLM_ARCH_DEEPSEEK2 (src/llama-model.cpp; convert_hf_to_gguf.py DeepseekV2Model): multi-head
    latent attention, leading dense blocks, routed and shared experts. Newer converts store MLA as
    MQA over the latent (head_count_kv 1, key_length kv_lora_rank + rope, key_length_mla /
    value_length_mla the real heads) with kv_b split into attn_k_b {nope, kv_lora, A} and attn_v_b
    {kv_lora, v, A}; older ones key_length / value_length and attn_kv_b {kv_lora, A*(nope + v)}."""
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
    e = _Expected()
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


def _check(where: str, arch: str, spec: dict[str, Any], expected: _Expected, infos: list[_Info]) -> None:
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


def _file_type(kv: dict[str, Any], g: Any) -> str | None:
    """general.file_type as llama.cpp names it (llama.h llama_ftype): Q4_K_M, Q8_0, F16, BF16, ..."""
    value = kv.get("general.file_type")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    try:
        name = g.LlamaFileType(value).name
    except TcalcError:
        raise
    except ValueError:
        return None
    if name == "GUESSED":
        return None
    return re.sub(r"^(?:MOSTLY_|ALL_)", "", name)


# ---------------------------------------------------------------------------- the file
def _open(path: Path, where: str) -> tuple[int, int]:
    """(fd, size) of a regular, non-empty file (`files.regular_file`, the rule every user file follows)."""
    regular_file(path, where, "the .gguf file")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise TcalcError(f"{where} cannot be read: {exc.strerror}") from None
    after = os.fstat(fd)
    if not stat.S_ISREG(after.st_mode):  # replaced between stat and open
        os.close(fd)
        raise TcalcError(f"{where} is not a regular file; give a file on disk")
    if after.st_size == 0:
        os.close(fd)
        raise TcalcError(f"{where} is empty; give a llama.cpp .gguf model")
    return fd, after.st_size


def _gguf_package(where: str) -> Any:
    try:
        import gguf
    except ImportError:
        raise TcalcError("reading a .gguf file needs the gguf package: pip install 'transformer-calc[gguf]'") from None
    except Exception as exc:  # a broken install (its numpy, ...): still one line
        raise TcalcError(f"reading {where} needs the gguf package, which failed to import: {clip(str(exc), 120)}") from None
    return gguf


def read_gguf(path: Path) -> tuple[dict[str, Any], Checkpoint]:
    """(ModelConfig spec dict, Checkpoint(format="gguf", source=str(path), files=1, tensors=...,
    file_bytes=<file size>, quantization=<general.file_type name, e.g. "Q4_K_M", or None>)).

    Header and tensor-info only; any problem is one TcalcError line naming the file."""
    path = Path(path)
    where = f"GGUF file {clip(str(path))}"
    g = _gguf_package(where)
    fd, size = _open(path, where)
    try:
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as buf:
            meta, infos, data_start, alignment = _parse(buf, size, where)
    except TcalcError:
        raise
    except (OSError, ValueError) as exc:  # mmap refused (a special file system), ...
        raise TcalcError(f"{where} cannot be read: {clip(str(exc), 120)}") from None
    finally:
        os.close(fd)
    split = meta.get("split.count")
    if isinstance(split, int) and not isinstance(split, bool) and split > 1:
        raise TcalcError(
            f"{where} is one shard of a GGUF split in {split} files; merge them first "
            "(llama-gguf-split --merge FIRST.gguf OUT.gguf) and give the merged file"
        )
    if not infos:
        raise TcalcError(f"{where} holds no tensors (a vocabulary-only file?); give a model file")
    stored = _tensor_bytes(infos, data_start, alignment, size, where, g)
    arch = meta.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise TcalcError(f"{where} has no general.architecture; it is not a llama.cpp model file")
    if arch not in ARCHITECTURES:
        raise TcalcError(
            f"{where}: architecture {clip(arch, 40)} is not supported; tcalc reads GGUF models of: "
            + ", ".join(SUPPORTED_ARCHITECTURES)
        )
    m = _Meta(meta, arch, where)
    by_name = {t.name: t for t in infos}
    spec, expected = _deepseek2(m, meta, by_name) if arch == "deepseek2" else _llama_like(arch, m, meta, by_name)
    _check(where, arch, spec, expected, infos)
    mtp_from = spec["n_layers"] if spec.get("mtp_layers") else None
    tensors = tuple(
        Tensor(
            name=t.name,
            dtype=dtype,
            shape=tuple(reversed(t.dims)),
            nbytes=nbytes,
            params=0 if not_in_transformers(t.name) else math.prod(t.dims),  # buffers, not parameters
            component=component_of(t.name, mtp_from),
            role=WEIGHT,
        )
        for t, dtype, nbytes in stored
    )
    name = meta.get("general.name")
    spec["name"] = name.strip()[:200] if isinstance(name, str) and name.strip() else path.stem
    spec["dropout"] = 0.0
    spec["source"] = str(path)
    checkpoint = Checkpoint(
        format="gguf", source=str(path), files=1, tensors=tensors, file_bytes=size,
        quantization=_file_type(meta, g),
    )
    return spec, checkpoint
