"""The GGUF header reader: a bounds-checked cursor over the mapped file (`Reader`), the metadata and
tensor infos (`parse_header`) and each tensor's stored bytes (`tensor_bytes`), under limits far above
any published model (ggml/docs/gguf.md layout, gguf.cpp's checks). Hostile input: every read names
what it reads, and any problem is one TcalcError line.
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformer_calc.errors import TcalcError, clip
from transformer_calc.sources.files import regular_file


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


DEFAULT_ALIGNMENT = 32  # GGUF_DEFAULT_ALIGNMENT (gguf-py/gguf/constants.py)
GGUF_VERSIONS = (2, 3)  # gguf.cpp and GGUFReader: v1 (2023) had 32-bit counts


# ---------------------------------------------------------------------------- the header
@dataclass(frozen=True)
class ArrayValue:
    """A metadata array: its item type and length (its items are skipped)."""

    item_type: int
    count: int


@dataclass(frozen=True)
class _Skipped:
    """A string value too long to keep (a chat template): only its length."""

    length: int


@dataclass(frozen=True)
class TensorInfo:
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
            return ArrayValue(item, count)
        if item not in _SCALARS:
            what = "arrays of arrays are not read" if item == _ARRAY else f"item type {item} is not a GGUF type"
            raise self.fail(f"metadata array {clip(key, 60)}: {what}; the file is damaged or not a model file")
        if count > MAX_ARRAY_ITEMS:
            raise self.fail(f"metadata array {clip(key, 60)} declares {count:,} items; at most {MAX_ARRAY_ITEMS:,} are read")
        width = struct.calcsize(_SCALARS[item])
        self.need(count * width, f"the {count:,} items of {clip(key, 60)}")
        self.pos += count * width
        return ArrayValue(item, count)


def parse_header(buf: Any, size: int, where: str) -> tuple[dict[str, Any], list[TensorInfo], int, int]:
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
    infos: list[TensorInfo] = []
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
        infos.append(TensorInfo(name, dims, ggml_type, offset))
    alignment = meta.get("general.alignment", DEFAULT_ALIGNMENT)
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
        raise r.fail(f"general.alignment ({clip(alignment)}) must be a power of two (gguf.cpp); the file is damaged")
    data_start = -(-r.pos // alignment) * alignment
    return meta, infos, data_start, alignment


def tensor_bytes(
    infos: list[TensorInfo], data_start: int, alignment: int, size: int, where: str, g: Any
) -> list[tuple[TensorInfo, str, int]]:
    """(info, ggml type name, stored bytes) per tensor: known types, whole blocks, aligned
    offsets, inside the file, no overlaps (gguf.cpp gguf_init_from_file_impl)."""
    out: list[tuple[TensorInfo, str, int]] = []
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


# ---------------------------------------------------------------------------- the file
def open_regular(path: Path, where: str) -> tuple[int, int]:
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


def gguf_package(where: str) -> Any:
    try:
        import gguf
    except ImportError:
        raise TcalcError("reading a .gguf file needs the gguf package: pip install 'transformer-calc[gguf]'") from None
    except Exception as exc:  # a broken install (its numpy, ...): still one line
        raise TcalcError(f"reading {where} needs the gguf package, which failed to import: {clip(str(exc), 120)}") from None
    return gguf
