"""Cross-check `transformer_calc.sources.hf` against transformers: exact parameter counts, every model_type.

For each supported model_type this builds many config.json-shaped dicts (a fixed-seed random sample,
edge cases, minimal configs that lean on the defaults, and real published shapes), instantiates
`AutoModelForCausalLM.from_config(...)` on the meta device (no memory, no weights; a multimodal
wrapper: `AutoModelForImageTextToText`, the *ForConditionalGeneration class, towers included),
counts `sum(p.numel() for p in model.parameters())` (tied tensors once) and compares it with
`total_params(ModelConfig.model_validate(from_hf_config(cfg)))` for two dicts (for a wrapper also
the towers' part, by module name, and the `text_only` count, the whole less the towers):

- the dict as generated (what a hand-written or minimal config.json holds: defaults exercised), and
- the full `config.to_json_string(use_diff=False)` (what `save_pretrained` writes: every key).

Needs torch and transformers (not part of the core test suite). Exits 1 on any mismatch.

    python tools/crosscheck/hf_params.py [--n 20] [--seed 0] [--write-fixtures tests/data/hf]
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
from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoModelForSpeechSeq2Seq  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402

from transformer_calc.model.config import ModelConfig  # noqa: E402
from transformer_calc.sources.hf import SUPPORTED_MODEL_TYPES, from_hf_config  # noqa: E402
from transformer_calc.estimators.params import total_params  # noqa: E402

Cfg = dict[str, Any]
R = random.Random


# ------------------------------------------------------------------ random shapes, one per family
def _heads(r: R, gqa: bool = True) -> tuple[int, int, int]:
    """(n_heads, n_kv_heads, head_dim) with kv dividing heads."""
    kv = r.choice([1, 2, 4]) if gqa else 0
    group = r.choice([1, 2, 3, 4])
    heads = kv * group if gqa else r.choice([1, 2, 3, 4, 6, 8, 12])
    return heads, kv, r.choice([8, 16, 24, 32])


def _maybe(r: R, cfg: Cfg, **knobs: Any) -> Cfg:
    """Add each knob with probability 1/2, so that defaults are exercised too."""
    for key, value in knobs.items():
        if r.random() < 0.5:
            cfg[key] = value
    return cfg


def _common_knobs(r: R) -> dict[str, Any]:
    return {
        "tie_word_embeddings": r.random() < 0.5,
        "max_position_embeddings": r.choice([128, 512, 2048, 4096]),
    }


def gen_llama_like(model_type: str) -> Callable[[R], Cfg]:
    def gen(r: R) -> Cfg:
        A, kv, hd = _heads(r)
        cfg: Cfg = {
            "model_type": model_type,
            "vocab_size": r.randint(50, 4000),
            "hidden_size": A * hd,
            "num_hidden_layers": r.randint(1, 4),
            "num_attention_heads": A,
            "intermediate_size": r.randint(4, 600),
        }
        # llama's default kv heads is A; the others' (qwen2 32, mistral/mixtral 8, gemma 16) rarely
        # divide a small A, so they always get one
        if model_type != "llama" or r.random() < 0.7:
            cfg["num_key_value_heads"] = kv
        if model_type == "gemma" or r.random() < 0.3:  # gemma's default head_dim is 256, not D/A
            cfg["head_dim"] = r.choice([8, 16, 40, 64])
        act = "gelu_pytorch_tanh" if model_type == "gemma" else "silu"
        _maybe(r, cfg, **_common_knobs(r), hidden_act=r.choice([act, "gelu", "silu"]))
        _maybe(r, cfg, attention_dropout=r.choice([0.0, 0.1]))
        if model_type in ("llama", "gemma", "mistral"):  # mistral ignores attention_bias
            _maybe(r, cfg, attention_bias=r.random() < 0.5)
        if model_type == "llama":
            _maybe(r, cfg, mlp_bias=r.random() < 0.5)
        if model_type == "mixtral":
            n = r.randint(1, 8)  # 1: a router over a single expert is still built
            cfg["num_local_experts"] = n
            cfg["num_experts_per_tok"] = r.randint(1, n)
        return cfg

    return gen


def gen_phi(r: R) -> Cfg:
    A, kv, hd = _heads(r)
    cfg: Cfg = {
        "model_type": "phi",
        "vocab_size": r.randint(50, 4000),
        "hidden_size": A * hd,
        "num_hidden_layers": r.randint(1, 4),
        "num_attention_heads": A,
        "intermediate_size": r.randint(4, 600),
    }
    _maybe(r, cfg, num_key_value_heads=kv, qk_layernorm=r.random() < 0.5, **_common_knobs(r))
    _maybe(r, cfg, hidden_act=r.choice(["gelu_new", "gelu", "relu"]), partial_rotary_factor=0.4)
    _maybe(r, cfg, resid_pdrop=0.1, embd_pdrop=0.05)
    return cfg


def gen_gpt_neox(r: R) -> Cfg:
    A, _, hd = _heads(r, gqa=False)
    cfg: Cfg = {
        "model_type": "gpt_neox",
        "vocab_size": r.randint(50, 4000),
        "hidden_size": A * hd,
        "num_hidden_layers": r.randint(1, 4),
        "num_attention_heads": A,
        "intermediate_size": r.randint(4, 600),
    }
    _maybe(r, cfg, attention_bias=r.random() < 0.5, use_parallel_residual=r.random() < 0.5)
    _maybe(r, cfg, hidden_act=r.choice(["gelu", "relu", "gelu_new"]), rotary_pct=0.25)
    _maybe(r, cfg, hidden_dropout=0.1, **_common_knobs(r))
    return cfg


def gen_gpt2_like(model_type: str) -> Callable[[R], Cfg]:
    def gen(r: R) -> Cfg:
        A, _, hd = _heads(r, gqa=False)
        cfg: Cfg = {
            "model_type": model_type,
            "vocab_size": r.randint(50, 4000),
            "n_embd": A * hd,
            "n_layer": r.randint(1, 4),
            "n_head": A,
        }
        _maybe(r, cfg, n_inner=r.randint(4, 600), n_positions=r.choice([64, 1024, 2048]))
        _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5, attn_pdrop=0.0, resid_pdrop=0.2)
        _maybe(r, cfg, activation_function=r.choice(["gelu_new", "relu", "gelu_pytorch_tanh"]))
        if model_type == "gpt_bigcode":
            _maybe(r, cfg, multi_query=r.random() < 0.5)
        if model_type == "gptj":
            _maybe(r, cfg, rotary_dim=hd // 2)
        return cfg

    return gen


def gen_falcon(r: R) -> Cfg:
    A, kv, hd = _heads(r)
    cfg: Cfg = {
        "model_type": "falcon",
        "vocab_size": r.randint(50, 4000),
        "hidden_size": A * hd,
        "num_hidden_layers": r.randint(1, 4),
        "num_attention_heads": A,
        "new_decoder_architecture": r.random() < 0.5,
    }
    if cfg["new_decoder_architecture"]:
        _maybe(r, cfg, num_kv_heads=kv, num_ln_in_parallel_attn=r.choice([None, 1, 2]))
    else:
        _maybe(r, cfg, multi_query=r.random() < 0.5, num_ln_in_parallel_attn=r.choice([None, 1, 2]))
    _maybe(r, cfg, parallel_attn=r.random() < 0.5, bias=r.random() < 0.5, alibi=r.random() < 0.3)
    _maybe(r, cfg, ffn_hidden_size=r.randint(4, 600), activation=r.choice(["gelu", "relu"]))
    _maybe(r, cfg, hidden_dropout=0.1, **_common_knobs(r))
    return cfg


def gen_opt(r: R) -> Cfg:
    A, _, hd = _heads(r, gqa=False)
    cfg: Cfg = {
        "model_type": "opt",
        "vocab_size": r.randint(50, 4000),
        "hidden_size": A * hd,
        "num_hidden_layers": r.randint(1, 4),
        "num_attention_heads": A,
        "ffn_dim": r.randint(4, 600),
    }
    _maybe(r, cfg, word_embed_proj_dim=r.choice([A * hd, r.randint(8, 200)]))
    _maybe(r, cfg, do_layer_norm_before=r.random() < 0.5, _remove_final_layer_norm=r.random() < 0.3)
    _maybe(r, cfg, enable_bias=r.random() < 0.5, activation_function=r.choice(["relu", "gelu"]))
    _maybe(r, cfg, layer_norm_elementwise_affine=r.random() < 0.7)
    _maybe(r, cfg, dropout=0.0, **_common_knobs(r))
    return cfg


def gen_bloom(r: R) -> Cfg:
    A, _, hd = _heads(r, gqa=False)
    cfg: Cfg = {
        "model_type": "bloom",
        "vocab_size": r.randint(50, 4000),
        r.choice(["hidden_size", "n_embed"]): A * hd,  # n_embed: BLOOM checkpoints' spelling
        r.choice(["n_layer", "num_hidden_layers"]): r.randint(1, 4),
        r.choice(["n_head", "num_attention_heads"]): A,
    }
    _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5, hidden_dropout=0.1)
    return cfg


GENERATORS: dict[str, Callable[[R], Cfg]] = {
    "llama": gen_llama_like("llama"),
    "mistral": gen_llama_like("mistral"),
    "mixtral": gen_llama_like("mixtral"),
    "qwen2": gen_llama_like("qwen2"),
    "gemma": gen_llama_like("gemma"),
    "phi": gen_phi,
    "gpt_neox": gen_gpt_neox,
    "gpt2": gen_gpt2_like("gpt2"),
    "gpt_bigcode": gen_gpt2_like("gpt_bigcode"),
    "gptj": gen_gpt2_like("gptj"),
    "falcon": gen_falcon,
    "opt": gen_opt,
    "bloom": gen_bloom,
}

# ------------------------------------------------------------------ edge cases (label, config)
_LL = {"vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 8,
       "intermediate_size": 688}  # fmt: skip
EDGE: list[tuple[str, Cfg]] = [
    # minimal: model_type and a couple of keys, everything else is the transformers default
    ("minimal", {"model_type": "llama", "num_hidden_layers": 2, "vocab_size": 1000}),
    ("minimal", {"model_type": "mistral", "num_hidden_layers": 1}),
    ("minimal", {"model_type": "mixtral", "num_hidden_layers": 1, "vocab_size": 500}),
    ("minimal", {"model_type": "qwen2", "num_hidden_layers": 1, "vocab_size": 500}),
    ("minimal", {"model_type": "gemma", "num_hidden_layers": 1, "vocab_size": 500}),
    ("minimal", {"model_type": "phi", "num_hidden_layers": 2}),
    ("minimal", {"model_type": "gpt_neox", "num_hidden_layers": 1, "hidden_size": 512, "num_attention_heads": 8}),
    ("minimal", {"model_type": "gpt2"}),
    ("minimal", {"model_type": "gpt_bigcode", "n_layer": 2}),
    ("minimal", {"model_type": "gptj", "n_layer": 1}),
    ("minimal", {"model_type": "falcon", "num_hidden_layers": 2}),
    ("minimal", {"model_type": "opt"}),
    ("minimal", {"model_type": "bloom"}),
    # llama-like
    ("gqa", {"model_type": "llama", **_LL, "num_key_value_heads": 2}),
    ("mqa-untied", {"model_type": "llama", **_LL, "num_key_value_heads": 1, "tie_word_embeddings": False}),
    ("head-dim-bias", {"model_type": "llama", **_LL, "head_dim": 48, "attention_bias": True}),
    ("mlp-bias-tied", {"model_type": "llama", **_LL, "mlp_bias": True, "tie_word_embeddings": True}),
    ("head-dim", {"model_type": "mistral", **_LL, "num_key_value_heads": 2, "head_dim": 64}),
    ("head-dim-indivisible", {"model_type": "mistral", "vocab_size": 500, "hidden_size": 90,
                              "num_hidden_layers": 1, "num_attention_heads": 4,
                              "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 100}),
    ("bias-ignored", {"model_type": "mistral", **_LL, "attention_bias": True, "mlp_bias": True}),
    ("moe-16x4", {"model_type": "mixtral", **_LL, "num_key_value_heads": 4, "num_local_experts": 16,
                  "num_experts_per_tok": 4}),
    ("moe-2x1-alias", {"model_type": "mixtral", **_LL, "num_experts": 2, "num_experts_per_tok": 1}),
    ("moe-1x1-router", {"model_type": "mixtral", **_LL, "num_local_experts": 1, "num_experts_per_tok": 1}),
    ("opt-no-affine", {"model_type": "opt", "vocab_size": 300, "hidden_size": 64, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "ffn_dim": 128, "layer_norm_elementwise_affine": False}),
    ("qkv-bias-tied", {"model_type": "qwen2", **_LL, "num_key_value_heads": 2, "tie_word_embeddings": True}),
    ("head-dim", {"model_type": "qwen2", **_LL, "num_key_value_heads": 8, "head_dim": 40}),
    ("mqa-attn-bias", {"model_type": "gemma", **_LL, "num_key_value_heads": 1, "attention_bias": True}),
    ("head-dim-d-over-a", {"model_type": "gemma", **_LL, "num_key_value_heads": 8, "head_dim": 32,
                           "hidden_act": "gelu"}),
    # phi
    ("qk-layernorm", {"model_type": "phi", **_LL, "qk_layernorm": True}),
    ("head-dim", {"model_type": "phi", **_LL, "head_dim": 48, "num_key_value_heads": 4}),
    ("gqa-tied", {"model_type": "phi", **_LL, "num_key_value_heads": 2, "tie_word_embeddings": True}),
    # gpt-neox
    ("no-bias-sequential", {"model_type": "gpt_neox", **_LL, "attention_bias": False,
                            "use_parallel_residual": False, "tie_word_embeddings": True}),
    # gpt2 family
    ("untied-inner", {"model_type": "gpt2", "n_embd": 128, "n_head": 4, "n_layer": 2, "vocab_size": 999,
                      "n_inner": 300, "tie_word_embeddings": False}),
    ("aliases", {"model_type": "gpt2", "hidden_size": 96, "num_attention_heads": 3, "num_hidden_layers": 2,
                 "max_position_embeddings": 77, "vocab_size": 500}),
    ("mha", {"model_type": "gpt_bigcode", "n_embd": 128, "n_head": 4, "n_layer": 2, "vocab_size": 999,
             "multi_query": False}),
    ("mqa-untied", {"model_type": "gpt_bigcode", "n_embd": 128, "n_head": 8, "n_layer": 2, "vocab_size": 999,
                    "multi_query": True, "tie_word_embeddings": False}),
    ("tied", {"model_type": "gptj", "n_embd": 128, "n_head": 4, "n_layer": 2, "vocab_size": 999,
              "rotary_dim": 16, "tie_word_embeddings": True}),
    # falcon: old architecture (multi_query, 1 norm), new (num_kv_heads, ln_attn/ln_mlp)
    ("old-mqa-parallel", {"model_type": "falcon", "hidden_size": 256, "num_attention_heads": 8,
                          "num_hidden_layers": 2, "vocab_size": 1000, "multi_query": True}),
    ("old-mha-sequential-bias", {"model_type": "falcon", "hidden_size": 256, "num_attention_heads": 8,
                                 "num_hidden_layers": 2, "vocab_size": 1000, "multi_query": False,
                                 "parallel_attn": False, "bias": True, "alibi": True}),
    ("new-gqa-2ln", {"model_type": "falcon", "hidden_size": 256, "num_attention_heads": 8,
                     "num_hidden_layers": 2, "vocab_size": 1000, "new_decoder_architecture": True,
                     "num_kv_heads": 2, "tie_word_embeddings": False}),
    ("new-gqa-1ln", {"model_type": "falcon", "hidden_size": 256, "num_attention_heads": 8,
                     "num_hidden_layers": 2, "vocab_size": 1000, "new_decoder_architecture": True,
                     "num_kv_heads": 4, "num_ln_in_parallel_attn": 1, "ffn_hidden_size": 700}),
    ("n-embed-alias", {"model_type": "falcon", "n_embed": 128, "num_attention_heads": 4,
                       "num_hidden_layers": 1, "vocab_size": 300}),
    # opt: d_embed != D with projections, post-LN (no final norm), no biases
    ("proj-post-ln", {"model_type": "opt", "hidden_size": 256, "num_attention_heads": 8,
                      "num_hidden_layers": 2, "ffn_dim": 1024, "vocab_size": 1000,
                      "word_embed_proj_dim": 128, "do_layer_norm_before": False}),
    ("no-bias-no-final-ln", {"model_type": "opt", "hidden_size": 256, "num_attention_heads": 8,
                             "num_hidden_layers": 2, "ffn_dim": 512, "vocab_size": 1000,
                             "enable_bias": False, "_remove_final_layer_norm": True,
                             "tie_word_embeddings": False}),
    # bloom
    ("untied", {"model_type": "bloom", "hidden_size": 128, "n_head": 4, "n_layer": 2, "vocab_size": 999,
                "tie_word_embeddings": False}),
]  # fmt: skip

# ------------------------------------------------------------------ real published shapes
# (label, config as in the checkpoint's config.json (shape keys), published total)
REAL: list[tuple[str, Cfg, int | None]] = [
    ("gpt2-124m", {"model_type": "gpt2", "_name_or_path": "gpt2", "activation_function": "gelu_new",
                   "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
                   "vocab_size": 50257, "attn_pdrop": 0.1, "embd_pdrop": 0.1, "resid_pdrop": 0.1},
     124_439_808),
    ("llama-2-7b", {"model_type": "llama", "_name_or_path": "meta-llama/Llama-2-7b-hf",
                    "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 11008,
                    "max_position_embeddings": 4096, "num_attention_heads": 32,
                    "num_hidden_layers": 32, "num_key_value_heads": 32, "pretraining_tp": 1,
                    "rms_norm_eps": 1e-05, "rope_scaling": None, "tie_word_embeddings": False,
                    "torch_dtype": "float16", "vocab_size": 32000}, 6_738_415_616),
    ("mistral-7b-v0.1", {"model_type": "mistral", "_name_or_path": "mistralai/Mistral-7B-v0.1",
                         "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
                         "max_position_embeddings": 32768, "num_attention_heads": 32,
                         "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
                         "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": False,
                         "vocab_size": 32000}, 7_241_732_096),
    ("mixtral-8x7b", {"model_type": "mixtral", "_name_or_path": "mistralai/Mixtral-8x7B-v0.1",
                      "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
                      "max_position_embeddings": 32768, "num_attention_heads": 32,
                      "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
                      "num_local_experts": 8, "rope_theta": 1000000.0, "tie_word_embeddings": False,
                      "vocab_size": 32000}, 46_702_792_704),
    ("falcon-7b", {"model_type": "falcon", "_name_or_path": "tiiuae/falcon-7b", "alibi": False,
                   "bias": False, "hidden_size": 4544, "multi_query": True,
                   "new_decoder_architecture": False, "num_attention_heads": 71,
                   "num_hidden_layers": 32, "parallel_attn": True, "vocab_size": 65024},
     6_921_720_704),
    ("falcon-40b", {"model_type": "falcon", "_name_or_path": "tiiuae/falcon-40b", "alibi": False,
                    "bias": False, "hidden_size": 8192, "new_decoder_architecture": True,
                    "num_attention_heads": 128, "num_hidden_layers": 60, "num_kv_heads": 8,
                    "parallel_attn": True, "vocab_size": 65024}, 41_303_293_952),
    ("gemma-2b", {"model_type": "gemma", "_name_or_path": "google/gemma-2b", "head_dim": 256,
                  "hidden_act": "gelu", "hidden_size": 2048, "intermediate_size": 16384,
                  "max_position_embeddings": 8192, "num_attention_heads": 8, "num_hidden_layers": 18,
                  "num_key_value_heads": 1, "vocab_size": 256000}, 2_506_172_416),
    ("phi-2", {"model_type": "phi", "_name_or_path": "microsoft/phi-2", "hidden_act": "gelu_new",
               "hidden_size": 2560, "intermediate_size": 10240, "max_position_embeddings": 2048,
               "num_attention_heads": 32, "num_hidden_layers": 32, "partial_rotary_factor": 0.4,
               "qk_layernorm": False, "tie_word_embeddings": False, "vocab_size": 51200},
     2_779_683_840),
    ("opt-350m", {"model_type": "opt", "_name_or_path": "facebook/opt-350m",
                  "activation_function": "relu", "do_layer_norm_before": False, "ffn_dim": 4096,
                  "hidden_size": 1024, "max_position_embeddings": 2048, "num_attention_heads": 16,
                  "num_hidden_layers": 24, "vocab_size": 50272, "word_embed_proj_dim": 512},
     331_196_416),
    ("bloom-560m", {"model_type": "bloom", "_name_or_path": "bigscience/bloom-560m", "n_embed": 1024,
                    "n_head": 16, "n_layer": 24, "vocab_size": 250880}, 559_214_592),
    ("pythia-160m", {"model_type": "gpt_neox", "_name_or_path": "EleutherAI/pythia-160m",
                     "hidden_act": "gelu", "hidden_size": 768, "intermediate_size": 3072,
                     "max_position_embeddings": 2048, "num_attention_heads": 12,
                     "num_hidden_layers": 12, "rotary_pct": 0.25, "tie_word_embeddings": False,
                     "use_parallel_residual": True, "vocab_size": 50304}, 162_322_944),
    ("gpt-j-6b", {"model_type": "gptj", "_name_or_path": "EleutherAI/gpt-j-6b",
                  "activation_function": "gelu_new", "n_embd": 4096, "n_head": 16, "n_layer": 28,
                  "n_positions": 2048, "rotary_dim": 64, "tie_word_embeddings": False,
                  "vocab_size": 50400}, 6_050_882_784),
    ("qwen2-0.5b", {"model_type": "qwen2", "_name_or_path": "Qwen/Qwen2-0.5B", "hidden_act": "silu",
                    "hidden_size": 896, "intermediate_size": 4864, "max_position_embeddings": 131072,
                    "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
                    "tie_word_embeddings": True, "vocab_size": 151936}, 494_032_768),
    ("starcoder", {"model_type": "gpt_bigcode", "_name_or_path": "bigcode/starcoder",
                   "activation_function": "gelu_pytorch_tanh", "multi_query": True, "n_embd": 6144,
                   "n_head": 48, "n_inner": 24576, "n_layer": 40, "n_positions": 8192,
                   "vocab_size": 49152}, None),  # "15.5B": no exact published total
]  # fmt: skip


# The 2024-2026 families' generators, edge cases and real shapes live beside this file.
import hf_cases_2024  # noqa: E402

GENERATORS.update(hf_cases_2024.GENERATORS)
EDGE += hf_cases_2024.EDGE
REAL += hf_cases_2024.REAL
# The hybrid families (Gated DeltaNet, ...): hf_cases_hybrid.py.
import hf_cases_hybrid  # noqa: E402

GENERATORS.update(hf_cases_hybrid.GENERATORS)
EDGE += hf_cases_hybrid.EDGE
# The 2025-26 attention-only families (issue 22).
import hf_cases_2025  # noqa: E402

GENERATORS.update(hf_cases_2025.GENERATORS)
EDGE += hf_cases_2025.EDGE

# Gemma 4 (issue 22): hf_cases_gemma4.py.
import hf_cases_gemma4  # noqa: E402

GENERATORS.update(hf_cases_gemma4.GENERATORS)
EDGE += hf_cases_gemma4.EDGE
REAL += hf_cases_gemma4.REAL

WRAPPED_TEXT = {"gemma3": "gemma3_text", "llama4": "llama4_text", "mistral3": "mistral"}
# DeepSeek-V4 (issue 22): hf_cases_deepseek_v4.py.
import hf_cases_deepseek_v4  # noqa: E402

GENERATORS.update(hf_cases_deepseek_v4.GENERATORS)
EDGE += hf_cases_deepseek_v4.EDGE

# The multimodal wrappers with random vision towers (issue 22): hf_cases_towers.py, alternating with
# the text-only-varied generators above from the same random stream.
import hf_cases_towers  # noqa: E402

for _type, _gen in hf_cases_towers.GENERATORS.items():
    _mine = GENERATORS.get(_type)
    GENERATORS[_type] = _gen if _mine is None else (lambda a, b: lambda r: (a if r.random() < 0.5 else b)(r))(_mine, _gen)
EDGE += hf_cases_towers.EDGE

# Module names of the parts of a multimodal model that are not the language model.
import re  # noqa: E402

TOWER_MODULE = re.compile(r"(?:^|\.)(?:vision_tower|vision_model|visual|audio_tower|multi_modal_projector|mm_projector"
                          r"|embed_vision|embed_audio)\.")
# The auto class of a wrapper that is not an image-text-to-text model (modeling_auto.py mappings).
WRAPPER_AUTO = {"voxtral": AutoModelForSpeechSeq2Seq}


# ------------------------------------------------------------------ counting
def transformers_count(cfg: Cfg) -> tuple[int, Cfg, int]:
    """Parameters transformers builds from `cfg`, the full config dict it would save, and the
    towers' part (parameters under a vision/projector module; 0 for a text-only model).

    A multimodal wrapper is built as AutoModelForImageTextToText builds it (the
    *ForConditionalGeneration class: language model, vision tower, projector).
    """
    from transformer_calc.sources.hf import SAME_AS, WRAPPERS

    if cfg["model_type"] in SAME_AS:  # e.g. kimi_k2: DeepseekV3ForCausalLM (remote code)
        cfg = {**cfg, "model_type": SAME_AS[cfg["model_type"]]}
    config = CONFIG_MAPPING[cfg["model_type"]].from_dict(dict(cfg))
    full = json.loads(config.to_json_string(use_diff=False))
    auto = WRAPPER_AUTO.get(cfg["model_type"], AutoModelForImageTextToText) if cfg["model_type"] in WRAPPERS else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config)
    towers = sum(p.numel() for name, p in model.named_parameters() if TOWER_MODULE.search(name))
    return sum(p.numel() for p in model.parameters()), full, towers


def tcalc_count(cfg: Cfg, text_only: bool = False) -> int:
    return total_params(ModelConfig.model_validate(from_hf_config(cfg, text_only=text_only)))


def tcalc_towers(cfg: Cfg) -> int:
    return ModelConfig.model_validate(from_hf_config(cfg)).tower_params


def cases(n: int, seed: int) -> list[tuple[str, str, Cfg, int | None]]:
    """(model_type, label, config, published total or None)."""
    rng = random.Random(seed)
    out: list[tuple[str, str, Cfg, int | None]] = []
    for model_type in (t for t in SUPPORTED_MODEL_TYPES if t in GENERATORS):
        out += [(model_type, f"random-{i}", GENERATORS[model_type](rng), None) for i in range(n)]
    out += [(cfg["model_type"], label, cfg, None) for label, cfg in EDGE]
    out += [(cfg["model_type"], label, cfg, total) for label, cfg, total in REAL]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20, help="random shapes per model_type")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write-fixtures", type=Path, metavar="DIR", help="write test fixtures here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    ap.add_argument("--types", help="only these model_types (comma-separated)")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()

    start = time.perf_counter()
    rows: dict[str, list[int]] = {t: [0, 0] for t in SUPPORTED_MODEL_TYPES if t in GENERATORS}  # cases, mismatches
    failures: list[str] = []
    fixtures: list[tuple[str, str, Cfg, int, int | None]] = []
    only = set(args.types.split(",")) if args.types else None
    if only:
        rows = {t: r for t, r in rows.items() if t in only}
    for model_type, label, cfg, published in cases(args.n, args.seed):
        if only and model_type not in only:
            continue
        rows.setdefault(model_type, [0, 0])
        rows[model_type][0] += 1
        try:
            expected, full, towers = transformers_count(cfg)
            got, got_full = tcalc_count(cfg), tcalc_count(full)
            got_towers = tcalc_towers(cfg)
            got_text = tcalc_count(cfg, text_only=True)
        except Exception as exc:  # a generator bug or a tcalc refusal: both are failures here
            failures.append(f"{model_type}/{label}: {type(exc).__name__}: {exc} -- {cfg}")
            rows[model_type][1] += 1
            continue
        bad = [f"{what}={v:,}" for what, v in (("dict", got), ("full", got_full)) if v != expected]
        if got_towers != towers:
            bad.append(f"towers={got_towers:,} (transformers {towers:,})")
        if got_text != expected - towers:
            bad.append(f"text_only={got_text:,} (transformers {expected - towers:,})")
        if published is not None and published != expected:
            bad.append(f"published={published:,}")
        if bad:
            rows[model_type][1] += 1
            failures.append(f"{model_type}/{label}: transformers={expected:,} {' '.join(bad)} -- {cfg}")
        elif args.verbose:
            print(f"ok {model_type}/{label}: {expected:,}")
        fixtures.append((model_type, label, cfg, expected, published))
        if label == "random-0":
            fixtures.append((model_type, "full", full, expected, None))
    elapsed = time.perf_counter() - start

    print(f"{'model_type':<12} {'cases':>6} {'mismatches':>10}")
    for model_type, (n_cases, n_bad) in rows.items():
        print(f"{model_type:<12} {n_cases:>6} {n_bad:>10}")
    total_cases = sum(r[0] for r in rows.values())
    print(f"{'total':<12} {total_cases:>6} {len(failures):>10}   ({elapsed:.1f} s, transformers "
          f"{transformers.__version__}, torch {torch.__version__})")
    for line in failures:
        print("MISMATCH", line)
    if args.write_fixtures and not failures:
        write_fixtures(args.write_fixtures, fixtures)
    return 1 if failures else 0


FIXTURE_RANDOM = 1  # random shapes kept per model_type (plus edge, minimal, full, real ones)


def write_fixtures(directory: Path, fixtures: list[tuple[str, str, Cfg, int, int | None]]) -> None:
    """A few configs per model_type: minimal, edge cases, one random, one full save, real shapes."""
    directory.mkdir(parents=True, exist_ok=True)
    written = 0
    for model_type, label, cfg, expected, published in fixtures:
        if label.startswith("random-") and int(label.split("-")[1]) >= FIXTURE_RANDOM:
            continue
        body = {"config": cfg, "expected_params": expected, "transformers_version": transformers.__version__}
        if published is not None:  # the checkpoint's published total (model card / paper)
            body["published_params"] = published
        path = directory / f"{model_type}_{label}.json"
        path.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
        written += 1
    print(f"wrote {written} fixtures to {directory}")


if __name__ == "__main__":
    sys.exit(main())
