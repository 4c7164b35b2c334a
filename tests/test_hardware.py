"""presets/hardware.yaml and transformer_calc.devices.hardware: golden datasheet values, lookups, errors."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from transformer_calc.errors import TcalcError, UnknownNameError
from transformer_calc.devices.hardware import (
    DTYPES,
    GPU,
    math_bandwidth,
    normalize_gpu_name,
    parse_hardware_table,
    peak_flops,
    resolve_gpu,
)

ROOT = Path(__file__).resolve().parents[1]
RAW = yaml.safe_load((ROOT / "presets" / "hardware.yaml").read_text(encoding="utf-8"))
TABLE = parse_hardware_table(RAW)

A100_DS = "NVIDIA A100 datasheet"
A100_80_DS = "NVIDIA A100 80GB datasheet"

# (gpu, field or dtype, expected, source) - exact ints: bytes, bytes/s, FLOP/s.
GOLDEN = [
    ("A100-SXM4-80GB", "marketed_memory_bytes", 80 * 10**9, A100_80_DS),
    ("A100-SXM4-80GB", "memory_bw_bytes_s", 2039 * 10**9, A100_80_DS),
    ("A100-SXM4-80GB", "bf16", 312 * 10**12, A100_80_DS),
    ("A100-SXM4-80GB", "tf32", 156 * 10**12, A100_80_DS),
    ("A100-SXM4-80GB", "interconnect_bytes_s", 600 * 10**9, "A100 datasheet NVLink 600 GB/s"),
    ("A100-SXM4-40GB", "marketed_memory_bytes", 40 * 10**9, A100_DS),
    ("A100-SXM4-40GB", "memory_bw_bytes_s", 1555 * 10**9, A100_DS),
    ("A100-SXM4-40GB", "fp32", 19_500_000_000_000, A100_DS),
    ("A100-PCIe-80GB", "memory_bw_bytes_s", 1935 * 10**9, "A100 80GB datasheet PCIe column"),
    ("A100-PCIe-80GB", "interconnect_bytes_s", 64 * 10**9, "PCIe Gen4 x16 bidirectional"),
    ("H100-SXM5-80GB", "bf16", 989_400_000_000_000, "H100 datasheet 1979 sparse / 2"),
    ("H100-SXM5-80GB", "fp8", 1_978_900_000_000_000, "H100 datasheet 3958 sparse / 2"),
    ("H100-SXM5-80GB", "memory_bw_bytes_s", 3350 * 10**9, "H100 datasheet 3.35 TB/s"),
    ("H100-PCIe-80GB", "bf16", 756_500_000_000_000, "H100 datasheet PCIe 1513 sparse / 2"),
    ("H200-SXM-141GB", "marketed_memory_bytes", 141 * 10**9, "H200 datasheet 141 GB"),
    ("V100-SXM2-32GB", "fp16", 125 * 10**12, "V100 datasheet SXM2 125 TFLOPS"),
    ("V100-SXM2-32GB", "memory_bytes", 32 * 10**9, "V100 datasheet 32 GB"),
    ("V100S-PCIe-32GB", "fp16", 130 * 10**12, "V100S datasheet (the seed's V100 row)"),
    ("L40S", "bf16", 362_050_000_000_000, "L40S datasheet 733 sparse / 2"),
    ("RTX-4090", "bf16", 165_200_000_000_000, "Ada whitepaper App. A FP32-accumulate"),
    ("MI250X", "memory_bw_bytes_s", 3_276_800_000_000, "AMD footnote MI200-07 3.2768 TB/s"),
    ("MI300X", "bf16", 1_307_400_000_000_000, "AMD footnote MI300-18"),
    ("MI300X", "memory_bw_bytes_s", 5325 * 10**9, "AMD footnote MI300-05A"),
    # The memory a program can allocate from, as the driver reports it (presets/hardware.yaml memory_mib_source)
    ("H100-SXM5-80GB", "memory_bytes", 81089 * 2**20, "torch 2.7 _CudaDeviceProperties total_memory=81089MB (ml-engineering)"),
    ("H200-SXM-141GB", "memory_bytes", 143156 * 2**20, "_CudaDeviceProperties(name='NVIDIA H200', total_memory=143156MB)"),
    ("B200-HGX", "memory_bytes", 182642 * 2**20, "_CudaDeviceProperties(name='NVIDIA B200', total_memory=182642MB)"),
    ("A100-SXM4-80GB", "memory_bytes", 81920 * 2**20, "nvidia-smi 'NVIDIA A100-SXM4-80GB, 81920 MiB'"),
    ("GB200-NVL72", "memory_bytes", 189471 * 2**20, "nvidia-smi 'NVIDIA GB200, 189471 MiB'"),
    ("H100-SXM5-80GB", "marketed_memory_bytes", 80 * 10**9, "H100 datasheet 80 GB"),
    ("TPU-v4", "memory_bytes", 32 * 2**30, "Google TPU v4 docs 32 GiB"),
    ("TPU-v5e", "bf16", 197 * 10**12, "Google TPU v5e docs"),
    # ---- issue 11: 2025-26 accelerators (per device, dense)
    ("B300-HGX", "marketed_memory_bytes", 270 * 10**9, "Blackwell Ultra datasheet, HGX B300 column 270 GB"),
    ("B300-HGX", "memory_bw_bytes_s", 7700 * 10**9, "Blackwell Ultra datasheet 7.7 TB/s"),
    ("B300-HGX", "bf16", 2250 * 10**12, "HGX page 36 PF sparse / 8 GPUs / 2"),
    ("B300-HGX", "fp8", 4500 * 10**12, "HGX page 72 PF sparse / 8 / 2"),
    ("B300-HGX", "fp4", 13500 * 10**12, "HGX page FP4 108 PF dense (printed) / 8"),
    ("B300-HGX", "interconnect_bytes_s", 1800 * 10**9, "NVLink 5 1.8 TB/s per GPU"),
    ("GB300-NVL72", "marketed_memory_bytes", 279 * 10**9, "Blackwell Ultra datasheet, GB300 column 279 GB"),
    ("GB300-NVL72", "bf16", 2500 * 10**12, "GB300 NVL72 360 PF sparse / 72 / 2"),
    ("GB300-NVL72", "fp4", 15000 * 10**12, "GB300 NVL72 1080 PF 'without sparsity' / 72"),
    ("MI325X", "memory_bytes", 256 * 10**9, "AMD MI325X 256 GB HBM3E"),
    ("MI325X", "memory_bw_bytes_s", 6000 * 10**9, "AMD MI325X 6 TB/s"),
    ("MI325X", "bf16", 1_307_400_000_000_000, "same CDNA 3 compute as MI300X"),
    ("MI355X", "memory_bytes", 288 * 10**9, "AMD MI355X 288 GB HBM3E"),
    ("MI355X", "bf16", 2_516_600_000_000_000, "256 CU x 2400 MHz x 4096 FLOP/clk (AMD: 2.5 PF)"),
    ("MI355X", "fp8", 5_033_200_000_000_000, "256 CU x 2400 MHz x 8192 FLOP/clk (AMD: 5.0 PF)"),
    ("MI355X", "fp4", 10_066_300_000_000_000, "MXFP4, 2x fp8 (AMD: 10.1 PF)"),
    ("TPU-v6e", "memory_bytes", 32 * 10**9, "Google v6e docs 32 GB"),
    ("TPU-v6e", "bf16", 918 * 10**12, "Google v6e docs"),
    ("TPU-v6e", "int8", 1836 * 10**12, "Google v6e docs"),
    ("TPU-v6e", "interconnect_bytes_s", 800 * 10**9, "Google v6e docs, bidirectional ICI"),
    ("TPU7x", "memory_bytes", 192 * 2**30, "Google TPU7x docs 192 GiB"),
    ("TPU7x", "memory_bw_bytes_s", 7370 * 10**9, "Google TPU7x ~7.37 TB/s"),
    ("TPU7x", "bf16", 2307 * 10**12, "Google TPU7x docs"),
    ("TPU7x", "fp8", 4614 * 10**12, "Google TPU7x docs"),
    ("TPU-v5p", "memory_bytes", 95 * 2**30, "Google v5p docs 95 GiB usable (96 GiB physical)"),
    ("TPU-v5p", "interconnect_bytes_s", 1200 * 10**9, "Google v5p docs, bidirectional ICI"),
    ("Gaudi3", "memory_bytes", 128 * 10**9, "Intel Gaudi 3 white paper 128 GB"),
    ("Gaudi3", "bf16", 1835 * 10**12, "Intel Gaudi 3 white paper (spec clock)"),
    ("RTX-5090", "marketed_memory_bytes", 32 * 10**9, "RTX Blackwell whitepaper 32 GB GDDR7"),
    ("RTX-5090", "memory_bw_bytes_s", 1792 * 10**9, "RTX Blackwell whitepaper 1792 GB/s"),
    ("RTX-5090", "bf16", 209_500_000_000_000, "RTX Blackwell whitepaper Table 3, FP32 accumulate"),
    ("RTX-5090", "fp4", 1676 * 10**12, "RTX Blackwell whitepaper Table 3, 1676/3352"),
    ("RTX-PRO-6000-Blackwell-WS", "memory_bytes", 96 * 10**9, "RTX PRO 6000 WS datasheet 96 GB"),
    ("RTX-PRO-6000-Blackwell-WS", "bf16", 503_800_000_000_000, "RTX PRO whitepaper Table 4"),
]


@pytest.mark.parametrize(
    ("gpu", "what", "expected"),
    [pytest.param(g, w, e, id=f"{g} {w} [{src}]") for g, w, e, src in GOLDEN],
)
def test_golden_values(gpu: str, what: str, expected: int) -> None:
    g = TABLE[gpu]
    got = peak_flops(g, what) if what in DTYPES else getattr(g, what)
    assert got == expected
    assert isinstance(got, int)


# (gpu, dtype, expected lambda_math FLOP/B, source)
LAMBDA = [
    ("A100-SXM4-80GB", "bf16", 312e12 / 2039e9, "312 TFLOP/s / 2039 GB/s = 153.0, seed says 156"),
    ("A100-SXM4-40GB", "bf16", 312e12 / 1555e9, "312 TFLOP/s / 1555 GB/s = 200.6, seed says 195"),
    ("V100-SXM2-32GB", "fp16", 125e12 / 900e9, "125 TFLOP/s / 900 GB/s = 138.9"),
    ("H100-SXM5-80GB", "bf16", 989.4e12 / 3350e9, "989.4 TFLOP/s / 3350 GB/s = 295.3"),
    # HGX B300, Blackwell Ultra datasheet (HGX column) + HGX page: bf16 36 PFLOPS sparse per
    # 8-GPU board -> 36e15 / 8 / 2 = 2.25e15 dense per GPU; HBM 7.7 TB/s per GPU.
    # lambda_math = 2250e12 / 7700e9 = 292.21 FLOP/B.
    ("B300-HGX", "bf16", 2250e12 / 7700e9, "2250 TFLOP/s / 7700 GB/s = 292.2"),
    # TPU7x, Google docs: 2307 TFLOP/s bf16, ~7.37 TB/s -> 2307e12 / 7370e9 = 313.03 FLOP/B.
    ("TPU7x", "bf16", 2307e12 / 7370e9, "2307 TFLOP/s / 7370 GB/s = 313.0"),
    # RTX 5090, RTX Blackwell whitepaper Table 3: bf16 (FP32 accumulate) 209.5 dense, 1792 GB/s
    # -> 209.5e12 / 1792e9 = 116.91 FLOP/B.
    ("RTX-5090", "bf16", 209.5e12 / 1792e9, "209.5 TFLOP/s / 1792 GB/s = 116.9"),
]


@pytest.mark.parametrize(
    ("gpu", "dtype", "expected"),
    [pytest.param(g, d, e, id=f"{g} {d} [{src}]") for g, d, e, src in LAMBDA],
)
def test_math_bandwidth_golden(gpu: str, dtype: str, expected: float) -> None:
    assert math_bandwidth(TABLE[gpu], dtype) == pytest.approx(expected, rel=1e-12)


def test_math_bandwidth_rounded_values() -> None:
    assert round(math_bandwidth(TABLE["A100-SXM4-80GB"], "bf16"), 1) == 153.0
    assert round(math_bandwidth(TABLE["A100-SXM4-40GB"], "bf16"), 1) == 200.6
    # 2250e12 / 7700e9 = 292.207..., worked by hand from the HGX B300 datasheet column
    assert round(math_bandwidth(TABLE["B300-HGX"], "bf16"), 1) == 292.2
    # fp8 on HGX B300: 4500e12 / 7700e9 = 584.4 (twice the bf16 ridge point)
    assert round(math_bandwidth(TABLE["B300-HGX"], "fp8"), 1) == 584.4


REQUIRED = [
    "A100-SXM4-40GB", "A100-SXM4-80GB", "A100-PCIe-40GB", "A100-PCIe-80GB",
    "V100-SXM2-16GB", "V100-SXM2-32GB", "V100-PCIe-16GB", "V100-PCIe-32GB", "V100S-PCIe-32GB",
    "H100-SXM5-80GB", "H100-PCIe-80GB", "H200-SXM-141GB", "B200-HGX", "MI250X", "MI300X",
    "L4", "L40S", "A10", "T4", "RTX-4090",
]  # fmt: skip


@pytest.mark.parametrize("name", REQUIRED)
def test_required_entries_present(name: str) -> None:
    assert name in TABLE


# issue 11: accelerators added with datasheet numbers
ISSUE_11 = [
    "B300-HGX", "GB300-NVL72", "MI325X", "MI355X", "TPU-v6e", "TPU7x", "Gaudi3", "RTX-5090",
    "RTX-PRO-6000-Blackwell-WS",
]  # fmt: skip


@pytest.mark.parametrize("name", ISSUE_11)
def test_issue_11_entries_verified_with_a_named_source(name: str) -> None:
    gpu = TABLE[name]
    assert gpu.verified and gpu.verified_via and gpu.verified_via.strip()
    assert gpu.notes and "bf16" in gpu.peak_flops
    assert gpu.interconnect_bytes_s is not None


def test_tpu_v5p_corrected() -> None:
    """Google's v5p table: 95 GiB usable HBM (96 GiB physical), 1200 GBps bidirectional ICI."""
    v5p = TABLE["TPU-v5p"]
    assert v5p.memory_bytes == 102_005_473_280  # 95 * 2**30, not 95e9
    assert v5p.interconnect == "ICI" and v5p.interconnect_bytes_s == 1_200_000_000_000
    assert "CORRECTED" in (v5p.notes or "")


