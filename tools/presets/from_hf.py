"""Print presets/models.yaml entries made from Hugging Face config.json values.

The 2024-2026 presets are not typed by hand: each is `transformer_calc.hf.from_hf_config` of the
model's published config.json (tools/crosscheck/published_configs, whose SOURCES.md says where
each copy was read) or, where only the architecture values were found, of the values in
EXTRA below with their source. `expected_params` is what transformers 5.23 builds from the same
values on the meta device; tools/crosscheck/verify_presets.py checks every entry again in CI.

    PYTHONPATH=. python tools/presets/from_hf.py > /tmp/new-presets.yaml   # then review and paste

Needs torch and transformers.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
PUBLISHED = REPO / "tools" / "crosscheck" / "published_configs"

# Architecture values found in a stored source, but no verbatim config.json (SOURCES.md, "Not
# found"): the config keys transformers reads, with the source of the numbers.
EXTRA: dict[str, tuple[str, str, dict[str, Any]]] = {
    "gemma-2-27b": ("google/gemma-2-27b", "values from Google's AI-Hypercomputer/maxtext "
                    "MaxText/utils/ckpt_conversion/utils/hf_model_configs.py (gemma2_27b_config)",
                    {"model_type": "gemma2", "num_hidden_layers": 46, "num_attention_heads": 32,
                     "num_key_value_heads": 16, "hidden_size": 4608, "intermediate_size": 36864,
                     "head_dim": 128, "sliding_window": 4096, "query_pre_attn_scalar": 144,
                     "vocab_size": 256000, "max_position_embeddings": 8192}),
    "gemma-3-12b": ("google/gemma-3-12b-it", "values from NVIDIA Megatron-Bridge's Gemma3ModelProvider12B test "
                    "(48 layers, 3840, 16 heads, 8 groups, kv_channels 256, ffn 15360, window 1024, vocab 262208)",
                    {"model_type": "gemma3_text", "num_hidden_layers": 48, "hidden_size": 3840,
                     "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
                     "intermediate_size": 15360, "sliding_window": 1024, "vocab_size": 262208,
                     "max_position_embeddings": 131072}),
    "gemma-3-27b": ("google/gemma-3-27b-it", "values from NVIDIA Megatron-Bridge's Gemma3ModelProvider27B test "
                    "(62 layers, 5376, 32 heads, 16 groups, kv_channels 128, ffn 21504, window 1024, vocab 262208)",
                    {"model_type": "gemma3_text", "num_hidden_layers": 62, "hidden_size": 5376,
                     "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
                     "intermediate_size": 21504, "sliding_window": 1024, "vocab_size": 262208,
                     "max_position_embeddings": 131072, "query_pre_attn_scalar": 168}),
    "llama-4-scout": ("meta-llama/Llama-4-Scout-17B-16E", "text_config values from ai-dynamo/aiconfigurator "
                      "model_configs/meta-llama--Llama-4-Scout-17B-16E-Instruct_config.json (a trimmed copy)",
                      {"model_type": "llama4_text", "num_hidden_layers": 48, "hidden_size": 5120,
                       "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
                       "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
                       "intermediate_size": 8192, "intermediate_size_mlp": 16384, "attention_chunk_size": 8192,
                       "max_position_embeddings": 10485760, "vocab_size": 202048, "use_qk_norm": True}),
    "llama-4-maverick": ("meta-llama/Llama-4-Maverick-17B-128E", "text_config values from ai-dynamo/aiconfigurator "
                         "model_configs/meta-llama--Llama-4-Maverick-17B-128E-Instruct_config.json (a trimmed copy)",
                         {"model_type": "llama4_text", "num_hidden_layers": 48, "hidden_size": 5120,
                          "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
                          "num_local_experts": 128, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2,
                          "intermediate_size": 8192, "intermediate_size_mlp": 16384, "attention_chunk_size": 8192,
                          "max_position_embeddings": 1048576, "vocab_size": 202048, "use_qk_norm": False}),
}
ALIASES = {"deepseek-v3": ["deepseek-r1", "deepseek-v3-671b"], "kimi-k2": ["kimi-k2-instruct"],
           "qwen3-30b-a3b": ["qwen3-moe-30b"], "gpt-oss-120b": ["gpt-oss"], "llama-3.1-8b": ["llama3.1-8b"],
           "llama-3.1-70b": ["llama3.1-70b"], "llama-3.1-405b": ["llama3.1-405b"]}
FAMILY = {"llama": "llama", "qwen2": "qwen2.5", "qwen3": "qwen3", "qwen3_moe": "qwen3", "deepseek_v3": "deepseek",
          "kimi_k2": "kimi", "gpt_oss": "gpt-oss", "gemma2": "gemma2", "gemma3_text": "gemma3", "phi3": "phi",
          "olmo2": "olmo2", "llama4_text": "llama4"}


def repo_ids() -> dict[str, str]:
    ids = {}
    for line in (PUBLISHED / "SOURCES.md").read_text().splitlines():
        m = re.match(r"\| ([a-z0-9.\-]+) \| ([^ |]+)", line)
        if m and "/" in m.group(2):
            ids[m.group(1)] = m.group(2)
    return ids


def transformers_count(cfg: dict[str, Any]) -> int:
    sys.path.insert(0, str(REPO / "tools" / "crosscheck"))
    from hf_params import transformers_count as count

    return count(cfg)[0]


def entry(name: str, cfg: dict[str, Any], repo: str, where: str) -> str:
    from transformer_calc.config import ModelConfig
    from transformer_calc.hf import from_hf_config
    from transformer_calc.params import count_params

    spec = from_hf_config(cfg)
    spec.pop("source", None)
    spec.pop("name", None)
    total = count_params(ModelConfig.model_validate(spec)).total
    built = transformers_count(cfg)
    assert total == built, (name, total, built)
    model_type = cfg["model_type"]
    fields = ", ".join(f"{k}: {json.dumps(v)}" for k, v in spec.items())
    lines = [
        f"  {name}:",
        f"    family: {FAMILY.get(model_type, model_type)}",
    ]
    if name in ALIASES:
        lines.append(f"    aliases: [{', '.join(ALIASES[name])}]")
    lines += [
        f"    hf_model_type: {'deepseek_v3' if model_type == 'kimi_k2' else model_type}",
        f'    source: "https://huggingface.co/{repo}/blob/main/config.json; {where}"',
        f"    expected_params: {built}",
        f"    model: {{{fields}}}",
    ]
    return "\n".join(lines)


def main() -> int:
    import transformers

    transformers.logging.set_verbosity_error()
    ids = repo_ids()
    for path in sorted(PUBLISHED.glob("*.json")):
        cfg = json.loads(path.read_text())
        print(entry(path.stem, cfg, ids[path.stem], "read from the copy named in tools/crosscheck/published_configs/SOURCES.md"))
    for name, (repo, where, cfg) in EXTRA.items():
        print(entry(name, cfg, repo, where))
    return 0


if __name__ == "__main__":
    sys.exit(main())
