"""Validate tcalc's training step time against published runs with their full parallel layout.

The runs and their layouts are in train_runs.yaml next to this file, each copied from a source
named there (repository, path and commit, or paper and table). For every row this computes

    transformer_calc.estimators.training.train.estimate_step(model, Workload(seq_len=S, batch_size=micro_batch),
        Training(precision, recompute, flash), Parallelism(tensor, pipeline, data=dp,
        sequence_parallel, zero, context, virtual_stages), gpu, global_batch=G)

with dp = gpus / (tensor · pipeline · context), and compares like with like on the metric the row
names in `compare`:

    step_time_s           seconds per optimizer step          est.step_time_s
    tokens_per_s_per_gpu  tokens / s / GPU                    est.tokens_per_s / gpus
    tflops_per_gpu        the source's FLOPs per step / step  the SAME FLOP count (the source's
                          time / GPUs (Narayanan et al. 2021: formula, `flops_formula`) divided by
                          eq. 3, 96·B·s·l·h²(1 + s/6h +       est.step_time_s and the GPUs; not
                          V/16lh), recompute forward          tcalc's own FLOP count
                          included, HFU-like)

All three reduce to a step time, so the error is one number: tcalc throughput / measured
throughput − 1 = measured step time / tcalc step time − 1 (negative: tcalc predicts a slower step
than was measured). Published MFU/HFU are shown beside tcalc's `est.mfu` / `est.hfu` for reference
only: each source defines its own FLOP count (MosaicML and NVIDIA's recipes count the full S×S
attention, Korthikanti et al. the causal-free lower bound of their appendix), so those columns are
not the comparison.

Fitted: TRAINING_GEMM_FRACTION on the narayanan-* rows (issue 17), the megatron profile's
MEGATRON_GEMM_FRACTION on the dgxc-* rows, precision.LOW_PRECISION_GEMM_RATIO on the nemo-* rows,
moe_time.MOE_EXPERT_OVERHEAD_S on the MoE rows of mbridge2511-* and the torchtitan profile's
TORCHTITAN_GEMM_FRACTION on the torchtitan-a100-* rows marked `fit: true` (issue 24); every other
source only validates. No network access.

    PYTHONPATH=. python tools/validation/train_runs.py [--write-docs] [--write-errors] [-v]

--write-docs replaces the section of docs/validation.md between BEGIN and END (appended at the end
when absent); --write-errors the table of estimators/training/validation_errors.py (each group's
median |error|, which `tcalc train` shows beside its step time).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from transformer_calc.model.config import ModelConfig, Parallelism, Training, Workload  # noqa: E402
from transformer_calc.sources.presets import gpu as gpu_by_name  # noqa: E402
from transformer_calc.sources.presets import preset_model, safe_load_yaml  # noqa: E402
from transformer_calc.estimators.training.memory import FrameworkMemory  # noqa: E402
from transformer_calc.estimators.training.timeline import Timeline, fit_capacity, peak_memory  # noqa: E402
from transformer_calc.estimators.training.train import StepEstimate, estimate_step  # noqa: E402

DATA = Path(__file__).with_suffix(".yaml")
DOCS = REPO / "docs" / "validation.md"
BEGIN, END = "<!-- train_runs:begin -->", "<!-- train_runs:end -->"
REGENERATE = "PYTHONPATH=. python tools/validation/train_runs.py --write-docs"
METRICS = ("step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu")
PRECISIONS = ("mixed", "bf16", "fp8", "fp32")
REQUIRED = ("id", "source", "model", "gpu", "gpus", "seq_len", "global_batch", "micro_batch", "tensor",
            "pipeline", "recompute", "flash", "zero", "precision", "measured", "compare")  # fmt: skip


# ---------------------------------------------------------------------------- the source's FLOP counts
def narayanan_flops(m: ModelConfig, global_batch: int, seq_len: int) -> float:
    """Eq. 3 of Narayanan et al. 2021 (arXiv:2104.04473): FLOPs of one iteration with activation
    recomputation, GEMMs only: F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))."""
    B, s, l, h, V = global_batch, seq_len, m.n_layers, m.d_model, m.vocab_size
    return 96 * B * s * l * h**2 * (1 + s / (6 * h) + V / (16 * l * h))


FLOPS_FORMULAS = {"narayanan": narayanan_flops}


# ---------------------------------------------------------------------------- rows
@dataclass
class Result:
    row: dict[str, Any]
    model: ModelConfig
    workload: Workload
    training: Training
    parallelism: Parallelism
    gpu: Any
    est: StepEstimate

    @property
    def metric(self) -> str:
        return self.row["compare"]

    @property
    def measured_value(self) -> float:
        return float(self.row["measured"][self.metric])

    def _step_from(self, value: float) -> float:
        """The step time (s) a value of the compared metric means for this run."""
        G, S, n = self.row["global_batch"], self.row["seq_len"], self.row["gpus"]
        if self.metric == "step_time_s":
            return value
        if self.metric == "tokens_per_s_per_gpu":
            return G * S / (value * n)
        if self.metric == "mfu":  # the model FLOPs at the published MFU of the dense bf16 peak
            return self.mfu_flops() / (value * n * self.est.peak_flops_s)
        return self.source_flops() / (value * 1e12 * n)

    def mfu_flops(self) -> float:
        """The model FLOPs of one step an MFU row counts: tcalc's (full S² attention per head), or
        with `mfu_attention: causal` the causal half (FlashAttention's count)."""
        from transformer_calc.estimators.flops import count_flops

        causal = self.row.get("mfu_attention", "full") == "causal"
        return count_flops(self.model, Workload(seq_len=self.row["seq_len"], batch_size=self.row["global_batch"]),
                           causal=causal).total

    def source_flops(self) -> float:
        return FLOPS_FORMULAS[self.row["flops_formula"]](self.model, self.row["global_batch"], self.row["seq_len"])

    @property
    def measured_step_s(self) -> float:
        return self._step_from(self.measured_value)

    @property
    def predicted_value(self) -> float:
        """tcalc's value of the compared metric, in the source's units and FLOP convention."""
        n = self.row["gpus"]
        if self.metric == "step_time_s":
            return self.est.step_time_s
        if self.metric == "tokens_per_s_per_gpu":
            return self.est.tokens_per_s / n
        if self.metric == "mfu":
            return self.mfu_flops() / (self.est.step_time_s * n * self.est.peak_flops_s)
        return self.source_flops() / self.est.step_time_s / n / 1e12

    @property
    def error(self) -> float:
        """tcalc throughput / measured throughput − 1."""
        return self.measured_step_s / self.est.step_time_s - 1


def load_rows(path: Path = DATA) -> list[dict[str, Any]]:
    data = safe_load_yaml(path.read_text(encoding="utf-8"), str(path))
    rows = data["rows"]
    ids = [r.get("id") for r in rows]
    if len(ids) != len(set(ids)):
        raise SystemExit(f"{path}: duplicate row ids")
    for r in rows:
        missing = [k for k in REQUIRED if k not in r]
        if missing:
            raise SystemExit(f"{r.get('id')}: missing {', '.join(missing)}")
        if r["compare"] not in METRICS:
            raise SystemExit(f"{r['id']}: compare must be one of {', '.join(METRICS)}")
        if r["compare"] not in r["measured"]:
            raise SystemExit(f"{r['id']}: measured has no {r['compare']}")
        if r["compare"] == "tflops_per_gpu" and r.get("flops_formula") not in FLOPS_FORMULAS:
            raise SystemExit(f"{r['id']}: tflops_per_gpu needs flops_formula, one of {', '.join(FLOPS_FORMULAS)}")
        if r["precision"] not in PRECISIONS:
            raise SystemExit(f"{r['id']}: precision must be one of {', '.join(PRECISIONS)}")
        split = r["tensor"] * r["pipeline"] * r.get("context", 1)
        if r["gpus"] % split:
            raise SystemExit(f"{r['id']}: gpus ({r['gpus']}) is not a multiple of "
                             f"tensor x pipeline x context ({split})")
    return rows


def row_model(row: dict[str, Any]) -> ModelConfig:
    spec = row["model"]
    model = preset_model(spec) if isinstance(spec, str) else ModelConfig.model_validate(spec)
    overrides = row.get("model_overrides") or {}
    return model.with_overrides(overrides) if overrides else model


def row_training(row: dict[str, Any]) -> Training:
    """precision fp8 = 16-bit training with FP8 GEMMs: Transformer Engine's delayed-scaling recipe
    (`fp8_recipe`, default delayed) over mixed precision. `framework` (default pytorch) picks the
    time profile: megatron prices Megatron-core's overlaps and GEMM efficiency."""
    common = {"recompute": row["recompute"], "flash": bool(row["flash"]),
              "framework": row.get("framework", "pytorch"), "compile": bool(row.get("compile", False))}
    if "grad_bytes" in row:  # the gradient buffer's dtype (Megatron-core: fp32 unless grad_reduce_in_fp32 is off)
        common["grad_bytes"] = row["grad_bytes"]
    if row["precision"] == "fp8":
        return Training.model_validate({"precision": "mixed", "fp8_recipe": row.get("fp8_recipe", "delayed"), **common})
    return Training.model_validate({"precision": row["precision"], **common})


def row_framework_memory(row: dict[str, Any]) -> FrameworkMemory:
    """Megatron-core memory settings outside `Training`: `fp8_param_gather`,
    `activation_offload_layers` and `recompute_modules` (memory.FrameworkMemory)."""
    return FrameworkMemory(fp8_param_gather=bool(row.get("fp8_param_gather", False)),
                           offloaded_layers=int(row.get("activation_offload_layers", 0)),
                           recompute_modules=tuple(row.get("recompute_modules", ())))


def row_parallelism(row: dict[str, Any]) -> Parallelism:
    T, P, cp = row["tensor"], row["pipeline"], row.get("context", 1)
    split = {k: row[k] for k in ("first_stage_layers", "last_stage_layers", "embedding_in_split", "loss_in_split",
                                 "expert", "expert_tensor", "cp_comm_type") if k in row}
    return Parallelism(
        tensor=T, pipeline=P, data=row["gpus"] // (T * P * cp), context=cp, virtual_stages=row.get("virtual_stages", 1),
        sequence_parallel=bool(row.get("sequence_parallel", False)), zero=row["zero"], **split,
    )  # fmt: skip


def evaluate(row: dict[str, Any]) -> Result:
    model = row_model(row)
    w = Workload(seq_len=row["seq_len"], batch_size=row["micro_batch"])
    tr = row_training(row)
    par = row_parallelism(row)
    gpu = gpu_by_name(row["gpu"])
    # A source that states its gradient reduction is not overlapped with the backward says so in
    # `overlap_grad_reduce: false` (estimate_step's overlap_dp); the default is tcalc's (overlapped).
    overlap = bool(row.get("overlap_grad_reduce", True))
    est = estimate_step(model, w, tr, par, gpu, global_batch=row["global_batch"], overlap_dp=overlap,
                        tp_comm_overlap=row.get("tp_comm_overlap"), moe_a2a_overlap=bool(row.get("moe_a2a_overlap")))
    return Result(row, model, w, tr, par, gpu, est)


@dataclass
class Fit:
    """The step's peak (timeline.peak_memory, the row's micro-batches per step) against what the GPU
    can allocate (timeline.fit_capacity, the one fit test of `tcalc train`, `memory` and `plan`)."""

    timeline: Timeline
    usable_bytes: int

    @property
    def peak_bytes(self) -> int:
        return self.timeline.peak_bytes

    @property
    def fits(self) -> bool:
        return self.peak_bytes <= self.usable_bytes

    @property
    def headroom(self) -> float:
        """1 - peak / usable: the fraction of the usable memory left (negative: does not fit)."""
        return 1 - self.peak_bytes / self.usable_bytes


def fit(r: Result) -> Fit:
    """The row's peak against the GPU (timeline.fit_capacity). `memory_framework` (optional): the
    memory conventions of a stack whose time is priced with another profile (Meta's Llama 3 stack:
    fused kernels, as Megatron-core's, under the pytorch time profile)."""
    from transformer_calc.model.config import Framework

    update: dict[str, Any] = {"micro_batches": r.est.micro_batches}
    if r.row.get("memory_framework"):
        update["framework"] = Framework(r.row["memory_framework"])
    tr = r.training.model_copy(update=update)
    tl = peak_memory(r.model, r.workload, tr, r.parallelism, framework_memory=row_framework_memory(r.row))
    return Fit(tl, fit_capacity(r.gpu.memory_bytes))


# ---------------------------------------------------------------------------- rendering
UNITS = {"step_time_s": "s/step", "tokens_per_s_per_gpu": "tok/s/GPU", "tflops_per_gpu": "TFLOP/s/GPU", "mfu": "MFU"}


def fmt_metric(metric: str, value: float) -> str:
    if metric == "step_time_s":
        return f"{value:.3g} s/step" if value < 10 else f"{value:.1f} s/step"
    if metric == "tokens_per_s_per_gpu":
        return f"{value:,.0f} tok/s/GPU"
    if metric == "mfu":
        return f"MFU {value:.1%}"
    return f"{value:.0f} TFLOP/s/GPU"


def setup_text(r: Result) -> str:
    row, par, tr = r.row, r.parallelism, r.training
    name = row["model"] if isinstance(row["model"], str) else (
        f"L{r.model.n_layers} D{r.model.d_model} A{r.model.n_heads}")
    if row.get("model_overrides"):
        name += " (" + ", ".join(f"{k}={v}" for k, v in row["model_overrides"].items()) + ")"
    layout = f"T{par.tensor}{'+SP' if par.sequence_parallel else ''} P{par.pipeline}"
    if par.virtual_stages > 1:
        layout += f" v{par.virtual_stages}"
    if par.context > 1:
        layout += f" CP{par.context}"
    layout += f" dp{par.data}"
    layout += {0: "", 1: " ZeRO-1", 2: " ZeRO-2", 3: " ZeRO-3 (FSDP)"}[par.zero]
    recompute = "no recompute" if tr.recompute.value == "none" else f"{tr.recompute.value} recompute"
    if not row.get("overlap_grad_reduce", True):
        recompute += ", gradient reduction not overlapped"
    return (f"{row.get('framework_name', '')}, {row['gpus']}× {r.gpu.name}; {name}, S={row['seq_len']} "
            f"G={row['global_batch']} b={row['micro_batch']} (m={r.est.micro_batches}); {layout}; "
            f"{row['precision']}, {'flash' if tr.flash else 'no flash'}, {recompute}")


def utilisation_text(r: Result) -> str:
    meas = r.row["measured"]
    parts = []
    if "mfu" in meas:
        parts.append(f"MFU {float(meas['mfu']):.1%} (tcalc {r.est.mfu:.1%})")
    if "hfu" in meas:
        parts.append(f"HFU {float(meas['hfu']):.1%} (tcalc {r.est.hfu:.1%})")
    return "; ".join(parts)


def summary(results: list[Result]) -> tuple[float, Result]:
    errs = [abs(r.error) for r in results]
    worst = max(results, key=lambda r: abs(r.error))
    return statistics.median(errs), worst


def print_table(results: list[Result], verbose: bool) -> None:
    head = (f"{'row':<38} {'metric':>12} {'measured':>10} {'tcalc':>10} {'error':>8}  "
            f"{'meas. step':>10} {'tcalc step':>10}  {'peak/usable GiB':>15} fits")
    print(head)
    print("-" * len(head))
    fits = {id(r): fit(r) for r in results}
    for r in results:
        f = fits[id(r)]
        print(f"{r.row['id']:<38} {UNITS[r.metric]:>12} {r.measured_value:>10.4g} {r.predicted_value:>10.4g} "
              f"{r.error:>+8.1%}  {r.measured_step_s:>10.3f} {r.est.step_time_s:>10.3f}  {fit_text(f):>15} "
              f"{'yes' if f.fits else 'NO'}")
        if verbose:
            print(f"    {setup_text(r)}")
            util = utilisation_text(r)
            if util:
                print(f"    {util}")
            parts = ", ".join(f"{k[:-2]} {v:.3g}" for k, v in r.est.breakdown.items() if v)
            print(f"    breakdown (s): {parts}")
    med, worst = summary(results)
    print(f"\n{len(results)} rows; median |error| {med:.1%}; worst {worst.row['id']} {worst.error:+.1%}")
    print(fit_summary(results, fits))
    for label, group in groups(results):
        gmed, gworst = summary(group)
        print(f"  {label}: {len(group)} rows, median |error| {gmed:.1%}, worst {gworst.row['id']} {gworst.error:+.1%}")
    print("per source, generation, dense/MoE (median |error| <= 10 % and >= 85 % within ±25 %):")
    for label, group in cells(results):
        gmed, _ = summary(group)
        within = sum(abs(r.error) <= 0.25 for r in group) / len(group)
        print(f"  {label}: {len(group)} rows, median |error| {gmed:.1%}, {within:.0%} within ±25 %"
              f"{'' if gmed <= 0.10 and within >= 0.85 else '  (not met)'}")


GIB = 2**30


def fit_text(f: Fit) -> str:
    return f"{f.peak_bytes / GIB:.1f}/{f.usable_bytes / GIB:.1f}"


def fit_summary(results: list[Result], fits: dict[int, Fit]) -> str:
    """How many rows tcalc calls "does not fit" (each ran), those the YAML holds open, and the
    smallest headroom of those that fit."""
    misfits = [r for r in results if not fits[id(r)].fits]
    open_ = [r for r in misfits if r.row.get("memory_open")]
    fitting = [fits[id(r)].headroom for r in results if fits[id(r)].fits]
    text = (f"fit: {len(results) - len(misfits)}/{len(results)} rows fit the GPU (peak <= capacity - CUDA context); "
            f"{len(misfits)} do not")
    if misfits:
        text += f" ({len(open_)} of them held open in the YAML's memory_open: " + ", ".join(r.row["id"] for r in misfits) + ")"
    if fitting:
        text += f"; smallest headroom of those that fit {min(fitting):.1%}, median {statistics.median(fitting):.1%}"
    return text


def groups(results: list[Result]) -> list[tuple[str, list[Result]]]:
    by: dict[str, list[Result]] = {}
    for r in results:
        parts = r.row["id"].split("-")
        # torchtitan's sources apart: its December 2024 H100 benchmark, its A100 table, Trainy's H200 runs
        by.setdefault("-".join(parts[:2]) if parts[0] == "torchtitan" else parts[0], []).append(r)
    for r in results:
        by.setdefault(r.gpu.name.split("-")[0], []).append(r)
    for r in results:  # per GPU generation, and MoE apart from dense (issue 24)
        by.setdefault(generation(r.gpu.name), []).append(r)
    for r in results:
        by.setdefault("MoE" if r.model.is_moe else "dense", []).append(r)
    return list(by.items())


def source_of(r: Result) -> str:
    parts = r.row["id"].split("-")
    return "-".join(parts[:2]) if parts[0] == "torchtitan" else parts[0]


def cells(results: list[Result]) -> list[tuple[str, list[Result]]]:
    """Issue 37's acceptance cells: each source, GPU generation and dense/MoE apart."""
    by: dict[str, list[Result]] = {}
    for r in results:
        key = f"{source_of(r)}, {generation(r.gpu.name).split(' ')[0]}, {'MoE' if r.model.is_moe else 'dense'}"
        by.setdefault(key, []).append(r)
    return list(by.items())


def cell_line(label: str, group: list[Result]) -> str:
    gmed, gworst = summary(group)
    within = sum(abs(r.error) <= 0.25 for r in group) / len(group)
    met = "yes" if gmed <= 0.10 and within >= 0.85 else "no"
    return f"| {label} | {len(group)} | {gmed:.1%} | {within:.0%} | {met} | {gworst.row['id']} ({gworst.error:+.1%}) |"


GENERATIONS = (("A100", "Ampere (A100)"), ("H1", "Hopper (H100, H200)"), ("H2", "Hopper (H100, H200)"),
               ("B", "Blackwell (B200, B300, GB200, GB300)"), ("GB", "Blackwell (B200, B300, GB200, GB300)"))


def generation(gpu_name: str) -> str:
    for prefix, name in GENERATIONS:
        if gpu_name.upper().startswith(prefix):
            return name
    return gpu_name


def breakdown_text(r: Result) -> str:
    b = r.est.breakdown
    total = r.est.step_time_s
    keep = [(k[:-2], v) for k, v in b.items() if v / total >= 0.005]
    return ", ".join(f"{k} {v / total:.0%}" for k, v in keep)


def docs_section(results: list[Result]) -> str:
    med, worst = summary(results)
    fits = {id(r): fit(r) for r in results}
    lines = [
        BEGIN,
        "<!-- Generated by tools/validation/train_runs.py; do not edit by hand. Regenerate with:",
        f"     {REGENERATE} -->",
        "",
        "## Training step time: tcalc vs published runs",
        "",
        f"Generated by `tools/validation/train_runs.py` from `tools/validation/train_runs.yaml` (no network "
        f"access). {len(results)} published runs with their full layout; median |error| {med:.1%}, worst "
        f"{worst.row['id']} ({worst.error:+.1%}).",
        "",
        "**Measured:** end-to-end training throughput as the authors published it (step time, tokens/s/GPU, "
        "or TFLOP/s/GPU), each copied from the source in the YAML (repository, path, commit, or paper and "
        "table), with the layout read from the same run's launcher script or config; details a source "
        "leaves open are stated as assumptions in the row's `notes` (folded below).",
        "",
        "**Predicted:** `transformer_calc.estimators.training.train.estimate_step(model, Workload(S, micro_batch), "
        "Training(precision, recompute, flash), Parallelism(T, P, dp, SP, ZeRO, CP, v), gpu, "
        "global_batch=G)`, dp = GPUs / (T·P·CP), compared in the source's own metric: a step time with "
        "`step_time_s`; tokens/s/GPU with `tokens_per_s / GPUs`; Narayanan et al.'s TFLOP/s/GPU by "
        "dividing *their* eq. 3 FLOP count (96·B·s·l·h²(1 + s/6h + V/16lh), which includes the "
        "recomputed forward, i.e. hardware-FLOPs-like) by tcalc's step time, not with tcalc's own FLOPs. "
        "Error = tcalc throughput / measured − 1 = measured step / tcalc step − 1 (negative: tcalc "
        "predicts a slower step). Published MFU/HFU are shown for reference next to tcalc's `mfu`/`hfu`; "
        "their FLOP conventions differ by source, so they are not the comparison (rows compared on MFU "
        "say which attention count they assume). Five constants are fitted, each on one source: "
        "TRAINING_GEMM_FRACTION on the narayanan rows, the megatron profile's MEGATRON_GEMM_FRACTION "
        "(Hopper and later) on the dgxc rows, the precision recipes' LOW_PRECISION_GEMM_RATIO "
        "(estimators/training/precision.py) on the nemo rows (NeMo 24.07 FP8), the MoE block's "
        "MOE_EXPERT_OVERHEAD_S (estimators/training/moe_time.py) on the mbridge2511 rows (Megatron-Bridge "
        "25.11's MoE runs), and the torchtitan profile's TORCHTITAN_GEMM_FRACTION on the three "
        "torchtitan-a100 rows without AC or with full AC; every other source only validates. Every "
        "published layout is expressed (0 refused); the few that need an approximation say so in their notes.",
        "",
        "**Fit:** each run ran, so its peak must fit: `timeline.peak_memory` of the row's layout (with the "
        "row's micro-batches per step and its Megatron-core memory settings, `memory.FrameworkMemory`) against "
        "`timeline.fit_capacity` (the GPU less the CUDA context; the one fit test of `tcalc train`, `memory` "
        "and `plan`). " + fit_summary(results, fits) + ".",
        "",
        "| source | setup | measured | tcalc | error | peak / usable GiB, fits |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        measured = fmt_metric(r.metric, r.measured_value)
        if r.metric != "step_time_s":
            measured += f" (= {r.measured_step_s:.3g} s/step)"
        util = utilisation_text(r)
        tcalc = f"{fmt_metric(r.metric, r.predicted_value)}"
        if r.metric != "step_time_s":
            tcalc += f" ({r.est.step_time_s:.3g} s/step)"
        tcalc += f"<br>{breakdown_text(r)}"
        if util:
            measured += f"<br>{util}"
        f = fits[id(r)]
        lines.append(f"| {r.row['source']} | {setup_text(r)} | {measured} | {tcalc} | {r.error:+.1%} | "
                     f"{fit_text(f)} {'yes' if f.fits else '**no**'} |")
    lines += ["", "| group | rows | median \\|error\\| | within ±25 % | worst |", "| --- | --- | --- | --- | --- |"]
    for label, group in [("all", results), *groups(results)]:
        gmed, gworst = summary(group)
        within = sum(abs(r.error) <= 0.25 for r in group) / len(group)
        lines.append(f"| {label} | {len(group)} | {gmed:.1%} | {within:.0%} | {gworst.row['id']} ({gworst.error:+.1%}) |")
    lines += ["", "Per source, GPU generation and dense/MoE (issue 37's acceptance: median |error| <= 10 % and "
              ">= 85 % within ±25 % in each):", "",
              "| source, generation, kind | rows | median \\|error\\| | within ±25 % | met | worst |",
              "| --- | --- | --- | --- | --- | --- |"]
    lines += [cell_line(label, group) for label, group in cells(results)]
    lines += ["", "<details><summary>Assumptions per row</summary>", ""]
    for r in results:
        where = r.row.get("setup_source", "")
        notes = " ".join(str(r.row.get("notes", "")).split())
        lines.append(f"- **{r.row['id']}**{f' ({where})' if where else ''}: {notes}")
    lines += ["", "</details>", END]
    return "\n".join(lines) + "\n"


def write_docs(section: str, path: Path = DOCS) -> None:
    from tools.docsection import write_section

    write_section(path, BEGIN, END, section)
    print(f"wrote the {BEGIN} section of {path.relative_to(REPO)}")


ERRORS_MODULE = REPO / "transformer_calc" / "estimators" / "training" / "validation_errors.py"


def error_groups(results: list[Result]) -> dict[tuple[str, str, str], tuple[int, float, float]]:
    """(time profile, GPU generation, dense | MoE) -> (runs, median |error|, share within ±25 %): what
    `tcalc train` shows beside its step time (issue 37, "honest uncertainty")."""
    from transformer_calc.estimators.training.validation_errors import gpu_generation

    by: dict[tuple[str, str, str], list[float]] = {}
    for r in results:
        gen = gpu_generation(r.gpu.name)
        if gen is None:
            continue
        key = (r.training.framework.value, gen, "MoE" if r.model.is_moe else "dense")
        by.setdefault(key, []).append(abs(r.error))
    return {k: (len(v), round(statistics.median(v), 4), round(sum(e <= 0.25 for e in v) / len(v), 4))
            for k, v in sorted(by.items())}


def write_errors(results: list[Result], path: Path = ERRORS_MODULE) -> None:
    """Rewrite the table of validation_errors.py between its BEGIN and END lines."""
    text = path.read_text(encoding="utf-8")
    head, rest = text.split("# BEGIN generated\n", 1)
    tail = rest.split("# END generated\n", 1)[1]
    body = "".join(f"    {k!r}: {v!r},\n" for k, v in error_groups(results).items())
    path.write_text(head + "# BEGIN generated\nVALIDATION_ERRORS = {\n" + body + "}\n# END generated\n" + tail,
                    encoding="utf-8")
    print(f"wrote {path.relative_to(REPO)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write-docs", action="store_true", help="replace this tool's section of docs/validation.md")
    ap.add_argument("--write-errors", action="store_true",
                    help="rewrite transformer_calc/estimators/training/validation_errors.py (the errors tcalc train shows)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each setup, MFU/HFU and tcalc's breakdown")
    args = ap.parse_args(argv)
    results = [evaluate(row) for row in load_rows()]
    print_table(results, args.verbose)
    if args.write_docs:
        write_docs(docs_section(results))
    if args.write_errors:
        write_errors(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
