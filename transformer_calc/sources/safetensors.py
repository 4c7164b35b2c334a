"""Safetensors headers, read and checked as hostile input; never the weights.

Format (huggingface/safetensors, docs "Format"): 8 bytes, a little-endian u64 N, then N bytes of
UTF-8 JSON: `{"__metadata__": {str: str}, name: {"dtype": D, "shape": [..], "data_offsets":
[begin, end]}, ...}`, then the data; offsets are relative to the end of the header. This module
reads the first 8 + N bytes of a file (or takes them from an HTTP range read) and checks what the
safetensors library checks, with limits that fail fast:

- N at most MAX_HEADER_BYTES (100,000,000, safetensors' own `MAX_HEADER_SIZE`) and within the file;
- at most MAX_TENSORS tensors per file, counted before the JSON is parsed;
- every dtype known (`checkpoint.SAFETENSORS_BITS`), shapes of at most MAX_DIMS non-negative
  integers, `end - begin` equal to the shape's bytes, offsets within the data and not
  overlapping, duplicate names refused.

Logical parameters of packed tensors (what `Tensor.params` holds):
- GPTQ / AWQ `qweight` and compressed-tensors `weight_packed` (I32): 32 / bits per element
  (bits from the config's quantization_config, default 4);
- gpt-oss MXFP4 `*_blocks` (U8): 2 FP4 codes per byte;
- a U8 `weight` with quantization metadata beside it (NVFP4 ModelOpt checkpoints, bitsandbytes
  4-bit): 2 codes per byte;
- everything else one per element (FP8 included); quantization metadata (`checkpoint.is_scale`)
  none.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from transformer_calc.model.checkpoint import SAFETENSORS_BITS, SCALE, WEIGHT, Checkpoint, Tensor, component_of, elements, is_scale
from transformer_calc.errors import TcalcError, clip, known_list
from transformer_calc.sources.files import regular_file

MAX_HEADER_BYTES = 100_000_000  # safetensors' MAX_HEADER_SIZE
MAX_TENSORS = 300_000  # per file; the largest published shards hold a few thousand
MAX_FILES = 10_000  # shards of one checkpoint
MAX_DIMS = 8
MAX_DIM = 1 << 48  # one dimension
LENGTH_BYTES = 8

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)  # a JSON string, escapes included
_BRACKET = re.compile(r"[{}\[\]]")

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


def header_length(first: bytes, where: str, file_size: int | None = None) -> int:
    """N from the first 8 bytes, checked against the limits and the file's size."""
    if len(first) < LENGTH_BYTES:
        raise TcalcError(f"{where}: {len(first)} bytes; a safetensors file starts with an 8-byte header length")
    (n,) = struct.unpack("<Q", first[:LENGTH_BYTES])
    if n < 2 or n > MAX_HEADER_BYTES:
        raise TcalcError(
            f"{where}: header length {clip(n)} is not that of a safetensors file (2 to {MAX_HEADER_BYTES:,} bytes)"
        )
    if file_size is not None and LENGTH_BYTES + n > file_size:
        raise TcalcError(f"{where}: header of {n:,} bytes runs past the end of the {file_size:,}-byte file (truncated?)")
    return n


