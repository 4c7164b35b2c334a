"""Accelerators: memory, bandwidth and dense peak rate per dtype, and the lookups on them.

The shipped table is `presets/hardware.yaml` (every entry names its `source`); `presets.py` loads
the YAML and hands the dict to `parse_hardware_table`. This module never reads files.

Conventions (the ones published tools disagree on):

- One GPU = one device: a GPU, a TPU chip, an AMD OAM module (an MI250X board is 2 GCDs).
- Base units, exact ints: bytes, bytes/s, FLOP/s. `memory_bytes` is the memory a program can
  allocate from: where the entry gives `memory_mib`, what the driver reports (CUDA's total_memory,
  else nvidia-smi's memory.total: 0.5-0.7 GiB more, the driver's reserve), measured and sourced;
  otherwise as marketed, in decimal GB (1 GB = 1e9 bytes) or the vendor's GiB (TPU v4). NVIDIA's
  "80 GB" HBM is binary: an H100 SXM5 80GB reports 81,089 MiB (79.19 GiB) to CUDA, 6 % more than
  80e9 bytes, so fits priced on the marketed decimal figure were pessimistic by that much.
  `marketed_memory_bytes` keeps the datasheet's figure where the two differ.
- Peaks are DENSE. NVIDIA datasheets since Ampere print tensor rates "with sparsity" (2:4);
  dense = sparse / 2.
- dtype names (`DTYPES`): fp32 is the vector (non-tensor-core) rate; tf32, fp16, bf16, fp8, fp6,
  fp4 are tensor/matrix rates with FP32 accumulate (on GeForce parts that is half the
  FP16-accumulate rate); int8/int4 are ops/s (TOPS), reported like FLOP/s. fp64 is not tracked.
- `interconnect_bytes_s` is the GPU-to-GPU fabric: NVLink (all-to-all through NVSwitch, or the
  hybrid cube mesh on V100) or the vendor's own (AMD Infinity Fabric, Google ICI), else PCIe.
  Bidirectional per GPU, as marketed; one direction is half (the seed's lambda_comms is one-way:
  A100 NVLink 600 GB/s -> 300 GB/s). NVLink bridges between 2-4 PCIe cards are not counted.
- lambda_math = peak FLOP/s / memory bytes/s is derived (`math_bandwidth`), never stored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from transformer_calc.errors import TcalcError, UnknownNameError

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp6", "fp4", "int8", "int4")

# Framework spellings -> our dtype names (torch.bfloat16 -> "bfloat16" -> bf16).
DTYPE_ALIASES = {
    "float32": "fp32",
    "float": "fp32",
    "tensorfloat32": "tf32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float8": "fp8",
    "float4": "fp4",
}

# The compute dtypes and their bytes per value: the design card's p (2 <-> bf16/fp16, 4 <-> fp32,
# 1 <-> fp8). `--dtype` names the compute dtype on every command, `--p` its bytes (docs/notation.md).
COMPUTE_DTYPE_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
P_TO_DTYPE = {4: "fp32", 2: "bf16", 1: "fp8"}


def check_fp8_recipe(recipe: str, gpu: GPU) -> None:
    """An FP8 training recipe runs its GEMMs on the GPU's FP8 tensor cores: a part with no fp8 peak
    (A100, V100, MI250X) cannot run it, and mxfp8's microscaled blocks need native microscaling
    (Blackwell, MI355X: the parts with an fp4 peak). Raises ValueError naming the recipe and GPU."""
    if recipe in ("none", ""):
        return
    if "fp8" not in gpu.peak_flops:
        raise ValueError(f"fp8_recipe {recipe} runs FP8 GEMMs; {gpu.name} has no FP8 tensor cores (no fp8 peak): "
                         "drop the recipe or choose an FP8 GPU (H100, H200, B200, MI300X, ...)")
    if recipe == "mxfp8" and "fp4" not in gpu.peak_flops:
        raise ValueError(f"fp8_recipe mxfp8 needs native microscaling (Blackwell, MI355X: parts with an fp4 peak); "
                         f"{gpu.name} has none: use --fp8-recipe delayed or tensorwise")
    if recipe == "nvfp4" and ("fp4" not in gpu.peak_flops or gpu.name.upper().startswith("MI")):
        raise ValueError(f"fp8_recipe nvfp4 runs NVFP4 GEMMs on Blackwell tensor cores (B200, B300, GB200, GB300); "
                         f"{gpu.name} has none: use --fp8-recipe tensorwise or blockwise (mxfp8 on Blackwell)")


def compute_dtype(dtype: str | None, p: int | None) -> str | None:
    """The compute dtype from `--dtype` and/or `--p` (None when neither is given); a dtype and a
    p that disagree, or a p with no compute dtype, are errors naming both."""
    name = None
    if dtype is not None:
        key = str(dtype).strip().lower()
        name = DTYPE_ALIASES.get(key, key)
        if name not in COMPUTE_DTYPE_BYTES:
            raise TcalcError(
                f"--dtype ({str(dtype)[:40]!r}) is not a compute dtype; choose one of {', '.join(COMPUTE_DTYPE_BYTES)}"
                " (weight-only formats: --weight-dtype)"
            )
    if p is None:
        return name
    if isinstance(p, bool) or p not in P_TO_DTYPE:
        raise TcalcError(f"--p ({p!r}) must be 4 (fp32), 2 (bf16/fp16) or 1 (fp8) bytes per value")
    if name is not None and COMPUTE_DTYPE_BYTES[name] != p:
        raise TcalcError(f"--dtype {name} is {COMPUTE_DTYPE_BYTES[name]} bytes per value but --p is {p}; give one of them")
    return name or P_TO_DTYPE[p]


def peak_dtype(gpu: "GPU", dtype: str | None = None) -> str:
    """The dtype whose dense peak prices compute on `gpu` (the one place this is chosen): the asked
    compute dtype, else bf16, else fp16 (Volta, Turing); an asked dtype the GPU has no peak for is
    an error, never a silent fallback."""
    if dtype is None:
        return "bf16" if "bf16" in gpu.peak_flops else "fp16"
    key = DTYPE_ALIASES.get(dtype.strip().lower(), dtype.strip().lower())
    if key not in gpu.peak_flops:
        raise TcalcError(
            f"{gpu.name} has no {key} peak in the hardware table; choose one of {', '.join(gpu.peak_flops)}"
        )
    return key


GB = 10**9  # decimal, as datasheets market memory and bandwidth

# A small collective's fixed cost inside one NVLink/NVSwitch node, and per step across nodes: the
# order NCCL's nccl-tests `all_reduce_perf` reports for messages up to ~64 KiB on 4-8 NVLink GPUs
# (10-20 µs) and over InfiniBand. One home for training (train.py) and inference (roofline.py).
COLLECTIVE_LATENCY_S = 10e-6
INTER_NODE_LATENCY_S = 20e-6
GIB = 2**30
TERA = 10**12

SCHEMA_VERSION = 1

# A leading vendor word that lookups ignore ("NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB",
# "NVIDIA GeForce RTX 4090", "AMD Instinct MI300X": torch.cuda.get_device_name spellings).
_VENDOR_WORDS = re.compile(r"^(?:nvidia|tesla|geforce|amd|instinct|google)+")
_SEPARATORS = re.compile(r"[-_\s]+")


class GPU(BaseModel):
    """One accelerator, in base units. Built from a YAML entry by `parse_hardware_table`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="canonical name, e.g. A100-SXM4-80GB")
    aliases: tuple[str, ...] = Field(default=(), description="short names users type")
    vendor: str = Field(min_length=1, description="nvidia, amd, google")
    memory_bytes: int = Field(gt=0, description="device memory a program can allocate from, bytes")
    marketed_memory_bytes: int | None = Field(
        default=None, gt=0, description="the datasheet's memory, bytes, where memory_bytes is the driver's figure"
    )
    memory_source: str | None = Field(default=None, description="where memory_bytes was measured")
    memory_type: str | None = None
    memory_bw_bytes_s: int = Field(gt=0, description="memory bandwidth, bytes/s")
    peak_flops: dict[str, Annotated[int, Field(gt=0)]] = Field(
        min_length=1, description="dtype -> dense peak, FLOP/s (int8/int4: ops/s)"
    )
    interconnect: str | None = Field(
        default=None, description="what interconnect_bytes_s is: 'NVLink 4', 'ICI', 'PCIe Gen4 x16'"
    )
    interconnect_bytes_s: int | None = Field(
        default=None, gt=0, description="GPU-to-GPU bandwidth, bytes/s, bidirectional per GPU"
    )
    pcie_bytes_s: int | None = Field(
        default=None, gt=0, description="PCIe x16 host link, bytes/s, bidirectional"
    )
    host_link: str | None = Field(
        default=None, description="the GPU's link to host memory when not PCIe (Grace: 'NVLink-C2C')"
    )
    host_link_bytes_s: int | None = Field(
        default=None, gt=0, description="that link's bandwidth per GPU, bytes/s, bidirectional"
    )
    board_power_w: float | None = Field(default=None, gt=0, description="the board's maximum power (TDP/TGP), W")
    board_power_source: str | None = None
    rated_power_w: float | None = Field(
        default=None, gt=0,
        description="a power-capped board: the power its peak_flops are rated at (the uncapped part's TDP), W",
    )
    rated_power_source: str | None = None
    source: str = Field(min_length=1)
    verified: bool
    verified_via: str | None = None
    notes: str | None = None
    seed_appendix: str | None = Field(
        default=None, description="the seed appendix's own numbers, where it lists this part"
    )

    @field_validator("peak_flops")
    @classmethod
    def _known_dtypes(cls, peaks: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(peaks) - set(DTYPES))
        if unknown:
            raise ValueError(f"unknown dtype {unknown[0]!r}; use one of {', '.join(DTYPES)}")
        return peaks