def test_low_precision_peaks_are_dense() -> None:
    """A sparse figure slipping in shows up as a step above 2x (fp8 vs bf16) or 4x (fp4 vs fp8).

    fp4 may be up to 4x the fp8 row: GeForce fp8 is the halved FP32-accumulate rate while fp4
    (FP32 accumulate) is full rate (RTX 5090: 419 vs 1676). fp6 never exceeds fp4. The 3%
    slack absorbs NVIDIA's own rounding (L40S datasheet: fp8 733 vs 2 x 362.05 = 724.1; L4: 242.5
    vs 2 x 121); a sparse figure taken for dense is a 2x step and still fails.
    """
    slack = 1.03
    for gpu in TABLE.values():
        p = gpu.peak_flops
        if "fp8" in p and "bf16" in p:
            assert p["fp8"] <= 2 * p["bf16"] * slack, gpu.name
        if "fp4" in p and "fp8" in p:
            assert p["fp4"] <= 4 * p["fp8"] * slack, gpu.name
        if "fp6" in p and "fp4" in p:
            assert p["fp6"] <= p["fp4"], gpu.name


def test_blackwell_ultra_fp4_is_the_printed_dense_figure() -> None:
    """NVIDIA prints B300 FP4 as 'sparse | dense' (144 | 108 PFLOPS per HGX board, 1440 | 1080 per
    NVL72 rack): dense is not sparse / 2, and GB300's rate is HGX's scaled by the bf16 ratio."""
    b300, gb300 = TABLE["B300-HGX"], TABLE["GB300-NVL72"]
    assert b300.peak_flops["fp4"] == 108 * 10**15 // 8
    assert gb300.peak_flops["fp4"] == 1080 * 10**15 // 72
    assert b300.peak_flops["fp4"] * gb300.peak_flops["bf16"] == (
        gb300.peak_flops["fp4"] * b300.peak_flops["bf16"]
    )


