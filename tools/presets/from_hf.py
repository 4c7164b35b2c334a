"""Print presets/models.yaml entries made from Hugging Face config.json values.

The 2024-2026 presets are not typed by hand: each is `transformer_calc.sources.hf.from_hf_config` of the
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
    "gemma-3-1b": ("google/gemma-3-1b-pt", "values from NVIDIA Megatron-Bridge @84ad9907 "
                   "src/megatron/bridge/models/gemma/gemma3_provider.py, Gemma3ModelProvider1B (26 layers, 1152, "
                   "4 heads, 1 group, kv_channels 256, ffn 6912, window 512, seq 32768, vocab 262144, shared "
                   "embeddings), and "
                   "tests/unit_tests/models/gemma/test_gemma3_bridge.py (gemma3_1b_config_dict: "
                   "query_pre_attn_scalar 256)",
                   {"model_type": "gemma3_text", "num_hidden_layers": 26, "hidden_size": 1152,
                    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
                    "intermediate_size": 6912, "sliding_window": 512, "vocab_size": 262144,
                    "max_position_embeddings": 32768, "query_pre_attn_scalar": 256,
                    "tie_word_embeddings": True}),
    "gemma-3-4b": ("google/gemma-3-4b-pt", "text_config values from NVIDIA Megatron-Bridge @84ad9907 "
                   "src/megatron/bridge/models/gemma/gemma3_provider.py, Gemma3ModelProvider4B (34 layers, 2560, "
                   "8 heads, 4 groups, kv_channels 256, ffn 10240, window 1024, vocab 262208, shared embeddings, "
                   "seq 131072 from the Gemma3ModelProvider base) and tests/unit_tests/models/gemma/"
                   "test_gemma3_bridge.py (gemma3_4b_config_dict: same values, query_pre_attn_scalar 256); "
                   "AI-Hypercomputer/maxtext hf_model_configs.py gemma3_4b_config agrees except vocab_size 262144",
                   {"model_type": "gemma3_text", "num_hidden_layers": 34, "hidden_size": 2560,
                    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "intermediate_size": 10240, "sliding_window": 1024, "vocab_size": 262208,
                    "max_position_embeddings": 131072, "query_pre_attn_scalar": 256,
                    "tie_word_embeddings": True}),
    "qwen2.5-72b": ("Qwen/Qwen2.5-72B", "values from NVIDIA Megatron-Bridge @8c6c6534 "
                    "src/megatron/bridge/models/qwen/qwen_provider.py, Qwen25ModelProvider72B (80 layers, 8192, "
                    "64 heads, 8 groups, ffn 29568, vocab 152064, qkv bias, untied embeddings); "
                    "max_position_embeddings 131072 is an assumption taken from the Qwen2.5-7B base config "
                    "(published_configs/qwen2.5-7b.json has 131072 where Megatron-Bridge's Qwen25ModelProvider7B "
                    "has seq_length 32768, the same as its 72B)",
                    {"model_type": "qwen2", "num_hidden_layers": 80, "hidden_size": 8192,
                     "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 29568,
                     "vocab_size": 152064, "max_position_embeddings": 131072, "tie_word_embeddings": False}),
    "mistral-nemo-12b": ("mistralai/Mistral-Nemo-Base-2407", "values from kevinstephano/thunder_model_blocks "
                         "@5c083b0e thunder_model_blocks/mistral/mistral_config.py (an AutoConfig dump of "
                         "mistralai/Mistral-Nemo-Base-2407 with _name_or_path, transformers 4.43.3: 40 layers, "
                         "5120, 32 heads, 8 kv, head_dim 128, ffn 14336, vocab 131072, max_pos 128000, "
                         "sliding_window null, untied); NVIDIA Megatron-Bridge @d8a6b8ec "
                         "src/megatron/bridge/models/mistral/mistral_provider.py MistralNemoModelProvider agrees",
                         {"model_type": "mistral", "num_hidden_layers": 40, "hidden_size": 5120,
                          "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                          "intermediate_size": 14336, "vocab_size": 131072, "max_position_embeddings": 128000,
                          "sliding_window": None, "tie_word_embeddings": False}),
    "mistral-small-24b": ("mistralai/Mistral-Small-24B-Base-2501", "values from NVIDIA Megatron-Bridge @84ad9907 "
                          "src/megatron/bridge/models/mistral/mistral_provider.py, MistralSmall3ModelProvider24B "
                          "(40 layers, 5120, 32 heads, kv_channels 128, ffn 32768, seq 32768, vocab 131072, "
                          "window None) with 8 query groups and untied embeddings from MistralModelProvider; "
                          "tests/functional_tests/test_groups/models/mistral/test_mistral_provider.py checks it "
                          "against mistralai/Mistral-Small-24B-Instruct-2501, assumed to have the Base model's "
                          "architecture",
                          {"model_type": "mistral", "num_hidden_layers": 40, "hidden_size": 5120,
                           "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                           "intermediate_size": 32768, "vocab_size": 131072, "max_position_embeddings": 32768,
                           "sliding_window": None, "tie_word_embeddings": False}),
    "glm-4.5-air": ("zai-org/GLM-4.5-Air", "values from NVIDIA Megatron-Bridge @067f987d "
                    "tests/unit_tests/models/glm/test_glm45_bridge.py (glm45_air_106b_config, a mock of the HF "
                    "config: 46 layers, 4096, 96 heads, 8 kv, head_dim 128, ffn 10944, moe 1408, 128 routed + 1 "
                    "shared, top-8, first_k_dense 1, partial_rotary 0.5, attention_bias true, use_qk_norm false, "
                    "vocab 151552, max_pos 131072, untied), matching docs/models/glm/glm45.md there and "
                    "THUDM/slime scripts/models/glm4.5-106B-A12B.sh; num_nextn_predict_layers 1 is the "
                    "Glm4MoeConfig default (not in those sources; it does not change the count)",
                    {"model_type": "glm4_moe", "num_hidden_layers": 46, "hidden_size": 4096,
                     "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
                     "intermediate_size": 10944, "moe_intermediate_size": 1408, "n_routed_experts": 128,
                     "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 1,
                     "partial_rotary_factor": 0.5, "use_qk_norm": False, "attention_bias": True,
                     "vocab_size": 151552, "max_position_embeddings": 131072, "tie_word_embeddings": False,
                     "num_nextn_predict_layers": 1}),
    # issue 22: no verbatim config.json of these was found (SOURCES.md, "Not found"); the values are sourced here
    "deepseek-v3.2": ("deepseek-ai/DeepSeek-V3.2", "DeepSeek-V3's published config.json (published_configs/deepseek-v3.json: "
                      "DeepSeek-V3.2 keeps its shapes, DeepSeek-V3.2 tech report §2) with model_type deepseek_v32 and the "
                      "indexer of DeepSeek-V3.2-Exp's inference/config_671B_v3.2.json (index_n_heads 64, index_head_dim "
                      "128, index_topk 2048; the same in hicann/cann-recipes-train DeepSeekV32ModelArgs and transformers "
                      "5.23's DeepseekV32Config defaults); 163840 context per xorbitsai/inference's DeepSeek-V3.2 spec",
                      {**{k: v for k, v in json.loads((PUBLISHED / "deepseek-v3.json").read_text()).items()
                          if k not in ("auto_map", "architectures", "_name_or_path")},
                       "model_type": "deepseek_v32", "index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048}),
    "glm-5": ("zai-org/GLM-5", "values from ai-dynamo/aiconfigurator @691ec908 src/aiconfigurator/model_configs/"
              "zai-org--GLM-5-FP8_config.json (a trimmed copy: 78 layers, 6144, 64 heads, ffn 12288, moe 2048, 256 routed "
              "+ 1 shared, top-8, 3 dense, q_lora 2048, kv_lora 512, qk 192+64, v 256, vocab 154880, max_pos 202752); the "
              "indexer (index_topk 2048, index_n_heads 32, index_head_dim 128, every layer its own indexer) is "
              "transformers 5.23's GlmMoeDsaConfig default, not in that copy; num_nextn_predict_layers 1 from "
              "GlmMoeDsaModel._keys_to_ignore_on_load_unexpected (model.layers.78, one MTP layer)",
              {"model_type": "glm_moe_dsa", "num_hidden_layers": 78, "hidden_size": 6144, "num_attention_heads": 64,
               "num_key_value_heads": 64, "intermediate_size": 12288, "vocab_size": 154880,
               "max_position_embeddings": 202752, "n_routed_experts": 256, "n_shared_experts": 1,
               "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "first_k_dense_replace": 3,
               "kv_lora_rank": 512, "q_lora_rank": 2048, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64,
               "v_head_dim": 256, "tie_word_embeddings": False, "index_topk": 2048, "index_n_heads": 32,
               "index_head_dim": 128, "num_nextn_predict_layers": 1}),
    "glm-4.7-flash": ("zai-org/GLM-4.7-Flash", "values from ai-dynamo/aiconfigurator @19d098ad src/aiconfigurator/"
                      "model_configs/zai-org--GLM-4.7-Flash_config.json (a trimmed copy: 47 layers, 2048, 20 heads, ffn "
                      "10240, moe 1536, 64 routed + 1 shared, top-4, 1 dense layer, q_lora 768, kv_lora 512, qk 192+64, "
                      "v 256, vocab 154880, max_pos 202752, untied)",
                      {"model_type": "glm4_moe_lite", "num_hidden_layers": 47, "hidden_size": 2048,
                       "num_attention_heads": 20, "num_key_value_heads": 20, "intermediate_size": 10240,
                       "vocab_size": 154880, "max_position_embeddings": 202752, "n_routed_experts": 64,
                       "n_shared_experts": 1, "num_experts_per_tok": 4, "moe_intermediate_size": 1536,
                       "kv_lora_rank": 512, "q_lora_rank": 768, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64,
                       "v_head_dim": 256, "tie_word_embeddings": False}),
    "minimax-m2.5": ("MiniMaxAI/MiniMax-M2.5", "values from a third-party test fixture found by content search "
                     "(MINIMAX_M25_CONFIG: 62 layers, 3072, 48 heads, 8 kv, head_dim 128, ffn 1536, 256 experts, top-8, "
                     "vocab 200064, untied, FP8; 'M2.1 has identical architecture to M2.5'); max_position_embeddings "
                     "196608 is transformers 5.23's MiniMaxM2Config default (MiniMax-M2's); its 3 MTP modules are not "
                     "built by transformers",
                     {"model_type": "minimax_m2", "num_hidden_layers": 62, "hidden_size": 3072,
                      "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 1536,
                      "vocab_size": 200064, "num_local_experts": 256, "num_experts_per_tok": 8,
                      "max_position_embeddings": 196608, "tie_word_embeddings": False,
                      "quantization_config": {"quant_method": "fp8", "fmt": "float8_e4m3fn"}}),
    "olmo-3-32b": ("allenai/Olmo-3-1125-32B", "shape from marin-community/marin experiments/qwen3.py ('same as olmo 32b': "
                   "64 layers, 5120, 40 heads, 8 kv heads, ffn 27648); vocab_size 100278, 65536 context, sliding window "
                   "4096 on three of every four layers (configuration_olmo3.py's layer_types) are assumptions from "
                   "the OLMo 3 release (Dolma 3 tokenizer, 65K context), not read from a stored copy",
                   {"model_type": "olmo3", "num_hidden_layers": 64, "hidden_size": 5120, "num_attention_heads": 40,
                    "num_key_value_heads": 8, "intermediate_size": 27648, "vocab_size": 100278,
                    "max_position_embeddings": 65536, "sliding_window": 4096, "tie_word_embeddings": False}),
    "smollm3-3b": ("HuggingFaceTB/SmolLM3-3B", "values from a third-party test's 'authoritative copy of "
                   "HuggingFaceTB/SmolLM3-3B/config.json's shape' found by content search (36 layers, 2048, 16 heads, "
                   "4 kv, head_dim 128, ffn 11008, vocab 128256, max_pos 65536, tied, no_rope_layer_interval 4); "
                   "use_sliding_window false is the SmolLM3Config default; the blog post huggingface/blog smollm3.md "
                   "agrees (3B, GQA, NoPE every 4th layer)",
                   {"model_type": "smollm3", "num_hidden_layers": 36, "hidden_size": 2048, "num_attention_heads": 16,
                    "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 11008, "vocab_size": 128256,
                    "max_position_embeddings": 65536, "tie_word_embeddings": True, "no_rope_layer_interval": 4,
                    "use_sliding_window": False}),
    # Gemma 4 (issue 22): no stored config.json copy (SOURCES.md "Gemma 4"); text values as third-party code quotes
    # the released configs, the vision tower as a Go test of ollama's MLX runner quotes the 26B A4B's
    # vision_config, with the three values it omits (intermediate_size 4304, num_key_value_heads 16,
    # position_embedding_size 10240) fixed by the Hub's safetensors count of google/gemma-4-31B, which this
    # config matches exactly (docs/validation.md "Gemma 4")
    "gemma-4-31b": ("google/gemma-4-31B-it", "reconstructed: text_config as quoted by third-party code (GEMMA4_31B_CONFIG "
                    "for google/gemma-4-31B; an EXPECTED_CONFIG for google/gemma-4-31B-it-qat-w4a16-ct; a Rust test's "
                    "copy), vision_config as ollama's x/mlxrunner gemma4 test quotes it; its whole count equals the "
                    "Hub's 31,273,088,876 safetensors elements less 2,364 buffers (60 layer_scalar, std_bias/std_scale "
                    "1,152 each); tools/crosscheck/published_configs/SOURCES.md",
                    {"model_type": "gemma4", "tie_word_embeddings": True,
                     "text_config": {"vocab_size": 262144, "hidden_size": 5376, "intermediate_size": 21504,
                                     "num_hidden_layers": 60, "num_attention_heads": 32, "num_key_value_heads": 16,
                                     "num_global_key_value_heads": 4, "head_dim": 256, "global_head_dim": 512,
                                     "sliding_window": 1024, "max_position_embeddings": 262144,
                                     "attention_k_eq_v": True, "hidden_size_per_layer_input": 0,
                                     "num_kv_shared_layers": 0, "enable_moe_block": False,
                                     "final_logit_softcapping": 30.0, "tie_word_embeddings": True,
                                     "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 10},
                     "vision_config": {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
                                       "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 72,
                                       "patch_size": 16, "pooling_kernel_size": 3, "position_embedding_size": 10240,
                                       "standardize": True}}),
    "gemma-4-26b-a4b": ("google/gemma-4-26B-A4B-it", "reconstructed: text_config as third-party code quotes it (a Swift "
                        "test 'trimmed from mlx-community/gemma-4-26b-a4b-it-4bit at revision 0d77464e, keys verbatim'; "
                        "a Go TestParseTextConfig26B with enable_moe_block true; a Rust test), vision_config as "
                        "ollama's x/mlxrunner gemma4 test quotes it for this model (text hidden_size 2816), its three "
                        "omitted values taken from the 31B's (same tower: both cards say ~550M); "
                        "tools/crosscheck/published_configs/SOURCES.md",
                        {"model_type": "gemma4", "tie_word_embeddings": True,
                         "text_config": {"vocab_size": 262144, "hidden_size": 2816, "intermediate_size": 2112,
                                         "moe_intermediate_size": 704, "num_hidden_layers": 30,
                                         "num_attention_heads": 16, "num_key_value_heads": 8,
                                         "num_global_key_value_heads": 2, "head_dim": 256, "global_head_dim": 512,
                                         "sliding_window": 1024, "max_position_embeddings": 262144,
                                         "attention_k_eq_v": True, "hidden_size_per_layer_input": 0,
                                         "num_kv_shared_layers": 0, "enable_moe_block": True, "num_experts": 128,
                                         "top_k_experts": 8, "final_logit_softcapping": 30.0,
                                         "tie_word_embeddings": True,
                                         "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5},
                         "vision_config": {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
                                           "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 72,
                                           "patch_size": 16, "pooling_kernel_size": 3,
                                           "position_embedding_size": 10240, "standardize": True}}),
}
ALIASES = {"deepseek-v3": ["deepseek-r1", "deepseek-v3-671b"], "kimi-k2": ["kimi-k2-instruct"],
           "qwen3-30b-a3b": ["qwen3-moe-30b"], "gpt-oss-120b": ["gpt-oss"], "llama-3.1-8b": ["llama3.1-8b"],
           "llama-3.1-70b": ["llama3.1-70b"], "llama-3.1-405b": ["llama3.1-405b"]}
FAMILY = {"llama": "llama", "qwen2": "qwen2.5", "qwen3": "qwen3", "qwen3_moe": "qwen3", "deepseek_v3": "deepseek",
          "kimi_k2": "kimi", "gpt_oss": "gpt-oss", "gemma2": "gemma2", "gemma3_text": "gemma3", "phi3": "phi",
          "olmo2": "olmo2", "llama4_text": "llama4", "mistral": "mistral", "glm4_moe": "glm",
          "deepseek_v32": "deepseek", "glm_moe_dsa": "glm", "glm4_moe_lite": "glm", "minimax_m2": "minimax",
          "olmo3": "olmo3", "smollm3": "smollm3",
          "qwen3_vl": "qwen3-vl", "qwen3_vl_moe": "qwen3-vl", "kimi_k25": "kimi", "gemma4": "gemma4"}


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
    from transformer_calc.model.config import ModelConfig
    from transformer_calc.sources.hf import from_hf_config
    from transformer_calc.estimators.params import total_params

    spec = from_hf_config(cfg)
    spec.pop("source", None)
    spec.pop("name", None)
    total = total_params(ModelConfig.model_validate(spec))  # a multimodal model: its towers included
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
