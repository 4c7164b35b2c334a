"""Cross-check `tcalc inference`'s KV cache against the tensors transformers' own cache holds.

For tiny Hugging Face configs of every attention kind tcalc models — GQA (llama), MQA, QK-norm with
explicit head_dim (qwen3), sliding window (mistral), a sliding/full pattern (gemma2, gemma3_text,
gpt_oss with sinks), chunked local attention (llama4_text), multi-head latent attention
(deepseek_v3, with and without q_lora_rank), Gemma 4's varied and kv-shared layers (gemma4_text) — this builds the model on the CPU in fp32, runs a
prompt of S tokens through it with `use_cache=True`, then N decode steps one token at a time, and
sums the bytes of every tensor in the returned `past_key_values` (each layer's keys and values).
It compares that with `kv_cache(model, spec, context_len=S + N).total_bytes` (kv_dtype fp32) for
the ModelConfig that `transformer_calc.sources.hf.from_hf_config` makes of the same config. The two must
be equal, byte for byte, after the prompt and after every decode step.

Needs torch and transformers (not part of the core test suite). Exits 1 on any difference.

    PYTHONPATH=. python tools/crosscheck/kv_cache.py [--write-docs] [-v]

`--write-docs` replaces the KV-cache section of docs/validation.md (between its markers).
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

from transformer_calc.model.config import ModelConfig  # noqa: E402
from transformer_calc.sources.hf import from_hf_config  # noqa: E402
from transformer_calc.estimators.inference.roofline import InferenceSpec, decode_state, kv_cache  # noqa: E402

Cfg = dict[str, Any]
BEGIN, END = "<!-- kv_cache:begin -->", "<!-- kv_cache:end -->"
REGENERATE = "PYTHONPATH=. python tools/crosscheck/kv_cache.py --write-docs"
_BASE = {"vocab_size": 97, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
         "intermediate_size": 96, "max_position_embeddings": 256}  # fmt: skip

# (label, config, prompt lengths); each prompt is followed by DECODE steps
CASES: list[tuple[str, Cfg]] = [
    ("llama GQA 4q/2kv", {"model_type": "llama", **_BASE, "num_key_value_heads": 2}),
    ("llama MQA", {"model_type": "llama", **_BASE, "num_key_value_heads": 1}),
    ("qwen3 qk-norm head_dim 24", {"model_type": "qwen3", **_BASE, "num_key_value_heads": 2, "head_dim": 24}),
    ("mistral sliding W=8", {"model_type": "mistral", **_BASE, "num_key_value_heads": 2, "sliding_window": 8}),
    ("gemma2 sliding/full W=8", {"model_type": "gemma2", **_BASE, "num_key_value_heads": 2, "head_dim": 16,
                                 "sliding_window": 8}),
    ("gemma3_text 5:1 W=8", {"model_type": "gemma3_text", **_BASE, "num_hidden_layers": 7,
                             "num_key_value_heads": 1, "head_dim": 16, "sliding_window": 8}),
    ("gpt_oss sliding/full W=8, sinks", {"model_type": "gpt_oss", **_BASE, "num_key_value_heads": 2,
                                        "head_dim": 16, "sliding_window": 8, "num_local_experts": 4,
                                        "num_experts_per_tok": 2}),
    ("llama4_text chunked c=8", {"model_type": "llama4_text", **_BASE, "num_key_value_heads": 2,
                                 "head_dim": 16, "attention_chunk_size": 8, "num_local_experts": 2,
                                 "intermediate_size_mlp": 128, "interleave_moe_layer_step": 2}),
    ("qwen3_moe sliding W=8", {"model_type": "qwen3_moe", **_BASE, "num_key_value_heads": 2, "head_dim": 16,
                               "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                               "use_sliding_window": True, "sliding_window": 8, "max_window_layers": 2}),
    ("qwen2_moe sliding W=8 below max_window_layers", {"model_type": "qwen2_moe", **_BASE, "num_hidden_layers": 5,
                               "num_key_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2,
                               "moe_intermediate_size": 32, "use_sliding_window": True, "sliding_window": 8,
                               "max_window_layers": 3}),
    ("deepseek_v3 MLA q_lora", {"model_type": "deepseek_v3", **_BASE, "num_key_value_heads": 4, "q_lora_rank": 24, "kv_lora_rank": 16,
                                "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 12,
                                "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1}),
    ("deepseek_v3 MLA no q_lora", {"model_type": "deepseek_v3", **_BASE, "num_key_value_heads": 4, "q_lora_rank": None, "kv_lora_rank": 16,
                                   "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 12,
                                   "n_routed_experts": 4, "num_experts_per_tok": 2,
                                   "moe_intermediate_size": 32, "n_group": 1, "topk_group": 1}),
    # issue 22: the 2025-26 families' patterns, MLA without DSA, and DSA's indexer-key cache
    ("olmo3 3:1 sliding W=8", {"model_type": "olmo3", **_BASE, "num_key_value_heads": 2, "sliding_window": 8}),
    ("smollm3 NoPE layers sliding W=8", {"model_type": "smollm3", **_BASE, "num_key_value_heads": 2, "pad_token_id": 0,
                                         "use_sliding_window": True, "sliding_window": 8}),
    ("exaone4 3:1 W=8", {"model_type": "exaone4", **_BASE, "num_key_value_heads": 2, "sliding_window": 8}),
    ("cohere2 3:1 W=8", {"model_type": "cohere2", **_BASE, "num_key_value_heads": 2, "sliding_window": 8}),
    ("ministral3 sliding W=8", {"model_type": "ministral3", **_BASE, "num_key_value_heads": 2, "head_dim": 16,
                                "sliding_window": 8}),
    ("glm4_moe_lite MLA", {"model_type": "glm4_moe_lite", **_BASE, "num_key_value_heads": 4, "q_lora_rank": 24,
                           "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 12,
                           "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                           "n_group": 1, "topk_group": 1}),
    ("deepseek_v32 DSA indexer keys", {"model_type": "deepseek_v32", **_BASE, "num_key_value_heads": 4, "q_lora_rank": 24,
                                       "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 12,
                                       "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                       "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "index_n_heads": 2,
                                       "index_head_dim": 16, "index_topk": 4}),
    ("glm_moe_dsa shared indexers", {"model_type": "glm_moe_dsa", **_BASE, "num_key_value_heads": 4, "q_lora_rank": 24,
                                     "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 12,
                                     "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                     "n_group": 1, "topk_group": 1, "index_n_heads": 2, "index_head_dim": 16,
                                     "index_topk": 4, "index_topk_pattern": "FSFS"}),
    ("mimo_v2_flash sliding W=8 with 2x K/V heads and sinks, h_v 8", {
        "model_type": "mimo_v2_flash", **_BASE, "num_hidden_layers": 6, "num_key_value_heads": 1, "head_dim": 12,
        "v_head_dim": 8, "moe_intermediate_size": 16, "n_routed_experts": 4, "num_experts_per_tok": 2,
        "sliding_window": 8, "pad_token_id": 0}),
    # hybrids: the conv and recurrent states of the linear-attention layers (LinearAttentionLayer)
    # beside the K/V of the full-attention ones; constant in the context
    ("qwen3_next Gated DeltaNet 3:1, MoE", {"model_type": "qwen3_next", **_BASE, "num_key_value_heads": 2, "head_dim": 16,
                                           "linear_num_key_heads": 2, "linear_num_value_heads": 4,
                                           "linear_key_head_dim": 8, "linear_value_head_dim": 12,
                                           "linear_conv_kernel_dim": 4, "num_experts": 4, "num_experts_per_tok": 2,
                                           "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32}),
    ("qwen3_5_text Gated DeltaNet K=3, interval 2", {"model_type": "qwen3_5_text", **_BASE, "num_hidden_layers": 5,
                                                   "num_key_value_heads": 1, "head_dim": 16, "linear_num_key_heads": 1,
                                                   "linear_num_value_heads": 3, "linear_key_head_dim": 16,
                                                   "linear_value_head_dim": 8, "linear_conv_kernel_dim": 3,
                                                   "full_attention_interval": 2}),
    ("bamba Mamba-2 G=2, attention on 1 and 3", {"model_type": "bamba", **_BASE, "num_key_value_heads": 2,
                                                 "mamba_n_heads": 4, "mamba_n_groups": 2, "mamba_d_state": 8,
                                                 "mamba_d_conv": 3, "mamba_chunk_size": 8,
                                                 "attn_layer_indices": [1, 3]}),
    ("granitemoehybrid Mamba-2 + MoE", {"model_type": "granitemoehybrid", **_BASE, "num_key_value_heads": 1,
                                        "mamba_n_heads": 8, "mamba_d_state": 16, "num_local_experts": 4,
                                        "num_experts_per_tok": 2, "intermediate_size": 32,
                                        "shared_intermediate_size": 48,
                                        "layer_types": ["mamba", "mamba", "attention", "mamba"]}),
    ("falcon_h1 attention beside Mamba-2, d_ssm 48", {"model_type": "falcon_h1", **_BASE, "num_key_value_heads": 2,
                                                      "mamba_n_heads": 4, "mamba_d_state": 8, "mamba_d_ssm": 48,
                                                      "mamba_chunk_size": 8, "mamba_rms_norm": True}),
    ("nemotron_h blocks M-M*E", {"model_type": "nemotron_h", **_BASE, "hybrid_override_pattern": "M-M*E",
                                 "num_key_value_heads": 2, "head_dim": 16, "mamba_num_heads": 8, "mamba_head_dim": 8,
                                 "n_groups": 2, "ssm_state_size": 16, "chunk_size": 8, "n_routed_experts": 4,
                                 "moe_intermediate_size": 32, "moe_shared_expert_intermediate_size": 48}),
    ("lfm2 short conv K=3, attention on 1 and 3", {"model_type": "lfm2", **_BASE, "num_key_value_heads": 2,
                                                   "full_attn_idxs": [1, 3], "conv_bias": True}),
    ("jamba Mamba + MoE, attention every 3rd", {"model_type": "jamba", **_BASE, "num_key_value_heads": 2,
                                                "num_experts": 4, "num_experts_per_tok": 2, "attn_layer_period": 3,
                                                "attn_layer_offset": 2, "mamba_d_state": 8, "mamba_d_conv": 3}),
    ("minimax lightning block 8, MoE", {"model_type": "minimax", **_BASE, "num_key_value_heads": 2, "num_local_experts": 4,
                                        "num_experts_per_tok": 2, "block_size": 8}),
    ("zamba2 Mamba-2, 2 shared blocks at 3 layers, GQA", {"model_type": "zamba2", **_BASE, "num_hidden_layers": 5,
                                                         "num_key_value_heads": 2, "n_mamba_heads": 4, "mamba_ngroups": 2,
                                                         "mamba_d_state": 8, "chunk_size": 8, "num_mem_blocks": 2,
                                                         "adapter_rank": 4, "use_mem_rope": True,
                                                         "layers_block_type": ["mamba", "hybrid", "hybrid", "mamba",
                                                                               "hybrid"]}),
    ("kimi_linear KDA 3x8, MLA latent, MoE", {"model_type": "kimi_linear", **_BASE, "pad_token_id": None, "num_key_value_heads": 4,
                                              "num_local_experts": 4, "num_experts_per_tok": 2,
                                              "moe_intermediate_size": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8,
                                              "qk_nope_head_dim": 16, "v_head_dim": 16, "linear_num_heads": 3,
                                              "linear_head_dim": 8, "linear_conv_kernel_dim": 3,
                                              "layer_types": ["linear_attention", "full_attention",
                                                              "linear_attention", "linear_attention"]}),
    ("olmo_hybrid OLMo GDN 2:1 K=3, GQA", {"model_type": "olmo_hybrid", **_BASE, "pad_token_id": None,
                                          "num_hidden_layers": 6, "num_key_value_heads": 2,
                                          "linear_num_key_heads": 2, "linear_num_value_heads": 4,
                                          "linear_key_head_dim": 8, "linear_value_head_dim": 12,
                                          "linear_conv_kernel_dim": 3,
                                          "layer_types": ["linear_attention", "linear_attention", "full_attention"] * 2}),
    # Gemma 4 (sources/hf_gemma4.py): full layers of h_d 16 and one K/V head (k=v: keys and values both cached),
    # kv-shared layers that cache nothing, per-layer embeddings; a parallel MoE with a double-wide kv-shared MLP.
    # (Both with per-layer inputs: transformers 5.23's Gemma4TextModel._maybe_slice_kv_shared_inputs subscripts
    # per_layer_inputs, None without them, on a prompt of a model with kv-shared layers.)
    ("gemma4_text k=v, 2 kv-shared, PLE, W=8", {"model_type": "gemma4_text", **_BASE, "num_hidden_layers": 6,
                                                "num_key_value_heads": 2, "head_dim": 8, "global_head_dim": 16,
                                                "num_global_key_value_heads": 1, "attention_k_eq_v": True,
                                                "num_kv_shared_layers": 2, "hidden_size_per_layer_input": 4,
                                                "vocab_size_per_layer_input": 97, "sliding_window": 8,
                                                "layer_types": ["sliding_attention", "full_attention"] * 3}),
    ("gemma4_text 5:1, 2 kv-shared, MoE, double MLP", {"model_type": "gemma4_text", **_BASE, "num_hidden_layers": 8,
                                                       "num_key_value_heads": 2, "head_dim": 16, "global_head_dim": 32,
                                                       "num_kv_shared_layers": 2, "use_double_wide_mlp": True,
                                                       "hidden_size_per_layer_input": 4, "vocab_size_per_layer_input": 97,
                                                       "sliding_window": 8,
                                                       "enable_moe_block": True, "num_experts": 4, "top_k_experts": 2,
                                                       "moe_intermediate_size": 16}),
    ("gemma3n_text AltUp 3, LAuReL 4, 3 kv-shared, W=8", {"model_type": "gemma3n_text", **_BASE, "num_hidden_layers": 10,
                                                          "num_key_value_heads": 2, "head_dim": 16, "sliding_window": 8,
                                                          "num_kv_shared_layers": 3, "hidden_size_per_layer_input": 4,
                                                          "vocab_size_per_layer_input": 97, "altup_num_inputs": 3,
                                                          "laurel_rank": 4}),
]  # fmt: skip
HYBRID = {"qwen3_next", "qwen3_5_text", "bamba", "granitemoehybrid", "falcon_h1", "nemotron_h", "lfm2", "jamba", "minimax",
          "kimi_linear", "zamba2", "olmo_hybrid"}  # also run in bf16: the state's two dtypes
PROMPTS = (1, 5, 8, 13)  # below, at and past the windows (8)
DECODE = 10  # decode steps after each prompt (crosses the windows from below)
BF16_POINTS = ((1, 13), 3)  # prompts and decode steps of the bf16 runs
BATCH = 2


def cache_bytes(past: Any) -> int:
    """Bytes of every tensor the cache object holds: keys and values of every layer, DSA's indexer
    keys (DynamicIndexedLayer.indexer_keys), the conv and recurrent states of the linear-attention
    layers (LinearAttentionLayer) of hybrid models, and MiniMaxCache's linear_cache."""
    total = 0
    for layer in past.layers:
        tensors = [getattr(layer, "keys", None), getattr(layer, "values", None), getattr(layer, "indexer_keys", None)]
        for states in (getattr(layer, "conv_states", None), getattr(layer, "recurrent_states", None)):
            tensors += list(states.values()) if isinstance(states, dict) else []
        for t in tensors:
            if isinstance(t, torch.Tensor):
                total += t.numel() * t.element_size()
    for t in getattr(past, "linear_cache", []):  # MiniMaxCache: the lightning layers' K^T·V
        if isinstance(t, torch.Tensor):
            total += t.numel() * t.element_size()
    return total