@pytest.mark.parametrize("gpu", list(TABLE.values()), ids=list(TABLE))
def test_every_entry_has_a_source(gpu: GPU) -> None:
    assert gpu.source.strip()
    assert isinstance(gpu.verified, bool)


def _keys(node: object) -> list[str]:
    if isinstance(node, dict):
        return [str(k) for k in node] + [k for v in node.values() for k in _keys(v)]
    if isinstance(node, list):
        return [k for v in node for k in _keys(v)]
    return []


def test_no_stored_math_bandwidth() -> None:
    """lambda_math is derived in code, never stored (it would drift from peak / bandwidth)."""
    keys = {k.lower() for k in _keys(RAW)}
    assert not {k for k in keys if "lambda" in k or "math" in k or "intensity" in k}
    assert not any("lambda" in f or "math" in f for f in GPU.model_fields)


def test_no_sparse_dtypes_stored() -> None:
    for entry in RAW["gpus"]:
        assert set(entry["dense_tflops"]) <= set(DTYPES), entry["name"]


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("a100-80gb", "A100-SXM4-80GB"),
        ("A100_80GB", "A100-SXM4-80GB"),
        ("A100 80GB", "A100-SXM4-80GB"),
        ("a100", "A100-SXM4-80GB"),
        ("a100-40gb", "A100-SXM4-40GB"),
        ("A100-SXM4-40GB", "A100-SXM4-40GB"),
        ("a100_sxm4_40gb", "A100-SXM4-40GB"),
        ("h100", "H100-SXM5-80GB"),
        ("h100-pcie", "H100-PCIe-80GB"),
        ("h200", "H200-SXM-141GB"),
        ("v100", "V100-SXM2-32GB"),
        ("v100s", "V100S-PCIe-32GB"),
        ("mi300x", "MI300X"),
        ("MI300X", "MI300X"),
        ("4090", "RTX-4090"),
        ("rtx 4090", "RTX-4090"),
        ("b200", "B200-HGX"),
        # torch.cuda.get_device_name() spellings
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
        ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"),
        ("NVIDIA GeForce RTX 4090", "RTX-4090"),
        ("AMD Instinct MI300X", "MI300X"),
        # issue 11 parts: the names users type and the device names frameworks print
        ("b300", "B300-HGX"),
        ("B300", "B300-HGX"),
        ("hgx-b300", "B300-HGX"),
        ("NVIDIA B300 SXM6 AC", "B300-HGX"),
        ("gb300", "GB300-NVL72"),
        ("GB300-NVL72", "GB300-NVL72"),
        ("mi325x", "MI325X"),
        ("AMD Instinct MI325X", "MI325X"),
        ("mi355x", "MI355X"),
        ("AMD Instinct MI355X", "MI355X"),
        ("tpu-v6e", "TPU-v6e"),
        ("v6e", "TPU-v6e"),
        ("trillium", "TPU-v6e"),
        ("Trillium", "TPU-v6e"),
        ("tpu7x", "TPU7x"),
        ("ironwood", "TPU7x"),
        ("tpu-v7x", "TPU7x"),
        ("v5p", "TPU-v5p"),
        ("gaudi3", "Gaudi3"),
        ("Gaudi 3", "Gaudi3"),
        ("intel-gaudi-3", "Gaudi3"),
        ("rtx-5090", "RTX-5090"),
        ("5090", "RTX-5090"),
        ("NVIDIA GeForce RTX 5090", "RTX-5090"),
        ("rtx-pro-6000", "RTX-PRO-6000-Blackwell-WS"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX-PRO-6000-Blackwell-WS"),
    ],
)
def test_resolve_gpu(typed: str, expected: str) -> None:
    assert resolve_gpu(typed, TABLE).name == expected