def _pairs(where: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def hook(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise TcalcError(f"{where}: tensor {clip(key)} appears twice in the header")
            out[key] = value
        return out

    return hook


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_header(raw: bytes, where: str, data_size: int | None = None) -> dict[str, tuple[str, tuple[int, ...], int, int]]:
    """name -> (dtype, shape, begin, end) of one header's JSON (`raw`: its N bytes), checked."""
    count = raw.count(b'"data_offsets"')
    if count > MAX_TENSORS:
        raise TcalcError(f"{where}: the header declares {count:,} tensors; more than {MAX_TENSORS:,} per file are refused")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TcalcError(f"{where}: the header is not UTF-8 JSON (not a safetensors file?)") from None
    depth = 0
    # nesting pre-scan (a header is 3 levels deep; json.loads recurses), strings skipped: a tensor
    # named "h[0].w" or a __metadata__ value holding JSON text (kohya, mergekit) nests nothing
    for match in _BRACKET.finditer(_STRING.sub('""', text)):
        if match.group() in "{[":
            depth += 1
            if depth > 4:
                raise TcalcError(f"{where}: the header nests deeper than a safetensors header does")
        else:
            depth -= 1
    try:
        data = json.loads(text.rstrip(" \x00"), object_pairs_hook=_pairs(where), parse_constant=_refuse_constant)
    except TcalcError:
        raise
    except (ValueError, RecursionError) as exc:
        raise TcalcError(f"{where}: the header is not valid JSON ({clip(str(exc), 60)})") from None
    if not isinstance(data, dict):
        raise TcalcError(f"{where}: the header is not a JSON object")
    out: dict[str, tuple[str, tuple[int, ...], int, int]] = {}
    for name, entry in data.items():
        if name == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                raise TcalcError(f"{where}: __metadata__ must map strings to strings")
            continue
        out[name] = _entry(name, entry, where)
    _check_offsets(out, where, data_size)
    return out


def _entry(name: str, entry: Any, where: str) -> tuple[str, tuple[int, ...], int, int]:
    what = f"{where}: tensor {clip(name)}"
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise TcalcError(f"{what}: expected dtype, shape and data_offsets")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in SAFETENSORS_BITS:
        raise TcalcError(f"{what}: unknown dtype {clip(dtype)}; {known_list(dtype, SAFETENSORS_BITS)}")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_DIM for d in shape
    ):
        raise TcalcError(f"{what}: shape {clip(shape)} must be at most {MAX_DIMS} whole numbers >= 0")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(
        isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in offsets
    ) and offsets[0] <= offsets[1]):
        raise TcalcError(f"{what}: data_offsets {clip(offsets)} must be [begin, end] with 0 <= begin <= end")
    n = elements(shape)
    size = -(-n * SAFETENSORS_BITS[dtype] // 8)
    if offsets[1] - offsets[0] != size:
        raise TcalcError(
            f"{what}: data_offsets span {offsets[1] - offsets[0]:,} bytes but a {dtype} tensor of shape {clip(shape)} "
            f"takes {size:,}"
        )
    return dtype, tuple(shape), offsets[0], offsets[1]


def _check_offsets(entries: dict[str, tuple[str, tuple[int, ...], int, int]], where: str, data_size: int | None) -> None:
    spans = sorted((begin, end, name) for name, (_, _, begin, end) in entries.items() if end > begin)
    last_end, last_name = 0, ""
    for begin, end, name in spans:
        if begin < last_end:
            raise TcalcError(f"{where}: tensors {clip(last_name)} and {clip(name)} overlap in the data")
        last_end, last_name = end, name
    if data_size is not None and last_end > data_size:
        raise TcalcError(
            f"{where}: tensor {clip(last_name)} ends at byte {last_end:,} of the data but the file holds {data_size:,}"
        )


def read_local_header(path: Path) -> tuple[dict[str, tuple[str, tuple[int, ...], int, int]], int]:
    """(checked header entries, file size) of a local .safetensors file: reads 8 + N bytes only."""
    where = clip(str(path))
    info = regular_file(path, where, "a .safetensors file")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            first = fh.read(LENGTH_BYTES)
            n = header_length(first, where, info.st_size)
            raw = fh.read(n)
    except OSError as exc:
        raise TcalcError(f"{where} cannot be read: {exc.strerror}") from None
    if len(raw) < n:
        raise TcalcError(f"{where}: truncated header ({len(raw):,} of {n:,} bytes)")
    return parse_header(raw, where, info.st_size - LENGTH_BYTES - n), info.st_size


def quant_info(config: dict[str, Any] | None) -> tuple[str | None, int]:
    """(quant_method, bits) from a config.json's quantization_config (None, 4 when absent)."""
    q = (config or {}).get("quantization_config")
    if not isinstance(q, dict):
        return None, 4
    method = q.get("quant_method")
    bits = q.get("bits", 4)
    groups = q.get("config_groups")
    if isinstance(groups, dict):  # compressed-tensors: config_groups.group_0.weights.num_bits
        for group in groups.values():
            w = group.get("weights") if isinstance(group, dict) else None
            if isinstance(w, dict) and isinstance(w.get("num_bits"), int):
                bits = w["num_bits"]
                break
    if not isinstance(bits, int) or isinstance(bits, bool) or bits not in (2, 3, 4, 8):
        bits = 4
    return (str(method) if isinstance(method, str) else None), bits


def tensors(
    headers: Iterable[dict[str, tuple[str, tuple[int, ...], int, int]]], *, bits: int = 4, n_layers: int | None = None
) -> tuple[Tensor, ...]:
    """The checkpoint's tensors (see the module docstring for packed parameters)."""
    entries: dict[str, tuple[str, tuple[int, ...], int]] = {}
    for header in headers:
        for name, (dtype, shape, begin, end) in header.items():
            if name in entries:
                raise TcalcError(f"tensor {clip(name)} is stored in two shards")
            entries[name] = (dtype, shape, end - begin)
    prefixes_with_scales = {name.rsplit(".", 1)[0] for name in entries if is_scale(name)}
    out = []
    for name, (dtype, shape, nbytes) in entries.items():
        n = elements(shape)
        leaf = name.rsplit(".", 1)[-1]
        prefix = name.rsplit(".", 1)[0]
        if is_scale(name):
            params, role = 0, SCALE
        elif leaf in ("qweight", "weight_packed") and dtype in ("I32", "U32"):
            params, role = n * (32 // bits), WEIGHT
        elif dtype == "U8" and (name.endswith("_blocks") or prefix in prefixes_with_scales or leaf == "weight_packed"):
            params, role = n * 2, WEIGHT
        else:
            params, role = n, WEIGHT
        out.append(Tensor(name, dtype, shape, nbytes, params, component_of(name, n_layers), role))
    return tuple(out)


def shard_names(index: Any, where: str) -> list[str]:
    """The shard files an index (model.safetensors.index.json) names, in order."""
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise TcalcError(f"{where}: expected a weight_map of tensor names to shard files")
    bad = next(((k, v) for k, v in weight_map.items() if not isinstance(v, str)), None)
    if bad is not None:  # a list or an object is no file name (and cannot be hashed)
        raise TcalcError(f"{where}: weight_map[{clip(bad[0], 60)}] is {clip(bad[1], 40)}, not a file name; each tensor "
                         "name must map to the .safetensors file that holds it")
    names = sorted(set(weight_map.values()))
    if len(names) > MAX_FILES:
        raise TcalcError(f"{where}: {len(names):,} shard files; more than {MAX_FILES:,} are refused")
    for name in names:
        if "/" in name or "\\" in name or name in ("", ".", "..") or not name.endswith(".safetensors"):
            raise TcalcError(f"{where}: shard {clip(name)} must be a .safetensors file name beside the index")
    return names


def read_folder(folder: Path, config: dict[str, Any] | None, read_json: Callable[[Path, str], Any]) -> Checkpoint | None:
    """The checkpoint of a local folder (its index's shards, else model.safetensors, else every
    *.safetensors file), or None when it holds no safetensors file."""
    index = folder / INDEX_FILE
    if index.is_file():
        files = [folder / name for name in shard_names(read_json(index, "safetensors index"), clip(str(index)))]
    elif (folder / SINGLE_FILE).is_file():
        files = [folder / SINGLE_FILE]
    else:
        files = sorted(folder.glob("*.safetensors"))[: MAX_FILES + 1]
        if len(files) > MAX_FILES:
            raise TcalcError(f"{clip(str(folder))}: more than {MAX_FILES:,} .safetensors files are refused")
    if not files:
        return None
    method, bits = quant_info(config)
    n_layers = (config or {}).get("num_hidden_layers")
    headers, size = [], 0
    for f in files:
        header, file_size = read_local_header(f)
        headers.append(header)
        size += file_size
    return Checkpoint(
        format="safetensors", source=str(folder), files=len(files),
        tensors=tensors(headers, bits=bits, n_layers=n_layers if isinstance(n_layers, int) else None),
        file_bytes=size, quantization=method,
    )
