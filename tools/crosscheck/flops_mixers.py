"""Cross-check the FLOPs of the hybrid models (estimators/mixers/) against torch's FlopCounterMode.

For the hybrid model types (hf_cases_hybrid.HYBRID_TYPES: Gated DeltaNet layers beside attention)
this takes their config generators and edge cases, builds
`AutoModelForCausalLM.from_config(config, attn_implementation="eager")` (MoE experts eager) on the
CPU in fp32 and runs one forward (no cache, no gradient) of B sequences of S random tokens inside
`FlopCounterMode`. Without the `fla` / `causal-conv1d` kernels transformers runs its torch
fallbacks (`torch_chunk_gated_delta_rule`, `causal_conv1d_fn`), whose every matmul and conv the
counter sees. It requires exact equality of

    counter.get_total_flops()
    count_flops(m, Workload(S, B)).forward - sum over mixer layers of MixerFlops.hidden

for the config as written and for transformers' full dict: tcalc's forward includes the two
triangular solves per chunk of the chunked delta rule (`torch.linalg.solve_triangular`), which the
counter has no formula for; their count C·(C-1)·(d_k + d_v) per chunk and value head is derived in
estimators/mixers/deltanet.py. S is drawn up to 150, so prompts below, at and across the 64-token
chunk (the padding of the last chunk is computed, and counted) are all checked.

Backward: tcalc's convention is 2 x forward for every matmul and conv. FlopCounterMode's backward of
these layers is not that, for two reasons this script reports but does not compare: it counts
`convolution_backward` of a depthwise (grouped) conv as a dense one (groups ignored: C_in x more),
and `solve_triangular`'s backward adds the matmul -grad_X·X^T for the system's gradient.

Needs torch and transformers (not part of the core test suite). Exits 1 on any mismatch.

    PYTHONPATH=. python tools/crosscheck/flops_mixers.py [--n 6] [--write-docs] [-v]

`--write-docs` replaces the hybrid-FLOPs section of docs/validation.md (between its markers).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import transformers  # noqa: E402
from hf_cases_hybrid import EDGE, GENERATORS, HYBRID_TYPES  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402

from transformer_calc.estimators.flops import count_flops  # noqa: E402
from transformer_calc.estimators.mixers import MIXERS  # noqa: E402
from transformer_calc.model.config import ModelConfig, Workload  # noqa: E402
from transformer_calc.sources.hf import WRAPPERS, from_hf_config  # noqa: E402

Cfg = dict[str, Any]
BEGIN, END = "<!-- flops_mixers:begin -->", "<!-- flops_mixers:end -->"
REGENERATE = "PYTHONPATH=. python tools/crosscheck/flops_mixers.py --write-docs"
MAX_BATCH, MAX_SEQ = 3, 150
CPU_MAX_PARAMS = 20_000_000


def predicted(cfg: Cfg, B: int, S: int) -> int:
    m = ModelConfig.model_validate(from_hf_config(cfg))
    hidden = sum(m.n_attention_layers(k) * MIXERS[k].forward_flops(m, B, S).hidden for k in m.mixer_kinds)
    return count_flops(m, Workload(seq_len=S, batch_size=B)).forward - hidden


def counted(cfg: Cfg, B: int, S: int) -> tuple[int | None, Cfg]:
    """FlopCounterMode's forward FLOPs (None: too large for the CPU) and the full saved dict."""
    config = CONFIG_MAPPING[cfg["model_type"]].from_dict(dict(cfg))
    full = json.loads(config.to_json_string(use_diff=False))
    if config.model_type in WRAPPERS:
        config = config.get_text_config()
    kw = {"experts_implementation": "eager"} if getattr(config, "num_experts", 0) or getattr(config, "num_local_experts", 0) else {}
    with torch.device("meta"):
        n = sum(p.numel() for p in AutoModelForCausalLM.from_config(config, **kw).parameters())
    if n > CPU_MAX_PARAMS:
        return None, full
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", **kw).eval()
    ids = torch.randint(0, config.vocab_size, (B, S))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
    return counter.get_total_flops(), full


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=6, help="random shapes per model_type")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write-docs", action="store_true", help="update the hybrid-FLOPs section of docs/validation.md")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    workload = random.Random(args.seed)
    cases = [(t, f"random-{i}", GENERATORS[t](None)) for t in sorted(GENERATORS) for i in range(args.n)]
    cases += [(cfg["model_type"], label, cfg) for label, cfg in EDGE if cfg["model_type"] in HYBRID_TYPES]
    start = time.perf_counter()
    failures, checked, skipped = [], 0, 0
    rows: dict[str, list[int]] = {}  # model_type -> [checked, mismatches, largest S]
    for model_type, label, cfg in cases:
        B, S = workload.randint(1, MAX_BATCH), workload.randint(1, MAX_SEQ)
        got, full = counted(cfg, B, S)
        if got is None:
            skipped += 1
            continue
        checked += 1
        want, want_full = predicted(cfg, B, S), predicted(full, B, S)
        row = rows.setdefault(model_type, [0, 0, 0])
        row[0], row[2] = row[0] + 1, max(row[2], S)
        row[1] += got != want or got != want_full
        if got != want or got != want_full:
            failures.append(f"{model_type}/{label} B={B} S={S}: FlopCounterMode {got:,} tcalc {want:,} (full dict {want_full:,})")
        elif args.verbose:
            print(f"ok {model_type}/{label} B={B} S={S}: {got:,}")
    print(f"{checked} configs checked, {skipped} too large for the CPU, {len(failures)} mismatches "
          f"({time.perf_counter() - start:.1f} s, transformers {transformers.__version__}, torch {torch.__version__})")
    for line in failures:
        print("MISMATCH", line)
    if args.write_docs:
        write_docs(rows, skipped)
    return 1 if failures else 0