@pytest.mark.parametrize(("typed", "suggested"), [("a100-80g", "a100-80gb"), ("h10", "h100")])
def test_unknown_gpu_did_you_mean(typed: str, suggested: str) -> None:
    with pytest.raises(UnknownNameError) as info:
        resolve_gpu(typed, TABLE)
    msg = str(info.value)
    assert msg.startswith(f"unknown GPU {typed!r}; did you mean ")
    assert repr(suggested) in msg


def test_unknown_gpu_far_from_everything_lists_canonical_names() -> None:
    with pytest.raises(UnknownNameError) as info:
        resolve_gpu("zzzzzz", TABLE)
    msg = str(info.value)
    assert "known: " in msg and "A100-SXM4-80GB" in msg
    assert "a100-sxm-80gb" not in msg  # aliases are not listed, only names


def test_unknown_dtype_names_gpu_dtype_and_choices() -> None:
    with pytest.raises(TcalcError) as info:
        peak_flops(TABLE["H100-SXM5-80GB"], "fp64")
    assert str(info.value) == (
        "H100-SXM5-80GB has no fp64 peak in the hardware table; "
        "choose one of fp32, tf32, fp16, bf16, fp8, int8"
    )


def test_missing_dtype_on_part_without_it() -> None:
    with pytest.raises(TcalcError, match=r"V100-SXM2-32GB has no bf16 .*choose one of fp32, fp16$"):
        math_bandwidth(TABLE["V100-SXM2-32GB"], "bf16")


