"""Cross-check Gemma 3n's towers, and whole Gemma 3n models, against timm and transformers.

transformers builds Gemma 3n's vision tower through timm (`TimmWrapperModel` around
`timm.create_model("mobilenetv5_300m_enc")`), and timm imports torchvision, which CI's torch 2.13
CPU build has no match for; so this tool runs in an environment of its own, and what it measures is
written to tests/data/gemma3n_timm.json, which tests/test_gemma3n.py checks tcalc against in CI
(no timm, no torch there). It checks, on the meta device:

- MobileNetV5 (`sources.hf_gemma3n.mobilenetv5`): parameters block by block against timm's
  modules (85 blocks: 84 in four stages, the fusion adapter), the block kinds and widths against
  timm's own arch decoding, the total, and the forward FLOPs of one 768 x 768 image against
  torch's FlopCounterMode;
- whole `Gemma3nForConditionalGeneration` models (language model, vision tower, audio tower,
  embed_vision, embed_audio and the total with the tied head counted once) against
  `from_hf_config`: the default config (the E4B shape), the E2B shape, a head left untied, and
  random odd text/audio shapes (tools/crosscheck/hf_cases_gemma4.py gen_3n_wrapper).

Exits 1 on any mismatch; writes the fixture only when all agree.

    python -m venv /tmp/tv && /tmp/tv/bin/pip install torch==2.14.1 torchvision==0.29.1 timm transformers==5.23.0
    PYTHONPATH=. /tmp/tv/bin/python tools/crosscheck/gemma3n_timm.py [--n 12] [--write tests/data/gemma3n_timm.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

try:
    import timm  # noqa: E402
except ImportError:  # pragma: no cover - the point of the tool is an environment that has it
    sys.exit("gemma3n_timm.py needs timm (and torchvision beside its torch): see the docstring")
import torch  # noqa: E402
import transformers  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402
from transformers import Gemma3nConfig, Gemma3nForConditionalGeneration  # noqa: E402

import hf_cases_gemma4  # noqa: E402
from transformer_calc.estimators.params import tower_params  # noqa: E402
from transformer_calc.model.config import ModelConfig  # noqa: E402
from transformer_calc.sources import hf_gemma3n as G3N  # noqa: E402
from transformer_calc.sources.hf import from_hf_config  # noqa: E402

Cfg = dict[str, Any]
KIND = {"er": "EdgeResidual", "uir": "UniversalInvertedResidual", "mqa": "MobileAttention"}

# The E2B shape: the E4B defaults with 30 layers, MLP 8192 and 10 kv-shared layers (the E2B model of
# Gemma 3n's MatFormer; the Hugging Face blog "Gemma 3n fully available": "5B and 8B" parameters).
E2B_TEXT = {"num_hidden_layers": 30, "intermediate_size": [8192] * 30, "num_kv_shared_layers": 10,
            "activation_sparsity_pattern": [0.95] * 10 + [0.0] * 20}
FIXED: list[tuple[str, Cfg]] = [
    ("defaults (E4B shape)", {"model_type": "gemma3n"}),
    ("E2B shape", {"model_type": "gemma3n", "text_config": E2B_TEXT}),
    ("untied head", {"model_type": "gemma3n", "tie_word_embeddings": False,
                     "text_config": {"num_hidden_layers": 6, "num_kv_shared_layers": 1, "hidden_size": 256,
                                     "intermediate_size": 512, "vocab_size": 1000, "vocab_size_per_layer_input": 900}}),
]


def mobilenetv5_check() -> tuple[dict[str, Any], list[str]]:
    """timm's encoder against `hf_gemma3n.mobilenetv5`: per block, block kinds and widths, FLOPs."""
    failures: list[str] = []
    with torch.device("meta"):
        model = timm.create_model(G3N.ARCHITECTURE, pretrained=False)
        blocks = [b for stage in model.blocks for b in stage]
        real = [sum(p.numel() for p in b.parameters()) for b in blocks] + [sum(p.numel() for p in model.msfa.parameters())]
        with FlopCounterMode(display=False) as counter:
            model(torch.empty(1, G3N.RGB, G3N.IMAGE_PX, G3N.IMAGE_PX))
    params, flops, per_block = G3N.mobilenetv5()
    arch = [G3N.decode_block(s) for stage in G3N.MOBILENETV5_300M_ENC for s in stage]
    if len(arch) != len(blocks):
        failures.append(f"MobileNetV5 blocks: timm {len(blocks)}, tcalc {len(arch)}")
    for i, (b, a) in enumerate(zip(blocks, arch)):
        out = b.layer_scale.gamma.numel() if hasattr(b, "layer_scale") and hasattr(b.layer_scale, "gamma") else \
            b.conv_pwl.out_channels
        if type(b).__name__ != KIND[a["kind"]] or out != a["c"]:
            failures.append(f"MobileNetV5 block {i}: timm {type(b).__name__} c{out}, tcalc {a}")
    bad = [i for i, (x, y) in enumerate(zip(real, per_block)) if x != y]
    if bad or len(real) != len(per_block):
        failures.append(f"MobileNetV5 per-block parameters differ at blocks {bad[:10]}")
    total_real = sum(p.numel() for p in model.parameters())
    if params != total_real:
        failures.append(f"MobileNetV5 parameters: timm {total_real:,}, tcalc {params:,}")
    if flops != counter.get_total_flops():
        failures.append(f"MobileNetV5 FLOPs at {G3N.IMAGE_PX}: FlopCounterMode {counter.get_total_flops():,}, tcalc {flops:,}")
    measured = {"params": total_real, "params_per_block": real, "flops_768": counter.get_total_flops(),
                "flops_by_op": {str(k): v for k, v in counter.get_flop_counts()["Global"].items()}}
    return measured, failures


