"""Cross-check tcalc's adapter activations against what PyTorch saves for backward under PEFT LoRA.

Builds the small Hugging Face models of tools/crosscheck/activations.py (Llama with GQA and
SwiGLU; GPT-2 with exact gelu), in bf16, wraps them with `peft.get_peft_model(LoraConfig(r=8,
target_modules=...))`, calls `enable_input_require_grads()` (what `prepare_model_for_kbit_training`
and gradient checkpointing do: the embedding output requires grad, so the first block keeps what
the others keep) and runs one training forward with labels inside
`torch.autograd.graph.saved_tensors_hooks` (activations.measure: every saved storage once,
parameters excluded). Two precisions, as tcalc names them:

  mixed  fp32 adapters (PEFT's autocast_adapter_dtype=True over a bf16 base) under
         torch.autocast(bfloat16): each adapted module keeps its own bf16 copy of its input
  bf16   adapters in bf16 (autocast_adapter_dtype=False), no autocast: inputs shared

and compares with `training_memory(...)[0].activations` of the torch-eager profile with
Training(finetune="lora", lora_rank=8, lora_targets=..., precision=...). Targets: all-linear, the
attention's q,v, and the MLP's matrices, LoRA and DoRA. Only the saved tensors still alive after
the forward are counted (weak references): PEFT's DoRA builds its weight norm from
lora_B(lora_A(eye(d_in))) each forward, a detached graph whose saved tensors are freed when the
module returns (a temporary of d_in² elements per module, which tcalc does not add).

Gemma 4 (`gemma4_text`, estimators/training/gemma4.py): two tiny configs (kv-shared layers with k = v and
per-layer inputs; the parallel MoE with eager experts), the same targets and the output projection,
against the same training_memory (torch-eager). DoRA keeps a few d_out-wide fp32 vectors per module
(the magnitude's norm scale) that tcalc does not count: at these toy widths that is up to 2 % of the
whole (0.1 % at D = 5,376); Gemma 4's DoRA rows are gated at ±2.5 %.

Needs torch, transformers and peft. Exits 1 when a row misses by more than 1 % (Gemma 4's DoRA: 2.5 %).

    PYTHONPATH=. python tools/crosscheck/lora_activations.py [-v]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
import weakref
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import peft  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402

from activations import GPT2_SHAPES, HF_GPT2_EXACT_GELU, HF_LLAMA, LLAMA_SHAPES, build, gpt2_config, llama_config  # noqa: E402
from transformer_calc.model.config import ModelConfig, Training, Workload  # noqa: E402
from transformer_calc.sources.hf import from_hf_config  # noqa: E402
from transformer_calc.estimators.training.memory import training_memory  # noqa: E402

TOLERANCE = 0.01
RANK = 8
FAMILIES = (
    ("llama", llama_config, LLAMA_SHAPES, HF_LLAMA,
     {"all-linear": "all-linear", "q,v": ["q_proj", "v_proj"], "gate,up,down": ["gate_proj", "up_proj", "down_proj"]}),
    ("gpt2 (gelu)", gpt2_config("gelu"), GPT2_SHAPES, HF_GPT2_EXACT_GELU,
     {"all-linear": "all-linear", "q,v": ["c_attn"], "up,down": ["c_fc", "mlp.c_proj"]}),
)  # fmt: skip


def measure_alive(model: torch.nn.Module, ids: torch.Tensor) -> int:
    """Bytes of the saved-for-backward storages still alive after one training forward (each
    storage once, parameters excluded)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    refs: list[weakref.ref] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        refs.append(weakref.ref(t))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=ids, labels=ids, use_cache=False)
    storages: dict[int, int] = {}
    for ref in refs:
        t = ref()
        if t is not None:
            storage = t.untyped_storage()
            if storage.data_ptr() not in params:
                storages[storage.data_ptr()] = storage.nbytes()
    del out
    return sum(storages.values())


def measured(cfg: dict, ids: torch.Tensor, targets: object, precision: str, dora: bool) -> int:
    model = build(cfg, "eager").to(torch.bfloat16)
    pm = get_peft_model(model, LoraConfig(r=RANK, target_modules=targets, use_dora=dora),
                        autocast_adapter_dtype=precision == "mixed")
    pm.train()
    pm.enable_input_require_grads()
    torch.manual_seed(0)
    if precision == "mixed":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return measure_alive(pm, ids)
    return measure_alive(pm, ids)


_G4 = {"model_type": "gemma4_text", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 4,
       "num_key_value_heads": 2, "intermediate_size": 40, "head_dim": 8, "global_head_dim": 16,
       "hidden_size_per_layer_input": 4, "vocab_size_per_layer_input": 100, "sliding_window": 8,
       "attention_k_eq_v": True, "num_global_key_value_heads": 1}