@pytest.mark.parametrize(("spelling", "dtype"), [("bfloat16", "bf16"), ("BF16", "bf16"),
                                                 ("float16", "fp16"), ("float32", "fp32")])
def test_framework_dtype_spellings(spelling: str, dtype: str) -> None:
    gpu = TABLE["A100-SXM4-80GB"]
    assert peak_flops(gpu, spelling) == gpu.peak_flops[dtype]


# ---------------------------------------------------------------------------- table validation
def _with(edit) -> dict:
    data = copy.deepcopy(RAW)
    edit(data["gpus"])
    return data


def test_duplicate_alias_rejected() -> None:
    data = _with(lambda gpus: gpus[1]["aliases"].append("a100-40gb"))  # gpus[0] owns it
    with pytest.raises(TcalcError, match=r"'a100-40gb' \(A100-SXM4-80GB\) and 'a100-40gb'"):
        parse_hardware_table(data)


def test_alias_colliding_after_normalization_rejected() -> None:
    data = _with(lambda gpus: gpus[0]["aliases"].append("A100_80GB"))  # a100-80gb of another
    with pytest.raises(TcalcError, match="same name"):
        parse_hardware_table(data)


def test_duplicate_name_rejected() -> None:
    data = _with(lambda gpus: gpus.append(copy.deepcopy(gpus[0])))
    with pytest.raises(TcalcError, match="A100-SXM4-40GB"):
        parse_hardware_table(data)


