"""Cross-check the adapters' activations on hybrid mixer layers (finetune.mixer_activation_delta,
torch-eager profile) against what PyTorch saves under PEFT LoRA.

For the tiny hybrid configs of tools/crosscheck/activations_mixers.py (every mixer kind) this builds
the model in bf16 (transformers' torch fallbacks, as activations_mixers.py does), wraps it with
`peft.get_peft_model(LoraConfig(r=8, target_modules=...))`, calls `enable_input_require_grads()`
and runs one training forward with labels inside `torch.autograd.graph.saved_tensors_hooks`,
recording per mixer layer every storage first saved while the mixer module runs (its adapters
included), each once, parameters excluded, and whether the mixer's input (the block norm's output)
was saved there. Two precisions, as tcalc names them: `bf16` (adapters in bf16, no autocast: one
input shared by the base layer and lora_A) and `mixed` (fp32 adapters under torch.autocast: each
adapted module keeps its own bf16 input copy and its A and B casts). Targets: `mixer` (every Linear
of the mixers, as peft_params.HYBRID_NAMES names them) and `q,k,v,o` (the mixers frozen).

Compared, per mixer layer: the change from full training of the same model, measured the same way
(the layer's storages, plus its input's when saved inside the mixer), against
`finetune.mixer_activation_delta(...)` (torch-eager); taking the change makes what the torch-eager
profile itself misses under autocast cancel. Exits 1 when a layer's change misses by more than 1 % of
its full-training bytes. The fused profile's `frozen_parameter_bytes` (the torch code around the
kernels) is not measured here: fla, mamba_ssm and causal-conv1d do not run on the CPU.

Needs torch, transformers and peft.

    PYTHONPATH=. python tools/crosscheck/lora_activations_mixers.py [-v]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import peft  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402

from activations_mixers import CASES, build, saved_per_mixer  # noqa: E402
from peft_params import PEFT_REFUSES_OUT_PROJ, hybrid_module_names  # noqa: E402
from transformer_calc.estimators.training.finetune import mixer_activation_delta  # noqa: E402
from transformer_calc.model.config import ModelConfig, Parallelism, Training  # noqa: E402
from transformer_calc.sources.hf import from_hf_config  # noqa: E402

TOLERANCE = 0.01  # of the layer's full-training bytes (every layer exact on 2026-11-24)
RANK = 8
# dense-MLP cases (eager MoE experts keep per-expert copies, which only matter outside the mixers, but
# PEFT's conversion rewrites the targets of some MoE families): one per mixer kind and then some
LABELS = ("qwen3_next", "qwen3_5_text", "bamba", "nemotron_h", "falcon_h1", "jamba", "lfm2", "minimax S < C", "kimi_linear",
          "olmo_hybrid")


def measure(model: torch.nn.Module, ids: torch.Tensor, autocast: bool) -> list[tuple[str, Any, int, bool]]:
    """(module name, kind, bytes first saved inside it, whether its input was saved there) per mixer layer."""
    per, _ = saved_per_mixer(model, ids, autocast)
    return [(name, kind, got, saved) for name, (kind, got, saved) in per.items()]

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    start = time.perf_counter()
    rows, failures = 0, []
    for label, cfg, S, B in CASES:
        if label not in LABELS:
            continue
        m = ModelConfig.model_validate(from_hf_config(cfg))
        ids = torch.randint(0, m.vocab_size, (B, S), generator=torch.Generator().manual_seed(0))
        probe = build(cfg, torch.bfloat16)
        text_type = probe.config.model_type
        target_sets = {"q,k,v,o": ["q", "k", "v", "o"]}
        if cfg["model_type"] not in PEFT_REFUSES_OUT_PROJ:
            target_sets["mixer"] = ["mixer"]
        for precision in ("bf16", "mixed"):
            p = 2
            # full training of the same model under the same precision: the reference the delta is taken from
            full_layers = measure(build(cfg, torch.bfloat16), ids, autocast=precision == "mixed")
            full = {name: got + (p * B * S * m.d_model if saved else 0) for name, _, got, saved in full_layers}
            for tname, targets in target_sets.items():
                names = hybrid_module_names(probe, text_type, m, targets)
                if not names:
                    continue
                model = build(cfg, torch.bfloat16)
                pm = get_peft_model(model, LoraConfig(r=RANK, target_modules=names),
                                    autocast_adapter_dtype=precision == "mixed")
                pm.train()
                pm.enable_input_require_grads()
                tr = Training(precision=precision, activations="torch-eager", finetune="lora", lora_rank=RANK,
                              lora_targets=tname)
                for name, kind, got, saved in measure(pm, ids, autocast=precision == "mixed"):
                    base = full[name.removeprefix("base_model.model.")]
                    got_delta = got + (p * B * S * m.d_model if saved else 0) - base
                    want_delta = mixer_activation_delta(m, kind, B, S, S, tr, Parallelism(), fused=False)
                    err = (want_delta - got_delta) / base  # as a share of the layer's full-training bytes
                    rows += 1
                    row = (f"{label:<16} {tname:<8} {precision:<5} {name.removeprefix('base_model.model.'):<26} "
                           f"{base:>10,} {got_delta:>+10,} {want_delta:>+10,} {err:>+8.2%}")
                    if abs(err) > TOLERANCE:
                        failures.append(row)
                    if args.verbose or abs(err) > TOLERANCE:
                        print(("MISS " if abs(err) > TOLERANCE else "") + row)
    print(f"{rows} mixer layers under LoRA, {len(failures)} beyond ±{TOLERANCE:.0%} ({time.perf_counter() - start:.1f} s, "
          f"peft {peft.__version__}, transformers {transformers.__version__}, torch {torch.__version__})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