def run(label: str, cfg: Cfg, verbose: bool, dtype: str = "fp32") -> tuple[list[str], int, str]:
    """(failures, points checked, a table row). `dtype` bf16: the model in bf16 (hybrids: the conv
    state is held in bf16, the recurrent state in fp32, which tcalc's default state_dtype is)."""
    config = CONFIG_MAPPING[cfg["model_type"]].from_dict(dict(cfg))
    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch_dtype).eval()
    m = ModelConfig.model_validate(from_hf_config(cfg))
    failures, points, worst = [], 0, 0
    gen = torch.Generator().manual_seed(0)
    prompts, decode = (PROMPTS, DECODE) if dtype == "fp32" else BF16_POINTS  # bf16: the dtypes, at fewer points
    for S in prompts:
        ids = torch.randint(0, cfg["vocab_size"], (BATCH, S), generator=gen)
        with torch.no_grad():
            out = model(input_ids=ids, use_cache=True)
            past = out.past_key_values
            for step in range(decode + 1):
                context = S + step
                if step:
                    nxt = torch.randint(0, cfg["vocab_size"], (BATCH, 1), generator=gen)
                    out = model(input_ids=nxt, past_key_values=past, use_cache=True)
                    past = out.past_key_values
                measured = cache_bytes(past)
                spec = InferenceSpec(batch_size=BATCH, prompt_len=S, new_tokens=step + 1,
                                     weight_dtype=dtype, kv_dtype=dtype)
                state = decode_state(m, spec)  # hybrids: the mixer layers' conv and recurrent states
                predicted = kv_cache(m, spec, context_len=context).total_bytes + (state.total_bytes if state else 0)
                points += 1
                worst = max(worst, abs(predicted - measured))
                if predicted != measured:
                    failures.append(f"{label}: S={S} context={context}: transformers {measured:,} tcalc {predicted:,}")
                elif verbose:
                    print(f"ok {label}: S={S} context={context}: {measured:,} bytes")
    kinds = ", ".join(f"{k.value} x{m.n_attention_layers(k)}" for k in type(m.attention_pattern[0]) if m.n_attention_layers(k))
    if m.n_shared_block_applications:
        kinds += f" (a shared attention+MLP block before {m.n_shared_block_applications} of them)"
    if m.mixer_beside_attention:
        kinds += f" (each with full attention beside: full x{m.n_kv_layers(type(m.attention_pattern[0]).full)})"
    row = f"| {label}{' (bf16)' if dtype != 'fp32' else ''} | {kinds} | {points} | {worst:,} |"
    return failures, points, row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-docs", action="store_true", help="update the KV-cache section of docs/validation.md")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    start = time.perf_counter()
    failures, rows, total = [], [], 0
    for label, cfg in CASES:
        for dtype in ("fp32", "bf16") if cfg["model_type"] in HYBRID else ("fp32",):
            f, n, row = run(label, cfg, args.verbose, dtype)
            failures += f
            rows.append(row)
            total += n
    seconds = time.perf_counter() - start
    header = ["| config | layers by attention kind | points (prompt, decode steps) | largest difference (bytes) |",
              "| --- | --- | --- | --- |"]
    print("\n".join([*header, *rows]))
    print(f"{total} points, {len(failures)} differences, {seconds:.1f} s (transformers {transformers.__version__}, torch {torch.__version__})")
    for line in failures:
        print("MISMATCH", line)
    if args.write_docs:
        write_docs(rows)
    return 1 if failures else 0