GEMMA4_CASES = (
    ("gemma4 kv-shared", {**_G4, "num_hidden_layers": 4, "num_key_value_heads": 4, "num_kv_shared_layers": 2,
                          "layer_types": ["sliding_attention", "full_attention"] * 2, "use_double_wide_mlp": True},
     20, 2),
    ("gemma4 MoE", {**_G4, "num_hidden_layers": 2, "intermediate_size": 24, "hidden_size_per_layer_input": 0,
                    "layer_types": ["sliding_attention", "full_attention"], "enable_moe_block": True,
                    "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 12}, 24, 2),
)  # fmt: skip
GEMMA4_TARGETS = {"all-linear": "all-linear", "q,v": ["q_proj", "v_proj"], "o": ["o_proj"],
                  "gate,up,down": ["gate_proj", "up_proj", "down_proj"]}
GEMMA4_DORA_TOLERANCE = 0.025


def measured_gemma4(cfg: dict, ids: torch.Tensor, targets: object, precision: str, dora: bool) -> int:
    from transformers import AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    config = CONFIG_MAPPING[cfg["model_type"]].from_dict(dict(cfg))
    kw = {"experts_implementation": "eager"} if cfg.get("enable_moe_block") else {}
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", **kw).to(torch.bfloat16)
    pm = get_peft_model(model, LoraConfig(r=RANK, target_modules=targets, use_dora=dora),
                        autocast_adapter_dtype=precision == "mixed")
    pm.train()
    pm.enable_input_require_grads()
    if precision == "mixed":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return measure_alive(pm, ids)
    return measure_alive(pm, ids)


def gemma4_rows() -> list[tuple[str, int, int, float]]:
    """(case, measured, predicted, tolerance) for the Gemma 4 configs."""
    out = []
    for label, cfg, S, B in GEMMA4_CASES:
        m = ModelConfig.model_validate(from_hf_config(cfg))
        ids = torch.randint(0, cfg["vocab_size"], (B, S), generator=torch.Generator().manual_seed(0))
        for targets_label, targets in GEMMA4_TARGETS.items():
            for precision, dora in (("mixed", False), ("mixed", True), ("bf16", False)):
                got = measured_gemma4(cfg, ids, targets, precision, dora)
                tr = Training(precision=precision, activations="torch-eager", finetune="dora" if dora else "lora",
                              lora_rank=RANK, lora_targets=targets_label)
                pred = training_memory(m, Workload(seq_len=S, batch_size=B), tr)[0].activations
                out.append((f"{label} {targets_label} {precision}{' dora' if dora else ''}", got, pred,
                            GEMMA4_DORA_TOLERANCE if dora else TOLERANCE))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore")
    start = time.perf_counter()
    rows, failures = 0, []
    print(f"{'case':<58} {'measured':>11} {'tcalc':>11} {'error':>8}")
    for family, config, shapes, code, target_sets in FAMILIES:
        for shape in shapes:
            cfg = config(shape, 0.0)
            m = ModelConfig.model_validate(from_hf_config(cfg))
            S, B = shape[-2], shape[-1]
            ids = torch.randint(0, cfg["vocab_size"], (B, S), generator=torch.Generator().manual_seed(0))
            w = Workload(seq_len=S, batch_size=B)
            for label, targets in target_sets.items():
                for precision in ("mixed", "bf16"):
                    for dora in (False, True):
                        if dora and precision == "bf16":
                            continue
                        got = measured(cfg, ids, targets, precision, dora)
                        tr = Training(precision=precision, activations="torch-eager", finetune="dora" if dora else "lora",
                                      lora_rank=RANK, lora_targets=label)
                        pred = training_memory(m, w, tr, eager=code)[0].activations
                        err = pred / got - 1
                        name = f"{family} {shape} {label} {precision}{' dora' if dora else ''}"
                        rows += 1
                        if abs(err) > TOLERANCE:
                            failures.append(name)
                        if args.verbose or abs(err) > TOLERANCE:
                            print(f"{name:<58} {got:>11,} {pred:>11,} {err:>+8.2%}")
    for name, got, pred, tol in gemma4_rows():
        err = pred / got - 1
        rows += 1
        if abs(err) > tol:
            failures.append(name)
        if args.verbose or abs(err) > tol:
            print(f"{name:<58} {got:>11,} {pred:>11,} {err:>+8.2%}")
    print(f"{rows} cases (LoRA and DoRA), {len(failures)} beyond ±{TOLERANCE:.0%} (Gemma 4's DoRA: "
          f"±{GEMMA4_DORA_TOLERANCE:.1%}) ({time.perf_counter() - start:.1f} s, "
          f"peft {peft.__version__}, transformers {transformers.__version__}, torch {torch.__version__})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