def whole_model(cfg: Cfg) -> tuple[dict[str, int], Cfg]:
    """What transformers builds: each part of Gemma3nModel and the whole (tied head once), and the
    full config it would save."""
    config = Gemma3nConfig.from_dict({k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        model = Gemma3nForConditionalGeneration(config)
    part = {name: sum(p.numel() for p in child.parameters()) for name, child in model.model.named_children()}
    return ({"total": sum(p.numel() for p in model.parameters()), "language_model_body": part["language_model"],
             "vision": part["vision_tower"], "audio": part["audio_tower"],
             "projector": part["embed_vision"] + part["embed_audio"]},
            json.loads(config.to_json_string(use_diff=False)))


def tcalc_model(cfg: Cfg) -> dict[str, int]:
    m = ModelConfig.model_validate(from_hf_config(cfg))
    tp = tower_params(m)
    assert tp is not None
    return {"total": tp.language_model + tp.towers, "vision": tp.vision, "audio": tp.audio, "projector": tp.projector}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=12, help="random whole-model shapes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", type=Path, metavar="FILE", help="write the fixture here (only when all agree)")
    ap.add_argument("--write-hf", type=Path, metavar="DIR",
                    help="also write tests/data/hf-style fixtures (the full saved config) of two models here")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    start = time.perf_counter()
    mnv5, failures = mobilenetv5_check()
    print(f"MobileNetV5 ({G3N.ARCHITECTURE}): {mnv5['params']:,} parameters in {len(mnv5['params_per_block'])} blocks, "
          f"{mnv5['flops_768']:,} FLOPs at {G3N.IMAGE_PX}x{G3N.IMAGE_PX}: {len(failures)} mismatches")
    rng = random.Random(args.seed)
    cases = FIXED + [(f"random-{i}", hf_cases_gemma4.gen_3n_wrapper(rng)) for i in range(args.n)]
    models, hf_fixtures = [], []
    for label, cfg in cases:
        expected, full = whole_model(cfg)
        if label in ("defaults (E4B shape)", "random-0"):
            hf_fixtures.append(("full" if label.startswith("defaults") else label, full, expected["total"]))
        got = tcalc_model(cfg)
        keys = ("total", "vision", "audio", "projector")
        ok = all(expected[k] == got[k] for k in keys)
        if not ok:
            failures.append(f"{label}: transformers {expected} tcalc {got} -- {cfg}")
        print(f"  {label:<22} total {expected['total']:>15,}  vision {expected['vision']:>12,}  audio "
              f"{expected['audio']:>12,}  projector {expected['projector']:>11,}  {'ok' if ok else 'MISMATCH'}")
        models.append({"label": label, "config": cfg, "expected": {k: expected[k] for k in keys}})
    print(f"{len(cases)} whole models, {len(failures)} mismatches in all ({time.perf_counter() - start:.1f} s; "
          f"transformers {transformers.__version__}, timm {timm.__version__}, torch {torch.__version__})")
    for line in failures:
        print("MISMATCH", line)
    if args.write and not failures:
        body = {"source": "tools/crosscheck/gemma3n_timm.py (meta device)",
                "versions": {"transformers": transformers.__version__, "timm": timm.__version__,
                             "torch": torch.__version__},
                "mobilenetv5_300m_enc": mnv5, "models": models}
        args.write.write_text(json.dumps(body, indent=1) + "\n")
        print(f"wrote {args.write}")
    if args.write_hf and not failures:
        for label, full, total in hf_fixtures:
            body = {"config": full, "expected_params": total, "transformers_version": transformers.__version__,
                    "timm_version": timm.__version__}
            (args.write_hf / f"gemma3n_{label}.json").write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
        print(f"wrote {len(hf_fixtures)} fixtures to {args.write_hf}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
