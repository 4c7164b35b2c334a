"""Cross-check each tower count of `transformer_calc.sources.hf_towers` against transformers' vision
model class built alone (on the meta device): SigLIP, Llama 4, Pixtral, Qwen2.5-VL, Qwen3-VL,
Qwen3.5 (its vision tower only: the Qwen3.5 language model is another reader's), GLM-4V, Kimi
K2.5's MoonViT, Voxtral's audio encoder, Gemma 4's vision and audio models, and Gemma 3n's audio
encoder and multimodal embedder (its MobileNetV5 vision tower needs timm: tools/crosscheck/gemma3n_timm.py). Random odd shapes (tools/crosscheck/hf_cases_towers.py's vision generators) plus
each config class's defaults; exits 1 on any mismatch. `--write-fixtures DIR` writes a few cases per
family for tests/test_towers.py (which needs neither torch nor transformers).

    python tools/crosscheck/hf_towers.py [--n 30] [--seed 0] [--write-fixtures tests/data/towers]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402

import hf_cases_towers as cases  # noqa: E402
from transformer_calc.sources import hf_towers as T  # noqa: E402
from transformer_calc.sources import hf_gemma4 as G4  # noqa: E402
from transformer_calc.sources import hf_gemma3n as G3N  # noqa: E402
import hf_cases_gemma4  # noqa: E402

Cfg = dict[str, Any]


def _qwen3_5(r: random.Random) -> Cfg:
    v = cases.qwen3_vision(r)
    v.pop("deepstack_visual_indexes", None)  # Qwen3_5VisionConfig has none
    return v


def _g4_vision(r: random.Random) -> Cfg:
    return {k: v for k, v in hf_cases_gemma4.gen_vision(r).items() if k != "model_type"}


def _g4_audio(r: random.Random) -> Cfg:
    return {k: v for k, v in hf_cases_gemma4.gen_audio(r).items() if k != "model_type"}


def _g3n_audio(r: random.Random) -> Cfg:
    return {k: v for k, v in hf_cases_gemma4.gen_3n_audio(r).items() if k != "model_type"}


def _g3n_embedder(r: random.Random) -> Cfg:
    """Gemma3nMultimodalEmbedder's inputs: the tower config's hidden_size and vocab_size, the text D."""
    return {"hidden_size": r.randint(1, 40), "vocab_size": r.randint(1, 140), "text_hidden_size": r.randint(1, 40)}


def _sum(f: Callable[[Any], tuple[int, int]]) -> Callable[[Any], int]:
    return lambda cfg: sum(f(cfg))


# family -> (config model_type, transformers class name, tcalc count of the whole class, generator)
FAMILIES: dict[str, tuple[str, str, Callable[[Any], int], Callable[[random.Random], Cfg]]] = {
    "siglip": ("siglip_vision_model", "SiglipVisionModel", T.siglip_vision, cases.siglip),
    "llama4": ("llama4_vision_model", "Llama4VisionModel", T.llama4_vision, cases.llama4_vision),
    "pixtral": ("pixtral", "PixtralVisionModel", T.pixtral_vision, cases.pixtral),
    "qwen2_5_vl": ("qwen2_5_vl_vision", "Qwen2_5_VisionTransformerPretrainedModel", _sum(T.qwen2_5_vl_vision),
                   cases.qwen2_5_vision),
    "qwen3_vl": ("qwen3_vl_vision", "Qwen3VLVisionModel", _sum(T.qwen3_vl_vision), cases.qwen3_vision),
    "qwen3_5": ("qwen3_5_vision", "Qwen3_5VisionModel", _sum(T.qwen3_5_vision), _qwen3_5),
    "glm4v": ("glm4v_vision", "Glm4vVisionModel", _sum(T.glm4v_vision), cases.glm4v_vision),
    "kimi_k25": ("kimi_k25_vision", "Kimi_K25VisionModel", T.kimi_k25_vision, cases.kimi_vision),
    "voxtral": ("voxtral_encoder", "VoxtralEncoder", T.voxtral_audio, cases.voxtral_audio),  # an audio tower
    # Gemma 4 (sources/hf_gemma4.py): its vision model and its audio (USM conformer) model
    "gemma4_vision": ("gemma4_vision", "Gemma4VisionModel", lambda cfg: G4.gemma4_vision(cfg)[0], _g4_vision),
    "gemma4_audio": ("gemma4_audio", "Gemma4AudioModel", lambda cfg: G4.gemma4_audio(cfg)[0], _g4_audio),
    # Gemma 3n (sources/hf_gemma3n.py): its audio encoder and one multimodal embedder (embed_vision/embed_audio)
    "gemma3n_audio": ("gemma3n_audio", "Gemma3nAudioEncoder", lambda cfg: G3N.gemma3n_audio(cfg)[0], _g3n_audio),
    "gemma3n_embedder": ("gemma3n_audio", "Gemma3nMultimodalEmbedder",
                         lambda cfg: G3N.embedder(cfg.get("hidden_size", 1536), cfg.get("vocab_size", 128),
                                                  cfg.get("text_hidden_size", 2048)), _g3n_embedder),
}  # fmt: skip


def transformers_count(family: str, cfg: Cfg) -> int:
    config_type, class_name, _, _ = FAMILIES[family]
    if family == "gemma3n_embedder":  # built from a tower config and a text config (modeling_gemma3n.py)
        from transformers.models.gemma3n.modeling_gemma3n import Gemma3nMultimodalEmbedder

        tower = {k: v for k, v in cfg.items() if k != "text_hidden_size"}
        text = CONFIG_MAPPING["gemma3n_text"](hidden_size=cfg.get("text_hidden_size", 2048), num_attention_heads=1,
                                               num_key_value_heads=1)
        with torch.device("meta"):
            model = Gemma3nMultimodalEmbedder(CONFIG_MAPPING[config_type](**tower), text)
        return sum(p.numel() for p in model.parameters())
    config = CONFIG_MAPPING[config_type](**cfg)
    cls = getattr(transformers, class_name)  # each vision model class is exported at the top level
    with torch.device("meta"):
        model = cls._from_config(config)
    return sum(p.numel() for p in model.parameters())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=30, help="random shapes per family")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write-fixtures", type=Path, metavar="DIR")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    rng = random.Random(args.seed)
    start = time.perf_counter()
    failures: list[str] = []
    fixtures: list[tuple[str, str, Cfg, int]] = []
    print(f"{'family':<17} {'cases':>6} {'mismatches':>10}")
    for family, (_, _, count, gen) in FAMILIES.items():
        bad = 0
        samples = [("defaults", {})] + [(f"random-{i}", gen(rng)) for i in range(args.n)]
        for label, cfg in samples:
            cfg = {k: v for k, v in cfg.items() if k != "model_type"}
            try:
                expected, got = transformers_count(family, cfg), count(cfg)
            except Exception as exc:  # a generator bug or a tcalc refusal: both are failures here
                failures.append(f"{family}/{label}: {type(exc).__name__}: {exc} -- {cfg}")
                bad += 1
                continue
            if got != expected:
                failures.append(f"{family}/{label}: transformers={expected:,} tcalc={got:,} -- {cfg}")
                bad += 1
            elif label in ("defaults", "random-0", "random-1"):
                fixtures.append((family, label, cfg, expected))
        print(f"{family:<17} {len(samples):>6} {bad:>10}")
    print(f"{'total':<17} {len(FAMILIES) * (args.n + 1):>6} {len(failures):>10}   ({time.perf_counter() - start:.1f} s, "
          f"transformers {transformers.__version__}, torch {torch.__version__})")
    for line in failures:
        print("MISMATCH", line)
    if args.write_fixtures and not failures:
        args.write_fixtures.mkdir(parents=True, exist_ok=True)
        for family, label, cfg, expected in fixtures:
            body = {"family": family, "vision_config": cfg, "expected_params": expected,
                    "transformers_class": FAMILIES[family][1], "transformers_version": transformers.__version__}
            (args.write_fixtures / f"vision_{family}_{label}.json").write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
        print(f"wrote {len(fixtures)} fixtures to {args.write_fixtures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