def write_docs(rows: list[str]) -> None:
    section = "\n".join([
        BEGIN,
        "<!-- Generated by tools/crosscheck/kv_cache.py; do not edit by hand. Regenerate with:",
        f"     {REGENERATE} -->",
        "",
        "## KV cache: tcalc inference vs transformers' cache objects",
        "",
        f"Generated by `tools/crosscheck/kv_cache.py` (torch {torch.__version__}, transformers "
        f"{transformers.__version__}); CI runs it.",
        "",
        f"**Measured:** the bytes of every tensor in `past_key_values` after a prompt of S tokens "
        f"(S in {', '.join(map(str, PROMPTS))}; B = {BATCH}, fp32, eager attention, CPU) and after each of "
        f"{DECODE} decode steps. **Predicted:** `kv_cache(m, spec, context_len).total_bytes` with "
        "kv_dtype fp32 for `from_hf_config` of the same config. Every point must be equal.",
        "",
        "What the two agree on, and what engines do instead: transformers' sliding and chunked cache",
        "layers (`DynamicSlidingWindowLayer`, `DynamicChunkedSlidingLayer`) keep the last W - 1 tokens",
        "between steps (the step's own token makes W); MLA caches the normalized latent (kv_lora_rank)",
        "and the rotary key (qk_rope_head_dim) per token and layer, one 'head', which tensor",
        "parallelism cannot split. Paged engines (vLLM, SGLang, TensorRT-LLM) allocate whole blocks",
        "(16 tokens by default) and some keep a sliding layer's full window W or, without hybrid",
        "allocation, the whole context for every layer; engines that expand MLA's latent cache",
        "per-head K and V (`--mla-cache decompressed`).",
        "",
        "Hybrid models (Gated DeltaNet, Mamba-2 layers): the cache object's `LinearAttentionLayer`s hold a conv",
        "state (conv_dim x K, the activation dtype) and a recurrent state (H_v x d_k x d_v, or H x P x N; fp32) per sequence; they",
        "are summed with the K/V of the attention layers and compared with `kv_cache(...).total_bytes +",
        "decode_state(...).total_bytes`, in fp32 and in bf16 (`(bf16)` rows).",
        "",
        "| config | layers by attention kind | points (prompt, decode steps) | largest difference (bytes) |",
        "| --- | --- | --- | --- |",
        *rows,
        END,
    ])
    from tools.docsection import write_section

    path = REPO / "docs" / "validation.md"
    write_section(path, BEGIN, END, section)
    print(f"wrote {path.relative_to(REPO)}")


if __name__ == "__main__":
    sys.exit(main())
