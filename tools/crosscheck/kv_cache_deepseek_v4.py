"""Cross-check DeepSeek-V4's decode state (`estimators.deepseek_v4.cache_elements`) against the tensors
transformers' own cache holds.

For tiny deepseek_v4 configs (sliding-only, CSA and HCA layers; windows and compression rates small enough
that prompts cross them), this builds the model on the CPU (eager attention and experts) in fp32 and bf16,
runs a prompt of S tokens with `use_cache=True`, then decode steps one token at a time, and sums the bytes
of every distinct tensor in the returned cache: each layer's keys and values (a CSA/HCA layer's values are
its keys, one tensor: counted once), and the compressors' and indexers' `compressed_kv`, `buffer_kv`,
`buffer_gate`, `overlap_kv`, `overlap_gate` (modeling_deepseek_v4.py DeepseekV4HCACache,
DeepseekV4CSACache). It must equal B x `cache_elements(m, S + step).total` x the dtype's bytes, after the
prompt and after every decode step.

Needs torch and transformers (not part of the core test suite). Exits 1 on any difference.

    PYTHONPATH=. python tools/crosscheck/kv_cache_deepseek_v4.py [-v]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402

from transformer_calc.estimators.deepseek_v4 import cache_elements  # noqa: E402
from transformer_calc.model.config import ModelConfig  # noqa: E402
from transformer_calc.sources.hf import from_hf_config  # noqa: E402

Cfg = dict[str, Any]
_BASE: Cfg = {"model_type": "deepseek_v4", "vocab_size": 97, "hidden_size": 32, "num_attention_heads": 4, "head_dim": 8,
              "q_lora_rank": 16, "o_groups": 2, "o_lora_rank": 8, "n_routed_experts": 4, "num_experts_per_tok": 2,
              "moe_intermediate_size": 12, "index_n_heads": 2, "index_head_dim": 4, "index_topk": 3, "hc_mult": 2}
_KINDS = ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"]
CASES: list[tuple[str, Cfg]] = [
    ("sliding, CSA m=4, HCA m'=8, W=6", {**_BASE, "num_hidden_layers": 4, "sliding_window": 6,
                                        "layer_types": _KINDS + ["compressed_sparse_attention"],
                                        "compress_rates": {"compressed_sparse_attention": 4,
                                                           "heavily_compressed_attention": 8}}),
    ("defaults m=4, m'=128 (legacy compress_ratios), W=5", {**_BASE, "num_hidden_layers": 3, "sliding_window": 5,
                                                            "compress_ratios": [128, 4, 0, 0]}),
    ("CSA m=3 only, W=9", {**_BASE, "num_hidden_layers": 2, "sliding_window": 9, "compress_rate_csa": 3,
                           "layer_types": ["compressed_sparse_attention"] * 2}),
]  # fmt: skip
PROMPTS = (1, 5, 13)  # below and past the windows and rates (decode steps cross them too)
DECODE = 6
BF16_POINTS = ((1, 13), 3)
BATCH = 2
STATES = ("compressed_kv", "buffer_kv", "buffer_gate", "overlap_kv", "overlap_gate")


def cache_bytes(past: Any) -> int:
    """Bytes of every distinct tensor the cache object holds (a tensor held twice counted once)."""
    seen: dict[int, int] = {}
    for layer in past.layers:
        tensors = [getattr(layer, "keys", None), getattr(layer, "values", None)]
        for name in STATES:
            states = getattr(layer, name, None)
            tensors += list(states.values()) if isinstance(states, dict) else []
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.numel():
                seen[id(t)] = t.numel() * t.element_size()
    return sum(seen.values())


def run(label: str, cfg: Cfg, verbose: bool, dtype: str) -> tuple[list[str], int]:
    config = CONFIG_MAPPING["deepseek_v4"].from_dict(dict(cfg))
    torch_dtype, size = {"fp32": (torch.float32, 4), "bf16": (torch.bfloat16, 2)}[dtype]
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", experts_implementation="eager",
                                             dtype=torch_dtype).eval()
    m = ModelConfig.model_validate(from_hf_config(cfg))
    failures, points = [], 0
    gen = torch.Generator().manual_seed(0)
    prompts, decode = (PROMPTS, DECODE) if dtype == "fp32" else BF16_POINTS
    for S in prompts:
        ids = torch.randint(0, cfg["vocab_size"], (BATCH, S), generator=gen)
        with torch.no_grad():
            past = model(input_ids=ids, use_cache=True).past_key_values
            for step in range(decode + 1):
                if step:
                    nxt = torch.randint(0, cfg["vocab_size"], (BATCH, 1), generator=gen)
                    past = model(input_ids=nxt, past_key_values=past, use_cache=True).past_key_values
                measured = cache_bytes(past)
                predicted = BATCH * cache_elements(m, S + step).total * size
                points += 1
                if predicted != measured:
                    failures.append(f"{label} ({dtype}): S={S} step={step}: transformers {measured:,} tcalc {predicted:,}")
                elif verbose:
                    print(f"ok {label} ({dtype}): S={S} step={step}: {measured:,} bytes")
    return failures, points


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    start = time.perf_counter()
    failures, total = [], 0
    for label, cfg in CASES:
        for dtype in ("fp32", "bf16"):
            f, n = run(label, cfg, args.verbose, dtype)
            failures += f
            total += n
            print(f"| {label} ({dtype}) | {n} points | {len(f)} differences |")
    print(f"{total} points, {len(failures)} differences, {time.perf_counter() - start:.1f} s "
          f"(transformers {transformers.__version__}, torch {torch.__version__})")
    for line in failures:
        print("MISMATCH", line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
