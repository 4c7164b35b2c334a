"""`tcalc presets` and `tcalc hardware`: the model presets and the accelerator table.

The typed results (`PresetsResult`, `HardwareResult`) are the commands' JSON
(`model_dump(mode="json")`: a list of rows, or one accelerator), the Python API's return values and
what render reads; docs/cli.md documents their keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, RootModel

from transformer_calc.estimators.params import total_params
from transformer_calc.results.base import Section

if TYPE_CHECKING:
    from transformer_calc.requests.catalog import HardwareRequest, PresetsRequest, SchemaRequest


class PresetRow(Section):
    """One model preset: its key numbers (the resolved ModelConfig's) and where they come from."""

    name: str  # the canonical preset name
    family: str | None
    aliases: list[str]
    params: int  # exact total (tcalc params)
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    vocab_size: int
    max_seq_len: int
    mlp: str  # the MLP kind (gelu, swiglu, ...)
    n_experts: int  # 1: dense
    source: str  # the config or paper the preset is read from


class PresetsResult(RootModel[list[PresetRow]]):
    """`tcalc presets`: one row per model preset (the JSON is the list)."""

    model_config = ConfigDict(frozen=True)

    # the rows, not BaseModel's (field, value) pairs: pydantic's own recipe for an iterable RootModel
    def __iter__(self) -> Iterator[PresetRow]:  # type: ignore[override]
        return iter(self.root)

    def __len__(self) -> int:
        return len(self.root)

    def __getitem__(self, i: int) -> PresetRow:
        return self.root[i]


# An accelerator's row: here, not in results/common.py, so that the commands that fit on a GPU do
# not build it (issue 39: only `tcalc hardware` shows it)
class GpuSection(Section):
    """One accelerator as the hardware table (presets/hardware.yaml) gives it, in base units, with
    λ_math derived per dtype."""

    name: str  # canonical, e.g. A100-SXM4-80GB
    aliases: list[str]  # the short names --gpu takes
    vendor: str  # nvidia, amd, google, intel
    memory_bytes: int  # what a program can allocate from: the driver's figure where measured, else as marketed
    marketed_memory_bytes: int | None  # the datasheet's figure, where memory_bytes is the driver's
    memory_source: str | None  # where memory_bytes was measured (None: the datasheet)
    memory_bw_bytes_s: int
    peak_flops: dict[str, int]  # dtype -> dense peak, FLOP/s (int8/int4: ops/s)
    math_bandwidth: dict[str, float]  # dtype -> λ_math = peak / memory bandwidth, FLOP per byte
    interconnect: str | None  # what interconnect_bytes_s is: 'NVLink 4', 'ICI', 'PCIe Gen4 x16'
    interconnect_bytes_s: int | None  # GPU to GPU, bidirectional per GPU
    pcie_bytes_s: int | None  # PCIe x16 host link, bidirectional
    host_link: str | None  # the link to host memory: 'PCIe x16', or Grace's 'NVLink-C2C'
    host_link_bytes_s: int | None  # that link per GPU, bidirectional
    source: str  # the datasheet the numbers come from
    verified: bool  # false: not re-read from the source
    notes: str | None


def gpu_section(gpu: Any) -> GpuSection:
    """One accelerator as a result row; λ_math derived per dtype."""
    from transformer_calc.devices.hardware import host_bandwidth, math_bandwidth

    host_link, host_link_bytes_s = host_bandwidth(gpu)
    return GpuSection(
        name=gpu.name,
        aliases=list(gpu.aliases),
        vendor=gpu.vendor,
        memory_bytes=gpu.memory_bytes,
        marketed_memory_bytes=gpu.marketed_memory_bytes,
        memory_source=gpu.memory_source,
        memory_bw_bytes_s=gpu.memory_bw_bytes_s,
        peak_flops=dict(gpu.peak_flops),
        math_bandwidth={dt: math_bandwidth(gpu, dt) for dt in gpu.peak_flops},
        interconnect=gpu.interconnect,
        interconnect_bytes_s=gpu.interconnect_bytes_s,
        pcie_bytes_s=gpu.pcie_bytes_s,
        host_link=host_link,
        host_link_bytes_s=host_link_bytes_s,
        source=gpu.source,
        verified=gpu.verified,
        notes=gpu.notes,
    )


def gpu_dict(gpu: Any) -> dict[str, Any]:
    """One accelerator as JSON (`gpu_section`'s), for results still composed as dicts."""
    return gpu_section(gpu).model_dump(mode="json")


class HardwareResult(RootModel[list[GpuSection] | GpuSection]):
    """`tcalc hardware`: every accelerator (a list, the table's order); `tcalc hardware NAME`: one."""

    model_config = ConfigDict(frozen=True)


def presets_report() -> PresetsResult:
    """`tcalc presets`: every model preset with its key numbers and source."""
    from transformer_calc.sources.presets import model_presets, preset_model

    rows = []
    for name, entry in model_presets().items():
        m = preset_model(name)
        rows.append(
            PresetRow(
                name=name,
                family=entry.get("family"),
                aliases=list(entry.get("aliases", [])),
                params=total_params(m),  # a multimodal preset: its towers included
                n_layers=m.n_layers,
                d_model=m.d_model,
                n_heads=m.n_heads,
                n_kv_heads=m.n_kv_heads,
                d_ff=m.d_ff,
                vocab_size=m.vocab_size,
                max_seq_len=m.max_seq_len,
                mlp=m.mlp.value,
                n_experts=m.n_experts,
                source=entry["source"],  # every preset names its source (tests/test_presets_params.py)
            )
        )
    return PresetsResult(rows)


def hardware_report() -> HardwareResult:
    """`tcalc hardware`: every accelerator with capacity, bandwidth, dense peaks, λ_math."""
    from transformer_calc.sources.presets import hardware_table

    return HardwareResult([gpu_section(gpu) for gpu in hardware_table().values()])


def gpu_report(name: str) -> HardwareResult:
    """`tcalc hardware NAME`: one accelerator, looked up by name or alias (did-you-mean)."""
    from transformer_calc.sources.presets import gpu

    return HardwareResult(gpu_section(gpu(name)))


# ---------------------------------------------------------------------------- the command
def run_presets(req: PresetsRequest) -> PresetsResult:
    return presets_report()


# ---------------------------------------------------------------------------- the command
def run_hardware(req: HardwareRequest) -> HardwareResult:
    return hardware_report() if req.name is None else gpu_report(req.name)


# ---------------------------------------------------------------------------- the command
def run_schema(req: SchemaRequest) -> dict[str, Any]:
    from transformer_calc.results import result_schema

    return result_schema(req.name)