def test_alias_repeating_own_name_rejected() -> None:
    data = _with(lambda gpus: gpus[0]["aliases"].append("a100_sxm4_40gb"))
    with pytest.raises(TcalcError, match="same name"):
        parse_hardware_table(data)


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda e: e.pop("source"), "source"),
        (lambda e: e.update(lambda_math=195), "lambda_math"),
        (lambda e: e["dense_tflops"].update(int8_tops=624), "unknown dtype 'int8_tops'"),
        (lambda e: e.update(memory_gib=37), "exactly one of memory_gb"),
        (lambda e: e.update(memory_bw_gb_s=-1), "memory_bw_gb_s"),
        (lambda e: e.update(memory_bw_gb_s="fast"), "memory_bw_gb_s"),
        (lambda e: e.update(fabric_gb_s=100, fabric="X"), "nvlink_gb_s or fabric_gb_s"),
        (lambda e: e.update(memory_gb=1e-10), "not a whole number"),
    ],
    ids=["no-source", "stored-lambda", "sparse-style-key", "gb-and-gib", "negative-bw",
         "string-bw", "nvlink-and-fabric", "sub-byte-memory"],
)
def test_bad_entry_names_entry_and_field(edit, fragment: str) -> None:
    data = _with(lambda gpus: edit(gpus[0]))
    with pytest.raises(TcalcError) as info:
        parse_hardware_table(data)
    assert str(info.value).startswith("hardware table entry A100-SXM4-40GB: ")
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "data", [{}, {"gpus": {}}, {"gpus": [], "extra": 1}, {"schema_version": 2, "gpus": []}],
)
def test_bad_top_level_rejected(data: dict) -> None:
    with pytest.raises(TcalcError, match="hardware table"):
        parse_hardware_table(data)


def test_gpu_is_frozen() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="frozen"):
        TABLE["T4"].memory_bytes = 1  # type: ignore[misc]


def test_interconnect_conventions() -> None:
    """NVLink/fabric where the part has one, else PCIe; bidirectional as marketed."""
    assert TABLE["H100-SXM5-80GB"].interconnect == "NVLink 4"
    assert TABLE["H100-PCIe-80GB"].interconnect == "PCIe Gen5 x16"
    assert TABLE["MI300X"].interconnect == "Infinity Fabric"
    assert TABLE["MI300X"].interconnect_bytes_s == 896 * 10**9
    assert TABLE["TPU-v4"].interconnect_bytes_s is None
    for gpu in TABLE.values():
        if gpu.interconnect and gpu.interconnect.startswith("PCIe"):
            assert gpu.interconnect_bytes_s == gpu.pcie_bytes_s