def write_docs(rows: dict[str, list[int]], skipped: int) -> None:
    table = [f"| {t} | {n} | {bad} | {s_max} |" for t, (n, bad, s_max) in sorted(rows.items())]
    section = "\n".join([
        BEGIN,
        "<!-- Generated by tools/crosscheck/flops_mixers.py; do not edit by hand. Regenerate with:",
        f"     {REGENERATE} -->",
        "",
        "## FLOPs of hybrid models: tcalc flops vs FlopCounterMode",
        "",
        f"Generated by `tools/crosscheck/flops_mixers.py` (torch {torch.__version__}, transformers "
        f"{transformers.__version__}); CI runs it.",
        "",
        "**Measured:** `FlopCounterMode` over one forward (no cache, no gradient, fp32, CPU, eager attention and",
        "experts) of B sequences of S random tokens, B up to 3 and S up to 150, with transformers' torch",
        "fallbacks of the mixers (the chunked delta rule, the Mamba-2 chunk scan, the Mamba selective scan, the",
        "short and depthwise convs, lightning attention's blocks). **Predicted:** `count_flops(...).forward` less",
        "the chunked delta rule's triangular solves, which the counter cannot see (docs/formulas.md §5.6), for",
        "the config as written and for transformers' full dict. Every configuration must be equal. The backward",
        "is tcalc's 2 x forward; FlopCounterMode counts a grouped conv's backward as a dense one and the solves'",
        f"backward matmuls, so it is not compared. {skipped} configurations too large for the CPU were skipped.",
        "",
        "| model_type | configurations | mismatches | longest S |",
        "| --- | --- | --- | --- |",
        *table,
        END,
    ])
    from tools.docsection import write_section

    path = REPO / "docs" / "validation.md"
    write_section(path, BEGIN, END, section)
    print(f"wrote {path.relative_to(REPO)}")


if __name__ == "__main__":
    sys.exit(main())
