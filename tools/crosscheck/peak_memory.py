"""Cross-check tcalc's peak training memory against PyTorch's own accounting (MemTracker).

For small Hugging Face models (GPT-2 with gelu_new, Llama with GQA and SwiGLU; shapes where the
vocabulary, the sequence or the weights dominate), this runs two real training steps — forward
with labels, `loss.backward()`, `optimizer.step()`, `zero_grad(set_to_none=True)`, the loss
dropped before the backward as HF's Trainer does — under `FakeTensorMode` on the CPU (no memory is
allocated: fake tensors carry shapes and dtypes) inside
`torch.distributed._tools.mem_tracker.MemTracker`, and reads the peak of the second (steady-state)
step. Variants: fp32 and pure bf16 (`model.to(torch.bfloat16)`, AdamW states in bf16), eager and
SDPA attention, AdamW foreach (torch's default) and fused, with and without activation
checkpointing (`gradient_checkpointing_enable(use_reentrant=False)`: tcalc's `--recompute full`).

Predicted: `peak_memory(m, Workload(S, B), Training(precision, activations="torch-eager",
flash=<sdpa>, recompute=<checkpointing>, fused_optimizer=<fused>))` (framework pytorch) for the
ModelConfig `from_hf_config` makes of the same config. Dropout is off (CPU dropout keeps other
masks than CUDA; tools/crosscheck/activations.py covers dropout). Needs torch and transformers.
Exits 1 if any case misses by more than TOLERANCE.

    PYTHONPATH=. python tools/crosscheck/peak_memory.py [--write-docs] [-v]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import transformers  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.distributed._tools.mem_tracker import MemTracker  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402

from transformer_calc.model.config import ModelConfig, Training, Workload  # noqa: E402
from transformer_calc.sources.hf import from_hf_config  # noqa: E402
from transformer_calc.estimators.training.timeline import peak_memory  # noqa: E402

TOLERANCE = 0.05  # the aim: within ±5 % of the tracked peak
BEGIN, END = "<!-- peak_memory:begin -->", "<!-- peak_memory:end -->"
REGENERATE = "PYTHONPATH=. python tools/crosscheck/peak_memory.py --write-docs"
Cfg = dict[str, Any]

# (label, config, S, B): a vocabulary-heavy, a sequence-heavy and a weight-heavy shape per family
SHAPES: list[tuple[str, Cfg, int, int]] = [
    ("llama V=32000 (loss-bound)", {"model_type": "llama", "vocab_size": 32000, "hidden_size": 256,
     "intermediate_size": 688, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
     "max_position_embeddings": 512, "tie_word_embeddings": False}, 512, 2),
    ("llama S=1024 (attention-bound)", {"model_type": "llama", "vocab_size": 1000, "hidden_size": 256,
     "intermediate_size": 640, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
     "max_position_embeddings": 1024}, 1024, 2),
    ("llama D=1024 (weight-bound)", {"model_type": "llama", "vocab_size": 1000, "hidden_size": 1024,
     "intermediate_size": 2560, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8,
     "max_position_embeddings": 128}, 128, 2),
    ("gpt2 V=50257 (loss-bound)", {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 256, "n_layer": 4,
     "n_head": 8, "n_positions": 512, "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0}, 512, 2),
    ("gpt2 S=1024 (attention-bound)", {"model_type": "gpt2", "vocab_size": 1000, "n_embd": 256, "n_layer": 4,
     "n_head": 8, "n_positions": 1024, "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0}, 1024, 2),
    ("gpt2 D=1024 (weight-bound)", {"model_type": "gpt2", "vocab_size": 1000, "n_embd": 1024, "n_layer": 4,
     "n_head": 8, "n_positions": 128, "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0}, 128, 2),
]  # fmt: skip
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
ATTENTION = ("eager",) if "--eager-only" in sys.argv else ("eager", "sdpa")
OPTIMIZERS = ("foreach", "fused")
CHECKPOINTING = (False, True)


def tracked_peak(cfg: Cfg, S: int, B: int, dtype: str, attn: str, opt: str, ckpt: bool) -> tuple[int, dict[str, int]]:
    """MemTracker's peak over the second of two training steps, and its split by category."""
    config = CONFIG_MAPPING[cfg["model_type"]].from_dict(dict(cfg))
    with FakeTensorMode():
        model = AutoModelForCausalLM.from_config(config, attn_implementation=attn, dtype=DTYPES[dtype]).train()
        if ckpt:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        fused = opt == "fused"
        optimizer = torch.optim.AdamW(model.parameters(), fused=fused, foreach=None if fused else True)
        ids = torch.randint(0, cfg["vocab_size"], (B, S))
        mt = MemTracker()
        mt.track_external(model, optimizer)
        with mt:
            for step in range(2):
                loss = model(input_ids=ids, labels=ids, use_cache=False).loss
                loss.backward()
                del loss
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                if step == 0:
                    mt.reset_mod_stats()
        snap = mt.get_tracker_snapshot("peak")
    split = {str(k).split(".")[-1]: v for dev in snap.values() for k, v in dev.items() if v}
    return split.pop("Total"), split