# A board capped below the power its peaks are rated at (hardware.yaml `rated_power_w`: Meta's 500 W
# Grand Teton H100s, whose table peaks are the 700 W SXM's) holds a lower sustained SM clock. Dynamic
# CMOS power is P = α·C·V²·f, and across the DVFS range the voltage rises with the clock (V ∝ f), so
# P ∝ f³ and f_cap / f_rated = (P_cap / P_rated)^(1/3) (Weste & Harris, CMOS VLSI Design, §5.1; the
# f·V² law of every DVFS governor). Checked, not fitted, on NVIDIA's own datasheets of the one GH100
# die at two board powers: the 400 W H100 NVL's dense BF16 835.5 TFLOP/s over the 700 W SXM's 989.4 is
# 0.844; the law gives (400/700)^(1/3) = 0.830. Matmuls and attention kernels scale with the clock; HBM
# bandwidth does not (the memory clock is not capped). The MAMF tables were measured at the rated power.
POWER_CAP_CLOCK_EXPONENT = 1 / 3


def power_cap_clock_scale(gpu: GPU) -> float:
    """Sustained compute clock of a power-capped board over its rated one: (P_cap / P_rated)^(1/3)
    (POWER_CAP_CLOCK_EXPONENT); 1 for a board at its rated power."""
    rated, cap = getattr(gpu, "rated_power_w", None), gpu.board_power_w
    if rated is None or cap is None or cap >= rated:
        return 1.0
    return (cap / rated) ** POWER_CAP_CLOCK_EXPONENT


