"""Cross-check presets/models.yaml against the models transformers actually builds.

For every preset this script knows a Hugging Face config for (all with `hf_model_type`, plus
the gpt3 family, built as GPT-2 configs with the paper's shapes), it

  1. builds the transformers config from the real config.json values written below (not from
     the preset, so a wrong mapping in the preset shows up as a mismatch),
  2. instantiates AutoModelForCausalLM.from_config(cfg) under torch.device("meta") (no memory,
     no weights, seconds even for 405B),
  3. counts unique parameters, sum(p.numel() for p in model.parameters()) (tied tensors once),
  4. compares that with transformer_calc.estimators.params.total_params(preset model) and with the
     preset's expected_params, and also checks the preset's shape fields against the config.

Prints a table; exits 1 on any mismatch (or a preset with hf_model_type and no config here).

Usage (needs torch and transformers; no network):
    PYTHONPATH=. python tools/crosscheck/verify_presets.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
PRESETS = REPO / "presets" / "models.yaml"

# Real config.json values (architecture-relevant keys only), keyed by preset name. The
# model_type entry picks the transformers class. Sources are the `source` fields of the presets.


def _gpt2(n_layer: int, n_embd: int, n_head: int, n_positions: int) -> dict[str, Any]:
    return {
        "model_type": "gpt2",
        "n_layer": n_layer,
        "n_embd": n_embd,
        "n_head": n_head,
        "n_positions": n_positions,
        "vocab_size": 50257,
        "resid_pdrop": 0.1,
        "embd_pdrop": 0.1,
        "attn_pdrop": 0.1,
    }


def _llama(
    model_type: str, L: int, D: int, A: int, kv: int, F: int, V: int, K: int, **extra: Any
) -> dict[str, Any]:
    return {
        "model_type": model_type,
        "num_hidden_layers": L,
        "hidden_size": D,
        "num_attention_heads": A,
        "num_key_value_heads": kv,
        "intermediate_size": F,
        "vocab_size": V,
        "max_position_embeddings": K,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "attention_dropout": 0.0,
        **extra,
    }


def _neox(L: int, D: int, A: int, V: int) -> dict[str, Any]:
    return {
        "model_type": "gpt_neox",
        "num_hidden_layers": L,
        "hidden_size": D,
        "num_attention_heads": A,
        "intermediate_size": 4 * D,
        "vocab_size": V,
        "max_position_embeddings": 2048,
        "rotary_pct": 0.25,
        "use_parallel_residual": True,
        "tie_word_embeddings": False,
        "hidden_act": "gelu",
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
    }


def _opt(L: int, D: int, A: int, word_embed_proj_dim: int | None = None,
         do_layer_norm_before: bool = True) -> dict[str, Any]:
    return {
        "model_type": "opt",
        "num_hidden_layers": L,
        "hidden_size": D,
        "num_attention_heads": A,
        "ffn_dim": 4 * D,
        "vocab_size": 50272,
        "max_position_embeddings": 2048,
        "word_embed_proj_dim": word_embed_proj_dim if word_embed_proj_dim is not None else D,
        "do_layer_norm_before": do_layer_norm_before,
        "activation_function": "relu",
        "enable_bias": True,
        "dropout": 0.1,
        "attention_dropout": 0.0,
    }


HF_CONFIGS: dict[str, dict[str, Any]] = {
    # GPT-2: openai-community/gpt2{,-medium,-large,-xl} config.json
    "gpt2": _gpt2(12, 768, 12, 1024),
    "gpt2-medium": _gpt2(24, 1024, 16, 1024),
    "gpt2-large": _gpt2(36, 1280, 20, 1024),
    "gpt2-xl": _gpt2(48, 1600, 25, 1024),
    # GPT-3 (Brown et al. 2020, Table 2.1) as GPT-2 configs; see the presets for XL's A and 13B's D.
    "gpt3-small": _gpt2(12, 768, 12, 2048),
    "gpt3-medium": _gpt2(24, 1024, 16, 2048),
    "gpt3-large": _gpt2(24, 1536, 16, 2048),
    "gpt3-xl": _gpt2(24, 2048, 16, 2048),
    "gpt3-2.7b": _gpt2(32, 2560, 32, 2048),
    "gpt3-6.7b": _gpt2(32, 4096, 32, 2048),
    "gpt3-13b": _gpt2(40, 5120, 40, 2048),
    "gpt3": _gpt2(96, 12288, 96, 2048),
    # tiiuae/falcon-7b, tiiuae/falcon-40b
    "falcon-7b": {
        "model_type": "falcon",
        "num_hidden_layers": 32,
        "hidden_size": 4544,
        "num_attention_heads": 71,
        "vocab_size": 65024,
        "multi_query": True,
        "parallel_attn": True,
        "new_decoder_architecture": False,
        "bias": False,
        "alibi": False,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
    },
    "falcon-40b": {
        "model_type": "falcon",
        "num_hidden_layers": 60,
        "hidden_size": 8192,
        "num_attention_heads": 128,
        "num_kv_heads": 8,
        "vocab_size": 65024,
        "new_decoder_architecture": True,
        "parallel_attn": True,
        "bias": False,
        "alibi": False,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
    },
    # meta-llama/Llama-2-{7b,13b,70b}-hf, Meta-Llama-3-{8B,70B}, Llama-3.1-405B
    "llama-2-7b": _llama("llama", 32, 4096, 32, 32, 11008, 32000, 4096),
    "llama-2-13b": _llama("llama", 40, 5120, 40, 40, 13824, 32000, 4096),
    "llama-2-70b": _llama("llama", 80, 8192, 64, 8, 28672, 32000, 4096),
    "llama-3-8b": _llama("llama", 32, 4096, 32, 8, 14336, 128256, 8192),
    "llama-3-70b": _llama("llama", 80, 8192, 64, 8, 28672, 128256, 8192),
    "llama-3.1-405b": _llama("llama", 126, 16384, 128, 8, 53248, 128256, 131072),
    # mistralai/Mistral-7B-v0.1, mistralai/Mixtral-8x7B-v0.1
    "mistral-7b": _llama("mistral", 32, 4096, 32, 8, 14336, 32000, 32768, sliding_window=4096),
    "mixtral-8x7b": _llama(
        "mixtral", 32, 4096, 32, 8, 14336, 32000, 32768,
        num_local_experts=8, num_experts_per_tok=2,
    ),
    # EleutherAI/gpt-neox-20b, EleutherAI/pythia-*
    "gpt-neox-20b": _neox(44, 6144, 64, 50432),
    "pythia-70m": _neox(6, 512, 8, 50304),
    "pythia-160m": _neox(12, 768, 12, 50304),
    "pythia-410m": _neox(24, 1024, 16, 50304),
    "pythia-1b": _neox(16, 2048, 8, 50304),
    "pythia-1.4b": _neox(24, 2048, 16, 50304),
    "pythia-2.8b": _neox(32, 2560, 32, 50304),
    "pythia-6.9b": _neox(32, 4096, 32, 50432),
    "pythia-12b": _neox(36, 5120, 40, 50688),
    # facebook/opt-*
    "opt-125m": _opt(12, 768, 12),
    "opt-350m": _opt(24, 1024, 16, word_embed_proj_dim=512, do_layer_norm_before=False),
    "opt-1.3b": _opt(24, 2048, 32),
    "opt-6.7b": _opt(32, 4096, 32),
    # Qwen/Qwen2-7B (Qwen2 attention: q/k/v bias, no o_proj bias)
    "qwen2-7b": _llama("qwen2", 28, 3584, 28, 4, 18944, 152064, 131072),
    # google/gemma-7b
    "gemma-7b": {
        "model_type": "gemma",
        "num_hidden_layers": 28,
        "hidden_size": 3072,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "head_dim": 256,
        "intermediate_size": 24576,
        "vocab_size": 256000,
        "max_position_embeddings": 8192,
        "hidden_act": "gelu",
        "attention_bias": False,
        "attention_dropout": 0.0,
    },
    # microsoft/phi-2
    "phi-2": {
        "model_type": "phi",
        "num_hidden_layers": 32,
        "hidden_size": 2560,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "intermediate_size": 10240,
        "vocab_size": 51200,
        "max_position_embeddings": 2048,
        "partial_rotary_factor": 0.4,
        "qk_layernorm": False,
        "hidden_act": "gelu_new",
        "tie_word_embeddings": False,
        "resid_pdrop": 0.1,
        "embd_pdrop": 0.0,
        "attention_dropout": 0.0,
    },
    # bigscience/bloom-7b1
    "bloom-7b1": {
        "model_type": "bloom",
        "n_layer": 30,
        "hidden_size": 4096,
        "n_head": 32,
        "vocab_size": 250880,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
    },
    # bigcode/starcoder
    "starcoder": {
        "model_type": "gpt_bigcode",
        "n_layer": 40,
        "n_embd": 6144,
        "n_head": 48,
        "n_inner": 24576,
        "n_positions": 8192,
        "vocab_size": 49152,
        "multi_query": True,
        "activation_function": "gelu",
        "bos_token_id": 0,
        "eos_token_id": 0,
        "resid_pdrop": 0.1,
        "embd_pdrop": 0.1,
        "attn_pdrop": 0.1,
    },
    # EleutherAI/gpt-j-6b
    "gpt-j-6b": {
        "model_type": "gptj",
        "n_layer": 28,
        "n_embd": 4096,
        "n_head": 16,
        "n_inner": None,
        "n_positions": 2048,
        "rotary_dim": 64,
        "vocab_size": 50400,
        "activation_function": "gelu_new",
        "tie_word_embeddings": False,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
    },
}

# Residual/hidden dropout key per config (the preset's `dropout`), first one present wins.
_DROPOUT_KEYS = ("resid_pdrop", "hidden_dropout", "dropout")


def _published() -> dict[str, dict[str, Any]]:
    """The 2024-2026 presets' configs: the published config.json copies and tools/presets'
    sourced architecture values (tools/presets/from_hf.py generated those presets from them)."""
    import json

    sys.path.insert(0, str(REPO / "tools" / "presets"))
    from from_hf import EXTRA

    out = {p.stem: json.loads(p.read_text()) for p in (REPO / "tools/crosscheck/published_configs").glob("*.json")}
    out.update({name: cfg for name, (_, _, cfg) in EXTRA.items()})
    return out


HF_CONFIGS.update(_published())


def hf_config(hf: dict[str, Any]) -> Any:
    """The transformers config object for one HF_CONFIGS entry (a wrapper: its text model; a
    model_type read as another family: that family's)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from transformer_calc.sources.hf import SAME_AS

    kwargs = dict(hf)
    model_type = SAME_AS.get(kwargs["model_type"], kwargs["model_type"])
    config = CONFIG_MAPPING[model_type].from_dict({**kwargs, "model_type": model_type})
    if model_type in ("gemma3", "llama4", "mistral3", "qwen3_5", "qwen3_5_moe"):
        config = config.get_text_config()
    return config


def hf_param_count(cfg: Any) -> int:
    """Unique parameters of the model transformers builds from `cfg` on the meta device:
    AutoModelForCausalLM, or for a multimodal wrapper AutoModelForImageTextToText (towers included)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    from transformer_calc.sources.hf import WRAPPERS

    auto = AutoModelForImageTextToText if cfg.model_type in WRAPPERS else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(cfg)
    return sum(p.numel() for p in model.parameters())


def shape_problems(model: dict[str, Any], hf: dict[str, Any], cfg: Any) -> list[str]:
    """Preset fields that disagree with the config.json values they come from."""
    out = []
    cfg = cfg.get_text_config()  # a wrapper's language model (the config itself otherwise)
    if "text_config" in hf:
        hf = hf["text_config"]
    pairs = [
        ("n_layers", getattr(cfg, "num_hidden_layers", None)),
        ("d_model", getattr(cfg, "hidden_size", None)),
        ("n_heads", getattr(cfg, "num_attention_heads", None)),
        ("vocab_size", getattr(cfg, "vocab_size", None)),
    ]
    if "max_position_embeddings" in hf or "n_positions" in hf:
        pairs.append(("max_seq_len", hf.get("max_position_embeddings", hf.get("n_positions"))))
    for key in _DROPOUT_KEYS:
        if key in hf:
            pairs.append(("dropout", hf[key]))
            break
    for field, want in pairs:
        if want is None:
            continue
        have = model.get(field, 0.0 if field == "dropout" else None)
        if have != want:
            out.append(f"{field}={have} but config says {want}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="check only these presets")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from transformer_calc.model.config import ModelConfig
    from transformer_calc.estimators.params import total_params
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # legacy-value notices (Gemma's "gelu") are not findings

    presets = yaml.safe_load(PRESETS.read_text())["models"]
    names = args.only or list(presets)
    failures: list[str] = []
    header = f"{'preset':16s} {'hf_model_type':13s} {'transformers':>17s} {'tcalc':>17s} {'expected':>17s}  result"
    print(header)
    print("-" * len(header))
    t0 = time.perf_counter()
    for name in names:
        preset = presets[name]
        tcalc = total_params(ModelConfig.model_validate(preset["model"]))  # towers included
        expected = preset.get("expected_params")
        hf = HF_CONFIGS.get(name)
        problems: list[str] = []
        if hf is None:
            if preset.get("hf_model_type"):
                problems.append("has hf_model_type but no config in HF_CONFIGS")
            hf_total = None
        else:
            mt = preset.get("hf_model_type", "gpt2" if preset.get("family") == "gpt3" else None)
            from transformer_calc.sources.hf import SAME_AS

            if mt != SAME_AS.get(hf["model_type"], hf["model_type"]):
                problems.append(f"hf_model_type {mt!r} != config's {hf['model_type']!r}")
            cfg = hf_config(hf)
            hf_total = hf_param_count(cfg)
            if hf_total != tcalc:
                problems.append(f"tcalc differs from transformers by {tcalc - hf_total:+,d}")
            problems += shape_problems(preset["model"], hf, cfg)
        if expected is not None and expected != tcalc:
            problems.append(f"expected_params differs from tcalc by {expected - tcalc:+,d}")
        status = "OK" if not problems else "MISMATCH: " + "; ".join(problems)
        if hf_total is None and not problems:
            status = "OK (not built)"
        if problems:
            failures.append(name)
        print(
            f"{name:16s} {hf['model_type'] if hf else '-':13s} "
            f"{(f'{hf_total:,d}' if hf_total is not None else '-'):>17s} {tcalc:>17,d} "
            f"{(f'{expected:,d}' if expected is not None else '-'):>17s}  {status}"
        )
    print("-" * len(header))
    print(f"{len(names)} presets, {len(failures)} mismatches, {time.perf_counter() - t0:.1f}s")
    if failures:
        print("FAILED: " + ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
