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
from pathlib import Path
from typing import Any

from transformer_calc.errors import TcalcError, clip
from transformer_calc.model.checkpoint import Checkpoint, Tensor, WEIGHT
from transformer_calc.sources.gguf_families import (  # noqa: F401  (re-exported)
    ARCHITECTURES,
    Expected,
    FAMILIES,
    Family,
    MAX_PATTERN,
    Meta,
    NOT_IN_TRANSFORMERS,
    SUPPORTED_ARCHITECTURES,
    check_tensors,
    component_of,
    deepseek2,
    llama_like,
    mlp_attention_biases,
    not_in_transformers,
)
from transformer_calc.sources.gguf_reader import (  # noqa: F401  (re-exported)
    ArrayValue,
    DEFAULT_ALIGNMENT,
    GGUF_VERSIONS,
    KEEP_STRING_BYTES,
    MAX_ARRAY_ITEMS,
    MAX_DIMS,
    MAX_ELEMENTS,
    MAX_KEY_BYTES,
    MAX_KVS,
    MAX_NAME_BYTES,
    MAX_STRING_ITEMS,
    MAX_TENSORS,
    Reader,
    TensorInfo,
    gguf_package,
    open_regular,
    parse_header,
    tensor_bytes,
)

# The bounds-checked reader of a file's header and tensor infos (gguf_reader.py) and the families it
# maps to a ModelConfig spec (gguf_families.py) live beside this module; their names are re-exported
# here, the public import path.


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


def read_gguf(path: Path) -> tuple[dict[str, Any], Checkpoint]:
    """(ModelConfig spec dict, Checkpoint(format="gguf", source=str(path), files=1, tensors=...,
    file_bytes=<file size>, quantization=<general.file_type name, e.g. "Q4_K_M", or None>)).

    Header and tensor-info only; any problem is one TcalcError line naming the file."""
    path = Path(path)
    where = f"GGUF file {clip(str(path))}"
    g = gguf_package(where)
    fd, size = open_regular(path, where)
    try:
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as buf:
            meta, infos, data_start, alignment = parse_header(buf, size, where)
    except TcalcError:
        raise
    except (OSError, ValueError) as exc:  # mmap refused (a special file system), ...
        raise TcalcError(f"{where} cannot be read: {clip(str(exc), 120)}") from None
    finally:
        os.close(fd)
    _check_whole_model(meta, infos, where)
    stored = tensor_bytes(infos, data_start, alignment, size, where, g)
    arch = meta.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise TcalcError(f"{where} has no general.architecture; it is not a llama.cpp model file")
    if arch not in ARCHITECTURES:
        raise TcalcError(
            f"{where}: architecture {clip(arch, 40)} is not supported; tcalc reads GGUF models of: "
            + ", ".join(SUPPORTED_ARCHITECTURES)
        )
    m = Meta(meta, arch, where)
    by_name = {t.name: t for t in infos}
    spec, expected = deepseek2(m, meta, by_name) if arch == "deepseek2" else llama_like(arch, m, meta, by_name)
    check_tensors(where, arch, spec, expected, infos)
    tensors = _tensors(stored, spec["n_layers"] if spec.get("mtp_layers") else None)
    name = meta.get("general.name")
    spec["name"] = name.strip()[:200] if isinstance(name, str) and name.strip() else path.stem
    spec["dropout"] = 0.0
    spec["source"] = str(path)
    checkpoint = Checkpoint(
        format="gguf", source=str(path), files=1, tensors=tensors, file_bytes=size,
        quantization=_file_type(meta, g),
    )
    return spec, checkpoint


def _check_whole_model(meta: dict[str, Any], infos: Any, where: str) -> None:
    """One whole model file: not a shard of a split, not a vocabulary-only file."""
    split = meta.get("split.count")
    if isinstance(split, int) and not isinstance(split, bool) and split > 1:
        raise TcalcError(
            f"{where} is one shard of a GGUF split in {split} files; merge them first "
            "(llama-gguf-split --merge FIRST.gguf OUT.gguf) and give the merged file"
        )
    if not infos:
        raise TcalcError(f"{where} holds no tensors (a vocabulary-only file?); give a model file")


def _tensors(stored: Any, mtp_from: int | None) -> tuple[Tensor, ...]:
    """The stored tensors as the checkpoint's Tensor records (transformers' shape order, its components)."""
    return tuple(
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