def peak_flops(gpu: GPU, dtype: str) -> int:
    """Dense peak of `gpu` in `dtype`, FLOP/s (int8/int4: ops/s), from the vendor datasheet.

    `dtype` is one of `DTYPES` or a framework spelling ("bfloat16", "float16", "float32").
    """
    typed = dtype.strip().lower()  # str methods, so a `str` Enum member works too
    try:
        return gpu.peak_flops[DTYPE_ALIASES.get(typed, typed)]
    except KeyError:
        have = ", ".join(d for d in DTYPES if d in gpu.peak_flops)
        raise TcalcError(
            f"{gpu.name} has no {typed} peak in the hardware table; choose one of {have}"
        ) from None


def host_bandwidth(gpu: GPU) -> tuple[str | None, int | None]:
    """(link, bytes/s bidirectional) between the GPU and host memory: the Grace NVLink-C2C share
    where the part has one, else its PCIe x16 link; (None, None) when the table has neither."""
    if gpu.host_link_bytes_s is not None:
        return gpu.host_link, gpu.host_link_bytes_s
    if gpu.pcie_bytes_s is not None:
        return "PCIe x16", gpu.pcie_bytes_s
    return None, None


def math_bandwidth(gpu: GPU, dtype: str) -> float:
    """lambda_math = peak FLOP/s / memory bytes/s, in FLOP per byte.

    A kernel whose arithmetic intensity (FLOPs per byte moved) is below this is memory-bound
    (seed notes, App. "Compute-bound vs Memory-bound"; NVIDIA "GPU Performance Background").
    A100-SXM4-80GB bf16: 312e12 / 2039e9 = 153.0 (the seed's 156 uses 2.0 TB/s).
    """
    return peak_flops(gpu, dtype) / gpu.memory_bw_bytes_s