def predicted(cfg: Cfg, S: int, B: int, dtype: str, attn: str, opt: str, ckpt: bool) -> tuple[int, str]:
    m = ModelConfig.model_validate(from_hf_config(cfg))
    tr = Training(
        precision="fp32" if dtype == "fp32" else "bf16",
        activations="torch-eager",
        flash=attn == "sdpa",
        recompute="full" if ckpt else "none",
        fused_optimizer=opt == "fused",
    )
    tl = peak_memory(m, Workload(seq_len=S, batch_size=B), tr)
    return tl.peak_bytes, tl.peak.name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-docs", action="store_true", help="update the peak-memory section of docs/validation.md")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--eager-only", action="store_true", help="skip the SDPA variants")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    start = time.perf_counter()
    rows, failures, errors, sdpa_errors = [], [], [], []
    for (label, cfg, S, B), dtype, attn, opt, ckpt in itertools.product(SHAPES, DTYPES, ATTENTION, OPTIMIZERS, CHECKPOINTING):
        measured, split = tracked_peak(cfg, S, B, dtype, attn, opt, ckpt)
        pred, phase = predicted(cfg, S, B, dtype, attn, opt, ckpt)
        err = pred / measured - 1
        gated = attn == "eager"
        (errors if gated else sdpa_errors).append(err)
        variant = f"{dtype} {attn} {opt}{' ckpt' if ckpt else ''}"
        row = f"| {label} | {variant} | {measured:,} | {pred:,} | {err:+.2%} | {phase} | {'yes' if gated else 'no'} |"
        rows.append(row)
        line = f"{label:<32} {variant:<24} measured {measured:>13,} tcalc {pred:>13,} {err:+7.2%}  {phase}"
        if gated and abs(err) > TOLERANCE:
            failures.append(f"MISS {line}  {split}")
        if args.verbose:
            print(line, split if args.verbose else "")
    seconds = time.perf_counter() - start
    print(f"eager attention (gated): {summary(errors)}, {len(failures)} beyond ±{TOLERANCE:.0%}")
    if sdpa_errors:
        print(f"SDPA on the CPU (not gated): {summary(sdpa_errors)}")
    print(f"{len(rows)} cases, {seconds:.1f} s (torch {torch.__version__}, transformers {transformers.__version__})")
    for line in failures:
        print(line)
    if args.write_docs:
        write_docs(rows, errors, sdpa_errors)
    return 1 if failures else 0


def summary(errors: list[float]) -> str:
    worst = max(errors, key=abs)
    median = sorted(map(abs, errors))[len(errors) // 2]
    return f"{len(errors)} cases, worst {worst:+.2%}, median |error| {median:.2%}"


def write_docs(rows: list[str], errors: list[float], sdpa_errors: list[float]) -> None:
    section = "\n".join([
        BEGIN,
        "<!-- Generated by tools/crosscheck/peak_memory.py; do not edit by hand. Regenerate with:",
        f"     {REGENERATE} -->",
        "",
        "## Peak training memory: tcalc vs PyTorch's MemTracker",
        "",
        f"Generated by `tools/crosscheck/peak_memory.py` (torch {torch.__version__}, transformers "
        f"{transformers.__version__}); CI runs the gated cases (`--eager-only`). Eager attention (gated at ±{TOLERANCE:.0%}): "
        f"{summary(errors)}."
        + (f" SDPA on the CPU (reported, not gated): {summary(sdpa_errors)}." if sdpa_errors else ""),
        "",
        "**Measured:** `torch.distributed._tools.mem_tracker.MemTracker`'s peak over the second of two",
        "training steps (forward with labels, backward, AdamW step, `zero_grad(set_to_none=True)`; the",
        "loss tensor dropped before the backward, as HF's Trainer does) of a real Hugging Face model under",
        "`FakeTensorMode` on the CPU: shapes and dtypes are real, nothing is allocated. Dropout off.",
        "Checkpointing is `gradient_checkpointing_enable(use_reentrant=False)`. No GPU is involved:",
        "CUDA-only effects (the CUDA context, the caching allocator's reserve, cuBLAS workspaces) are",
        "not in these numbers; tcalc reports them apart (`cuda_context_bytes`, `allocator_reserve_bytes`).",
        "",
        "**Predicted:** `peak_memory(...)` (`tcalc memory --activations torch-eager --framework pytorch`,",
        "`--flash` for SDPA, `--recompute full` for checkpointing, `--fused-optimizer` for fused AdamW)",
        "and the phase it names.",
        "",
        "**Why SDPA is not gated:** under `FakeTensorMode` on the CPU, `attn_implementation=\"sdpa\"`",
        "dispatches to PyTorch's CPU flash-attention kernel, which keeps and allocates other buffers",
        "than CUDA's FlashAttention that tcalc's `--flash` models (contiguous copies of strided q/k/v,",
        "K/V repeated to every query head for GQA by HF's sdpa path, fp32 accumulators in its backward);",
        "at S = 1024 it holds 7-42 % more than tcalc predicts, most with checkpointing. The CUDA kernel",
        "needs a GPU run (`torch.cuda.max_memory_allocated`); no GPU was lent to this work.",
        "",
        "| model | variant | measured peak (B) | tcalc peak (B) | error | peak phase | gated |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        END,
    ])
    from tools.docsection import write_section

    path = REPO / "docs" / "validation.md"
    write_section(path, BEGIN, END, section)
    print(f"wrote {path.relative_to(REPO)}")


if __name__ == "__main__":
    sys.exit(main())
