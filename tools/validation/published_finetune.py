"""Validate tcalc's fine-tuning memory (LoRA/QLoRA) against published figures.

The figures and their setups are in published_finetune.yaml next to this file, with their sources.
Nothing is fitted. For each row:

    max_context  tcalc's longest S (bisection over S <= 2^20, B as given) whose peak fits the
                 capacity less the CUDA context, vs the measured longest context; and tcalc's peak
                 at the measured S
    fits         tcalc's peak at the stated setup vs the capacity (the claim: it fits)
    lower_bound  tcalc's model states vs a stated lower bound

    PYTHONPATH=. python tools/validation/published_finetune.py [--write-docs] [-v]

--write-docs replaces the section of docs/validation.md between BEGIN and END (appended when absent).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from transformer_calc.model.config import (  # noqa: E402
    TRAINING_KEYS,
    ModelConfig,
    Parallelism,
    Training,
    Workload,
    build,
    canonical_section,
    split_training,
)
from transformer_calc.estimators.training.finetune import trainable_params  # noqa: E402
from transformer_calc.estimators.training.memory import training_memory  # noqa: E402
from transformer_calc.sources.presets import preset_model, safe_load_yaml  # noqa: E402
from transformer_calc.estimators.training.timeline import fit_capacity, peak_memory  # noqa: E402

DATA = Path(__file__).with_suffix(".yaml")
DOCS = REPO / "docs" / "validation.md"
BEGIN, END = "<!-- published_finetune:begin -->", "<!-- published_finetune:end -->"
REGENERATE = "PYTHONPATH=. python tools/validation/published_finetune.py --write-docs"
GB = 10**9
MAX_S = 2**20  # bisection bound (20 steps)


@dataclass
class Result:
    row: dict[str, Any]
    model: ModelConfig
    workload: Workload
    training: Training
    measured: float  # tokens (max_context), GB (lower_bound), capacity GB (fits)
    tcalc: float
    peak_at_measured: int | None = None
    variant: float | None = None  # tcalc with the row's `variant:` settings (same kind of number)

    @property
    def error(self) -> float | None:
        if self.row["kind"] == "fits":
            return None
        return self.tcalc / self.measured - 1

    @property
    def agrees(self) -> bool:
        kind = self.row["kind"]
        if kind == "fits":
            return self.tcalc <= fit_capacity(int(self.row["capacity_gb"] * GB))
        if kind == "lower_bound":
            return self.tcalc >= self.measured
        return abs(self.error or 0) <= 0.10


def load(path: Path = DATA) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    data = safe_load_yaml(path.read_text(encoding="utf-8"), str(path))
    return data, data["rows"]


def configs(section: dict[str, Any]) -> tuple[Workload, Training, Parallelism]:
    parts = split_training(canonical_section("training", section, TRAINING_KEYS))
    parts["workload"].setdefault("seq_len", 1)
    return (build(Workload, parts["workload"], "training"), build(Training, parts["training"], "training"),
            build(Parallelism, parts["parallelism"], "training"))


def model_of(row: dict[str, Any], data: dict[str, Any]) -> ModelConfig:
    if "preset" in row:
        return preset_model(row["preset"])
    return ModelConfig.model_validate({"name": row["model"], **data["models"][row["model"]]})


def longest_fitting(m: ModelConfig, w: Workload, tr: Training, par: Parallelism, capacity: int) -> int:
    """The largest S <= MAX_S whose peak fits `capacity` (0: none); peak memory grows with S."""
    lo, hi = 0, MAX_S
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if peak_memory(m, w.model_copy(update={"seq_len": mid}), tr, par).peak_bytes <= capacity:
            lo = mid
        else:
            hi = mid - 1
    return lo


def evaluate(row: dict[str, Any], data: dict[str, Any]) -> Result:
    m = model_of(row, data)
    w, tr, par = configs(row["training"])
    kind = row["kind"]
    if kind == "max_context":
        capacity = fit_capacity(int(row["capacity_gb"] * GB))
        s = longest_fitting(m, w, tr, par, capacity)
        at = peak_memory(m, w.model_copy(update={"seq_len": row["measured"]}), tr, par).peak_bytes
        variant = None
        if row.get("variant"):
            vw, vtr, vpar = configs({**row["training"], **row["variant"]})
            variant = longest_fitting(m, vw, vtr, vpar, capacity)
        return Result(row, m, w, tr, row["measured"], s, at, variant)
    if kind == "fits":
        return Result(row, m, w, tr, row["capacity_gb"], peak_memory(m, w, tr, par).peak_bytes)
    st = training_memory(m, w, tr, par)[0]
    return Result(row, m, w, tr, row["measured_gb"], st.model_states / GB)


def setup_text(r: Result) -> str:
    tr, w = r.training, r.workload
    name = r.row.get("preset") or r.row.get("model")
    if tr.adapters:
        method = (f"{tr.finetune.value} r={tr.lora_rank} {','.join(t.value for t in tr.lora_targets)} "
                  f"({trainable_params(r.model, tr).total:,} trainable)")
    else:
        method = f"full fine-tuning, {tr.precision.value}, {tr.grad_bytes}-byte gradients"
    seq = f"B={w.batch_size}" + ("" if r.row["kind"] == "max_context" else f" S={w.seq_len}")
    extras = [tr.optimizer.value, f"recompute {tr.recompute.value}", "flash" if tr.flash else "eager attention",
              f"{tr.loss_kernel.value} CE"]
    return f"{name}; {method}; {seq}; {', '.join(extras)}"


EXPLAIN = {
    "unsloth-hf": (
        "Per token the measurements rise 2.47 MB (12,264 → 28,454 tokens for 40 → 80 GB), tcalc "
        "1.81 MB: the benchmark ran transformers 4.4x, whose causal-LM loss made a contiguous fp32 "
        "copy of the shifted logits (4·V bytes per token, 0.51 MB at V = 128,256) and its gradient, "
        "where tcalc follows transformers 5.23 (labels padded, no copy). The fixed part (measured "
        "≈ 9.7 GB at zero tokens, tcalc ≈ 6.7 GB): PEFT's prepare_model_for_kbit_training, the usual "
        "QLoRA preparation, casts the unquantized embedding and LM head to fp32 (+2.1 GB; the variant "
        "`fp32_unquantized` counts it), and the caching allocator's fragmentation, which tcalc reports "
        "apart (5 % reserve) and the fit check does not count; with few tokens (12 GB) this fixed gap "
        "dominates."
    ),
    "unsloth-hf-llama3.3-70b": (
        "One point only: the measured 6,916 tokens in 80 GB imply about 5.8 MB per token above the "
        "≈ 40 GB of NF4 weights, tcalc's peak grows 3.1 MB per token (80 layers' checkpointed inputs "
        "1.3 MB, the loss 1.3 MB, one layer's recomputation 0.3 MB). The transformers-4.4x loss copy "
        "(0.5-1 MB per token) explains part; the rest is not accounted for."
    ),
    "qlora-paper-65b-full": (
        "The claim counts 12 bytes per parameter (16-bit weights and gradients, 32-bit Adam moments); "
        "tcalc's mixed precision adds the fp32 master copy (16 bytes per parameter with 2-byte gradients)."
    ),
    "qlora-paper": (
        "tcalc's peak (backward of the first block) is over by 3-8 %, made of NF4 weights, fp32 "
        "adapters and gradients, 32-bit AdamW states and the checkpointed activations of 4 × 528 "
        "tokens. Two mechanisms of the paper's setup that tcalc does not model cover the gap: "
        "qlora.py casts the LoRA modules to bf16 (2 bytes less per trainable parameter for the "
        "weights and again for the gradients: 3.2 GB at 65B, 2.0 GB at 33B), and the paged "
        "optimizer's 6.4 GB (3.9 GB) of states can be evicted to host memory under pressure, which "
        "tcalc counts as resident. LoRA dropout (0.05) would add a dropped input copy per module "
        "during one layer's recomputation (not modeled)."
    ),
}


def explain(row_id: str) -> str:
    for key in sorted(EXPLAIN, key=len, reverse=True):
        if row_id.startswith(key):
            return EXPLAIN[key]
    return ""


def measured_text(r: Result) -> str:
    kind = r.row["kind"]
    if kind == "max_context":
        return f"{int(r.measured):,} tokens fit in {r.row['capacity_gb']} GB"
    if kind == "fits":
        return f"fits in {r.row['capacity_gb']} GB"
    return f"> {r.measured:g} GB"


def tcalc_text(r: Result) -> str:
    kind = r.row["kind"]
    if kind == "max_context":
        text = f"{int(r.tcalc):,} tokens (peak at the measured S: {r.peak_at_measured / GB:.1f} GB)"
        if r.variant is not None:
            settings = ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in r.row["variant"].items())
            text += (f"; with {settings}: {int(r.variant):,} tokens "
                     f"({r.variant / r.measured - 1:+.1%})")
        return text
    if kind == "fits":
        return f"peak {r.tcalc / GB:.1f} GB: {'fits' if r.agrees else 'does not fit'}"
    return f"{r.tcalc:,.0f} GB of model states"


def error_text(r: Result) -> str:
    if r.row["kind"] == "fits":
        return "agrees" if r.agrees else "disagrees"
    if r.row["kind"] == "lower_bound":
        return f"{r.error:+.0%} ({'above the bound: agrees' if r.agrees else 'below the bound'})"
    return f"{r.error:+.1%}"


def docs_section(results: list[Result], data: dict[str, Any]) -> str:
    ctx = [r for r in results if r.row["kind"] == "max_context"]
    lines = [
        BEGIN,
        "<!-- Generated by tools/validation/published_finetune.py; do not edit by hand. Regenerate with:",
        f"     {REGENERATE} -->",
        "",
        "## Fine-tuning memory: tcalc vs published figures",
        "",
        "Generated by `tools/validation/published_finetune.py` from `tools/validation/published_finetune.yaml` "
        f"(no network access). {len(results)} published figures: {len(ctx)} longest trainable contexts "
        "(QLoRA, Hugging Face + FlashAttention-2), two single-GPU claims and one memory bound of the QLoRA "
        "paper. Nothing is fitted. The trainable-parameter counts equal PEFT's (`tools/crosscheck/peft_params.py`).",
        "",
        "Sources: " + " ".join(str(data["sources"][k]).strip() for k in ("unsloth", "qlora")),
        "",
        "Assumed where the Unsloth benchmark does not say: " + str(data["sources"]["unsloth_assumed"]).strip(),
        "",
        "| row | setup | measured | tcalc | error | terms that explain the difference |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(f"| {r.row['id']} | {setup_text(r)} | {measured_text(r)} | {tcalc_text(r)} | {error_text(r)} | "
                     f"{explain(r.row['id'])} |")
    lines += [
        "",
        "Reading: the longest-context rows compare tcalc's longest S that fits with the measured one "
        "(error = tcalc/measured − 1); tcalc over-predicts the context (it under-counts memory) on these "
        "transformers-4.4x runs, by a margin that shrinks as the context grows (+42 % at 80 GB; +38 % "
        "counting PEFT's fp32 upcast of the unquantized parameters). The "
        "QLoRA paper's single-GPU claims come out 3-8 % over the capacity with PEFT's fp32 adapters "
        "counted resident (see the row's terms); its full-fine-tuning bound agrees.",
        "",
        END,
    ]
    return "\n".join(lines) + "\n"


def write_docs(section: str) -> None:
    from tools.docsection import write_section

    write_section(DOCS, BEGIN, END, section)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    data, rows = load()
    results = [evaluate(row, data) for row in rows]
    for r in results:
        print(f"{r.row['id']:<34} {measured_text(r):<32} {tcalc_text(r):<52} {error_text(r)}")
        if args.verbose:
            print(f"    {setup_text(r)}")
    if args.write_docs:
        write_docs(docs_section(results, data))
        print(f"wrote {DOCS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