def test_normalize_gpu_name() -> None:
    assert normalize_gpu_name(" NVIDIA GeForce RTX 4090 ") == "rtx4090"
    assert normalize_gpu_name("A100_SXM4-80GB") == "a100sxm480gb"


# ---------------------------------------------------------------------------- properties
PAIRS = [(gpu, dtype) for gpu in TABLE.values() for dtype in gpu.peak_flops]


@given(st.sampled_from(PAIRS))
def test_math_bandwidth_times_bandwidth_is_peak(pair: tuple[GPU, str]) -> None:
    gpu, dtype = pair
    lam = math_bandwidth(gpu, dtype)
    assert lam * gpu.memory_bw_bytes_s == pytest.approx(peak_flops(gpu, dtype), rel=1e-15)


@given(
    bw=st.integers(min_value=1, max_value=10**14),
    peaks=st.dictionaries(st.sampled_from(DTYPES), st.integers(1, 10**17), min_size=1),
)
def test_math_bandwidth_property_any_gpu(bw: int, peaks: dict[str, int]) -> None:
    gpu = GPU(
        name="X",
        vendor="test",
        memory_bytes=1,
        memory_bw_bytes_s=bw,
        peak_flops=peaks,
        source="hypothesis",
        verified=False,
    )
    for dtype, peak in peaks.items():
        assert math_bandwidth(gpu, dtype) * bw == pytest.approx(peak, rel=1e-15)


@given(st.sampled_from([s for g in TABLE.values() for s in (g.name, *g.aliases)]),
       st.sampled_from(["lower", "upper", "underscores", "spaces"]))
def test_every_spelling_resolves_under_case_and_separator_changes(spelling: str, how: str) -> None:
    owner = next(g for g in TABLE.values() if spelling in (g.name, *g.aliases))
    typed = {
        "lower": spelling.lower(),
        "upper": spelling.upper(),
        "underscores": spelling.replace("-", "_"),
        "spaces": spelling.replace("-", " "),
    }[how]
    assert resolve_gpu(typed, TABLE) is owner


def test_hardware_module_imports_no_io_libraries() -> None:
    """hardware.py is pure: stdlib, pydantic and transformer_calc.errors only (no yaml/rich/typer)."""
    import ast

    tree = ast.parse((ROOT / "transformer_calc" / "devices" / "hardware.py").read_text(encoding="utf-8"))
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert not imported & {"yaml", "rich", "typer"}
    assert imported <= {"__future__", "re", "collections", "decimal", "typing", "pydantic",
                        "transformer_calc"}


def test_str_enum_dtype_accepted() -> None:
    from enum import Enum

    class Dtype(str, Enum):
        bf16 = "bf16"

    assert peak_flops(TABLE["H100-SXM5-80GB"], Dtype.bf16) == 989_400_000_000_000


@pytest.mark.parametrize("value", [True, 0, -1, 1.5, "81089", None])
def test_memory_mib_is_a_positive_int_with_its_source(value) -> None:
    """`memory_mib` (the memory the driver reports) is a strict positive int and needs `memory_mib_source`."""
    def edit(gpus):
        gpus[0]["memory_mib"] = value
        gpus[0]["memory_mib_source"] = "a printout"

    data = _with(edit)  # None with a source: the source alone is refused too
    with pytest.raises(TcalcError, match="A100-SXM4-40GB"):
        parse_hardware_table(data)


def test_memory_mib_keeps_the_marketed_figure() -> None:
    """The driver's figure is the capacity; the datasheet's stays as marketed_memory_bytes."""
    h100 = TABLE["H100-SXM5-80GB"]
    assert (h100.memory_bytes, h100.marketed_memory_bytes) == (81089 * 2**20, 80 * 10**9)
    assert h100.memory_source and "81089MB" in h100.memory_source
    assert TABLE["MI300X"].marketed_memory_bytes is None and TABLE["MI300X"].memory_bytes == 192 * 10**9