def normalize_gpu_name(name: str) -> str:
    """Lookup key: lowercase, no '-', '_' or spaces, no leading vendor word ("NVIDIA", "Tesla")."""
    key = _SEPARATORS.sub("", name.strip().lower())
    return _VENDOR_WORDS.sub("", key) or key


def resolve_gpu(name: str, table: Mapping[str, GPU]) -> GPU:
    """The GPU called `name` (a canonical name or alias; case, '-', '_', spaces don't matter).

    Unknown names raise UnknownNameError with the nearest names and aliases.
    """
    if not isinstance(name, str) or not name.strip():
        raise TcalcError("the GPU name is empty; give one, e.g. --gpu a100-80gb (see `tcalc hardware`)")
    if name in table:
        return table[name]
    found = _index(table.values()).get(normalize_gpu_name(name))
    if found is None:
        spellings = [s for gpu in table.values() for s in (gpu.name, *gpu.aliases)]
        error = UnknownNameError("GPU", name, spellings)
        if "did you mean" not in str(error):  # nothing near: list canonical names, not ~80 aliases
            error = UnknownNameError("GPU", name, table)
        raise error
    return found


def parse_hardware_table(data: Mapping[str, Any]) -> dict[str, GPU]:
    """Canonical name -> GPU, in file order, from the loaded `presets/hardware.yaml` mapping.

    Entry fields are in the YAML's units (GB, GB/s, TFLOP/s); they become exact ints of bytes,
    bytes/s and FLOP/s here. Raises TcalcError naming the entry and field for bad data, and for
    a name or alias that two entries share (compared as `normalize_gpu_name` does).
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("gpus"), list):
        raise TcalcError("hardware table: expected a mapping with a 'gpus' list")
    extra = sorted(set(data) - {"schema_version", "gpus"})
    if extra:
        raise TcalcError(
            f"hardware table: unknown top-level key {extra[0]!r}; expected schema_version, gpus"
        )
    version = data.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise TcalcError(
            f"hardware table: schema_version {version!r} is not supported; "
            f"expected {SCHEMA_VERSION}"
        )

    gpus = []
    for i, raw in enumerate(data["gpus"], start=1):
        if not isinstance(raw, Mapping):
            raise TcalcError(f"hardware table entry #{i}: expected a mapping of fields")
        label = raw.get("name", f"#{i}")
        try:
            gpus.append(_Entry.model_validate(raw).to_gpu())
        except ValidationError as exc:
            raise TcalcError(f"hardware table entry {label}: {_first_error(exc)}") from None
        except TcalcError:
            raise
        except ValueError as exc:  # _exact: a value with more digits than the unit holds
            raise TcalcError(f"hardware table entry {label}: {exc}") from None
    _index(gpus)  # raises on a shared name or alias
    return {gpu.name: gpu for gpu in gpus}


# ---------------------------------------------------------------------------- YAML entries
_Positive = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)]


class _Entry(BaseModel):
    """One entry of presets/hardware.yaml, in the file's units."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    aliases: list[str] = []
    vendor: str = Field(min_length=1)
    memory_gb: _Positive | None = None
    memory_gib: _Positive | None = None
    memory_mib: Annotated[int, Field(gt=0, strict=True)] | None = None  # what the driver reports (memory_mib_source)
    memory_mib_source: str | None = None
    memory_type: str | None = None
    memory_bw_gb_s: _Positive
    dense_tflops: dict[str, _Positive]
    nvlink_gb_s: _Positive | None = None
    nvlink_gen: int | None = None
    fabric: str | None = None
    fabric_gb_s: _Positive | None = None
    pcie_gb_s: _Positive | None = None
    pcie_gen: int | None = None
    host_link: str | None = None
    host_link_gb_s: _Positive | None = None
    board_power_w: _Positive | None = None
    board_power_source: str | None = None
    rated_power_w: _Positive | None = None  # a power-capped board: the TDP its dense_tflops are rated at
    rated_power_source: str | None = None
    source: str = Field(min_length=1)
    verified: bool
    verified_via: str | None = None
    notes: str | None = None
    seed_appendix: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> _Entry:
        if (self.memory_gb is None) == (self.memory_gib is None):
            raise ValueError("give exactly one of memory_gb (decimal, as marketed) and memory_gib")
        if (self.memory_mib is None) != (self.memory_mib_source is None):
            raise ValueError("memory_mib (what the driver reports) and memory_mib_source go together")
        if self.nvlink_gb_s is not None and self.fabric_gb_s is not None:
            raise ValueError("give nvlink_gb_s or fabric_gb_s, not both")
        if (self.fabric is None) != (self.fabric_gb_s is None):
            raise ValueError("fabric (its name) and fabric_gb_s go together")
        if (self.host_link is None) != (self.host_link_gb_s is None):
            raise ValueError("host_link (its name) and host_link_gb_s go together")
        if (self.board_power_w is None) != (self.board_power_source is None):
            raise ValueError("board_power_w and board_power_source (where it is stated) go together")
        if (self.rated_power_w is None) != (self.rated_power_source is None):
            raise ValueError("rated_power_w and rated_power_source (where it is stated) go together")
        if self.rated_power_w is not None and (self.board_power_w is None or self.board_power_w >= self.rated_power_w):
            raise ValueError("rated_power_w (the uncapped part's TDP) is for a board capped below it: "
                             "give a smaller board_power_w")
        return self

    @field_validator("dense_tflops")
    @classmethod
    def _known_dtypes(cls, peaks: dict[str, Any]) -> dict[str, Any]:
        return GPU._known_dtypes(peaks)

    def to_gpu(self) -> GPU:
        if self.memory_gb is not None:
            memory = _exact(self.memory_gb, GB)
        elif self.memory_gib is not None:
            memory = _exact(self.memory_gib, GIB)
        else:  # pragma: no cover - the validator requires one of the two
            raise ValueError("memory_gb or memory_gib is required")
        marketed: int | None = None
        if self.memory_mib is not None:
            marketed, memory = memory, self.memory_mib * 2**20
        pcie = _exact(self.pcie_gb_s, GB) if self.pcie_gb_s is not None else None
        link: str | None
        if self.nvlink_gb_s is not None:
            link = f"NVLink {self.nvlink_gen}" if self.nvlink_gen else "NVLink"
            link_bytes_s: int | None = _exact(self.nvlink_gb_s, GB)
        elif self.fabric_gb_s is not None:
            link, link_bytes_s = self.fabric, _exact(self.fabric_gb_s, GB)
        elif pcie is not None:
            link = f"PCIe Gen{self.pcie_gen} x16" if self.pcie_gen else "PCIe x16"
            link_bytes_s = pcie
        else:
            link, link_bytes_s = None, None
        return GPU(
            name=self.name,
            aliases=tuple(self.aliases),
            vendor=self.vendor.lower(),
            memory_bytes=memory,
            marketed_memory_bytes=marketed,
            memory_source=self.memory_mib_source,
            memory_type=self.memory_type,
            memory_bw_bytes_s=_exact(self.memory_bw_gb_s, GB),
            peak_flops={dtype: _exact(tflops, TERA) for dtype, tflops in self.dense_tflops.items()},
            interconnect=link,
            interconnect_bytes_s=link_bytes_s,
            pcie_bytes_s=pcie,
            host_link=self.host_link,
            host_link_bytes_s=_exact(self.host_link_gb_s, GB) if self.host_link_gb_s is not None else None,
            board_power_w=self.board_power_w,
            board_power_source=self.board_power_source,
            rated_power_w=self.rated_power_w,
            rated_power_source=self.rated_power_source,
            source=self.source,
            verified=self.verified,
            verified_via=self.verified_via,
            notes=self.notes,
            seed_appendix=self.seed_appendix,
        )


def _exact(value: float, unit: int) -> int:
    """`value` * `unit` as an exact int: 989.4 TFLOP/s -> 989_400_000_000_000 (no float error)."""
    scaled = Decimal(repr(value)) * unit
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{value} x {unit} is not a whole number")
    return int(scaled)


def _index(gpus: Iterable[GPU]) -> dict[str, GPU]:
    """normalize_gpu_name(name or alias) -> GPU; a key two spellings share is an error."""
    index: dict[str, GPU] = {}
    spelled: dict[str, str] = {}
    for gpu in gpus:
        for spelling in (gpu.name, *gpu.aliases):
            key = normalize_gpu_name(spelling)
            if key in index:
                raise TcalcError(
                    f"hardware table: {spelling!r} ({gpu.name}) and {spelled[key]!r} "
                    f"({index[key].name}) are the same name (case, '-', '_', spaces ignored)"
                )
            index[key], spelled[key] = gpu, spelling
    return index


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(part) for part in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg
