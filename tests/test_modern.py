"""The 2024-2026 architecture features: multi-head latent attention, sliding-window and chunked
layers, fine-grained MoE (expert width, shared experts, dense layers), expert parallelism.

Every golden is derived by hand in the comment beside it from the modeling code it cites
(transformers 5.23 models/<type>/modeling_<type>.py); the real models' totals are checked against
what transformers builds in tests/test_hf.py and tests/test_presets_params.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_calc.model.config import LayerAttention, ModelConfig, Parallelism, Training, Workload
from transformer_calc.errors import TcalcError
from transformer_calc.estimators.flops import count_flops
from transformer_calc.estimators.inference.roofline import InferenceSpec, decode, inference_memory, kv_cache, matmul_params
from transformer_calc.estimators.training.memory import training_memory
from transformer_calc.estimators.params import count_params, shard_params, tensor_parallel_params
from transformer_calc.sources.presets import gpu

from conftest import modern_model_configs

# A tiny MLA model: D=16, A=2 heads, q_lora 8, kv_lora 4, d_rope 2, d_nope 3, d_v 5, RMSNorm.
MLA = {
    "L": 3, "D": 16, "A": 2, "V": 10, "K": 64, "d_ff": 24, "mlp": "swiglu", "norm": "rmsnorm",
    "bias": False, "positional": "rotary", "tied_embeddings": False,
    "q_lora_rank": 8, "kv_lora_rank": 4, "qk_rope_head_dim": 2, "qk_nope_head_dim": 3, "v_head_dim": 5,
}  # fmt: skip


def test_mla_params_by_hand():
    m = ModelConfig.model_validate(MLA)
    p = count_params(m).layer
    assert m.head_dim == 3 + 2  # q/k heads: d_nope + d_rope
    assert p.attn_q == 16 * 8 + 8 * 2 * 5 == 208  # q_a_proj D x q_lora + q_b_proj q_lora x A*h_d
    assert p.attn_k == 16 * (4 + 2) + 4 * 2 * 3 == 120  # kv_a_proj_with_mqa + key half of kv_b_proj
    assert p.attn_v == 4 * 2 * 5 == 40  # value half of kv_b_proj
    assert p.attn_o == 2 * 5 * 16 == 160  # o_proj (A*d_v) x D
    assert p.latent_norms == 8 + 4  # q_a_layernorm + kv_a_layernorm (RMSNorm: scale only)
    assert p.mlp_weights == 3 * 16 * 24
    assert p.total == 208 + 120 + 40 + 160 + 12 + 3 * 16 * 24 + 2 * 16 == 1724


def test_mla_without_q_lora_uses_a_plain_q_proj():
    m = ModelConfig.model_validate({**MLA, "q_lora_rank": None})
    p = count_params(m).layer
    assert p.attn_q == 16 * 2 * 5  # q_proj D x A*h_d
    assert p.latent_norms == 4


def test_mla_rejects_kv_heads_and_partial_widths():
    with pytest.raises(TcalcError, match="n_kv_heads"):
        from transformer_calc.model.config import build_model

        build_model({**MLA, "n_kv_heads": 1})
    with pytest.raises(TcalcError, match="kv_lora_rank"):
        from transformer_calc.model.config import build_model

        build_model({"L": 1, "D": 8, "A": 2, "V": 10, "qk_rope_head_dim": 4})  # (v_head_dim alone: MiMo's h_v)


def test_mla_latent_cache_is_replicated_under_tp():
    # Cache per token and layer: kv_lora 4 + d_rope 2 = 6 values, bf16: 12 bytes; L = 3: 36 bytes.
    m = ModelConfig.model_validate(MLA)
    one = kv_cache(m, InferenceSpec(batch_size=2, prompt_len=10))
    assert one.bytes_per_token == 3 * (4 + 2) * 2 == 36
    assert one.total_bytes == one.per_gpu_bytes == 2 * 10 * 36
    two = kv_cache(m, InferenceSpec(batch_size=2, prompt_len=10, tensor_parallel=2))
    assert two.per_gpu_bytes == one.per_gpu_bytes  # the latent is not split over T
    # Decompressed per-head K (h_d = 5) and V (d_v = 5) per head: 2 heads x 10 x 2 bytes x 3 layers.
    dec = kv_cache(m, InferenceSpec(batch_size=1, prompt_len=1, mla_cache="decompressed"))
    assert dec.bytes_per_token == 3 * 2 * (5 + 5) * 2 == 120


def test_deepseek_v3_shape_latent_cache():
    # DeepSeek-V3 (config.json: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64): 576 values per
    # token and layer; bf16 at 32768 tokens: 61 x 576 x 2 x 32768 = 2,302,672,896 bytes, per GPU too.
    m = ModelConfig.model_validate({
        "L": 61, "D": 7168, "A": 128, "V": 129280, "K": 163840, "d_ff": 18432, "mlp": "swiglu",
        "norm": "rmsnorm", "bias": False, "positional": "rotary", "tied_embeddings": False,
        "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
        "v_head_dim": 128,
    })  # fmt: skip
    kv = kv_cache(m, InferenceSpec(batch_size=1, prompt_len=32768, tensor_parallel=8))
    assert kv.bytes_per_token == 61 * 576 * 2 == 70_272
    assert kv.per_gpu_bytes == kv.total_bytes == 2_302_672_896
    # The decompressed alternative: 128 heads x (192 + 128) per layer -> 555.6x larger in all.
    dec = kv_cache(m, InferenceSpec(batch_size=1, prompt_len=32768, mla_cache="decompressed"))
    assert dec.total_bytes == 61 * 128 * (192 + 128) * 2 * 32768


# ---------------------------------------------------------------------------- sliding, chunked
SLIDING = {"L": 4, "D": 32, "A": 4, "n_kv_heads": 2, "V": 50, "K": 4096, "mlp": "swiglu",
           "norm": "rmsnorm", "bias": False, "positional": "rotary",
           "attention_pattern": ["sliding", "full"], "sliding_window": 16}  # fmt: skip


def test_sliding_cache_is_capped_at_window_minus_one():
    # Per token and layer: K and V of 2 heads x h_d 8 in bf16 = 64 bytes. At 100 tokens the two
    # full layers hold 100 tokens, the two sliding layers the last W - 1 = 15 (transformers'
    # DynamicSlidingWindowLayer): 64 x (2 x 100 + 2 x 15) = 14,720 bytes.
    m = ModelConfig.model_validate(SLIDING)
    kv = kv_cache(m, InferenceSpec(batch_size=1, prompt_len=100))
    assert kv.bytes_per_token == 4 * 64
    assert kv.total_bytes == 64 * (2 * 100 + 2 * 15) == 14_720
    # Below the window every layer holds every token.
    assert kv_cache(m, InferenceSpec(batch_size=1, prompt_len=10)).total_bytes == 4 * 64 * 10


def test_chunked_cache_is_capped_at_chunk_minus_one():
    m = ModelConfig.model_validate({**SLIDING, "attention_pattern": ["chunked", "chunked", "chunked", "full"],
                                    "sliding_window": None, "attention_chunk_size": 32})
    kv = kv_cache(m, InferenceSpec(batch_size=3, prompt_len=1000))
    assert kv.total_bytes == 3 * 64 * (1 * 1000 + 3 * 31)


def test_gqa_and_mqa_cache_under_tp():
    # 2 K/V heads at T=2: one each; MQA (1 head) at T=2: replicated, one each.
    m = ModelConfig.model_validate({**SLIDING, "attention_pattern": ["full"], "sliding_window": None})
    one = kv_cache(m, InferenceSpec(batch_size=1, prompt_len=10))
    two = kv_cache(m, InferenceSpec(batch_size=1, prompt_len=10, tensor_parallel=2))
    assert two.per_gpu_bytes * 2 == one.total_bytes
    mqa = m.with_overrides({"n_kv_heads": 1})
    a = kv_cache(mqa, InferenceSpec(batch_size=1, prompt_len=10))
    b = kv_cache(mqa, InferenceSpec(batch_size=1, prompt_len=10, tensor_parallel=4))
    assert b.per_gpu_bytes == a.total_bytes  # one head, replicated on every rank


def test_pattern_counts_are_closed_forms():
    m = ModelConfig.model_validate({**SLIDING, "L": 10, "attention_pattern": ["sliding"] * 5 + ["full"]})
    assert m.n_attention_layers(LayerAttention.full) == 1  # layer 5 (gemma3's 5:1 pattern)
    assert m.n_attention_layers(LayerAttention.sliding) == 9
    assert m.n_attention_layers(LayerAttention.sliding, 6, 10) == 4


@given(modern_model_configs(), st.integers(0, 12), st.integers(0, 12))
def test_layer_counts_equal_a_brute_force_walk(m, a, b):
    start, stop = sorted((min(a, m.n_layers), min(b, m.n_layers)))
    pattern = [m.attention_pattern[i % len(m.attention_pattern)] for i in range(start, stop)]
    for kind in LayerAttention:
        assert m.n_attention_layers(kind, start, stop) == pattern.count(kind)
    moe = [
        i for i in range(start, stop)
        if m.is_moe and i >= m.first_dense_layers and (i + 1) % m.moe_layer_step == 0 and i not in m.dense_layer_ids
    ]
    assert m.n_moe_layers(start, stop) == len(moe)


def test_sliding_attention_flops_eager_vs_windowed():
    # Eager (default): every layer scores S x S; windowed: a sliding layer S·W - W²/2 pairs when
    # causal (S = 64, W = 16: 2·64·16 - 256 = 1792 half-pairs), S·min(S, W) otherwise.
    m = ModelConfig.model_validate(SLIDING)
    w = Workload(seq_len=64, batch_size=1)
    eager = count_flops(m, w)
    win = count_flops(m, w, windowed=True)
    per_pair = 2 * 4 * 8  # 2 FLOPs x A heads x h_d, one matmul
    full_core = 2 * per_pair * 64 * 64
    assert eager.attention_cores == 4 * full_core
    assert win.attention_cores == 2 * full_core + 2 * 2 * per_pair * 64 * 16
    causal = count_flops(m, w, causal=True, windowed=True)
    assert causal.attention_cores == 2 * full_core // 2 + 2 * 2 * per_pair * (2 * 64 * 16 - 16 * 16) // 2
    assert eager.total - win.total == 3 * (eager.attention_cores - win.attention_cores)


def test_mla_flops_are_two_per_weight_per_token_plus_the_core():
    m = ModelConfig.model_validate(MLA)
    w = Workload(seq_len=7, batch_size=2)
    f = count_flops(m, w).layer
    p = count_params(m).layer
    assert f.qkv == 2 * 14 * (208 + 120 + 40)
    assert f.scores == 2 * 2 * 7 * 7 * 2 * 5  # B·S²·A·h_d (h_d = 5), 2 per MAC
    assert f.reweight == 2 * 2 * 7 * 7 * 2 * 5  # values of d_v = 5
    assert f.attn_out == 2 * 14 * p.attn_o


# ---------------------------------------------------------------------------- fine-grained MoE
FINE = {"L": 6, "D": 16, "A": 2, "V": 20, "K": 64, "mlp": "swiglu", "norm": "rmsnorm", "bias": False,
        "positional": "rotary", "d_ff": 48, "n_experts": 8, "experts_per_token": 2, "moe_d_ff": 8,
        "shared_expert_d_ff": 16, "shared_expert_gate": True, "first_dense_layers": 1}  # fmt: skip


def test_fine_grained_moe_params_by_hand():
    m = ModelConfig.model_validate(FINE)
    p = count_params(m)
    assert p.n_moe_layers == 5 and p.n_dense_layers == 1
    assert p.layer.mlp_weights == 8 * 3 * 16 * 8  # 8 routed experts of width 8
    assert p.layer.shared_expert == 3 * 16 * 16 + 16  # shared expert of width 16 + gate Linear(D, 1)
    assert p.layer.router == 16 * 8
    assert p.dense_layer.mlp_weights == 3 * 16 * 48  # the dense layer's MLP: d_ff = 48
    attn = 4 * 16 * 16
    assert p.layers == 5 * (attn + 3072 + 784 + 128 + 32) + (attn + 2304 + 32)
    # Active: the top-2 of 8 routed experts in each MoE layer
    assert p.total - p.active == 5 * (8 - 2) * 3 * 16 * 8


def test_expert_parallel_shards_and_memory():
    m = ModelConfig.model_validate(FINE)
    s1, s4 = shard_params(m), shard_params(m, ep=4)
    assert s1.routed_experts == 8 * 3 * 16 * 8 and s4.routed_experts == 2 * 3 * 16 * 8
    assert s1.layer - s4.layer == 6 * 3 * 16 * 8
    assert s4.dense_layer == s1.dense_layer  # dense layers are not expert-parallel
    w, tr = Workload(seq_len=8, batch_size=1), Training()
    one = training_memory(m, w, tr, Parallelism(data=4))[0]
    ep4 = training_memory(m, w, tr, Parallelism(data=4, expert=4))[0]
    assert one.params - ep4.params == 5 * 6 * 3 * 16 * 8
    # ZeRO-1 over dp = 4: the dense part over 4 replicas, the experts over edp = T*dp/ep = 1.
    z = training_memory(m, w, tr, Parallelism(data=4, expert=4, zero=1))[0]
    experts = 5 * s4.routed_experts
    assert z.optimizer == ((ep4.params - experts + 3) // 4 + experts) * 12
    with pytest.raises(ValueError, match="n_experts"):
        shard_params(m, ep=3)
    with pytest.raises(ValueError, match="divide T x dp"):
        training_memory(m, w, tr, Parallelism(data=2, expert=4))


def test_inference_expert_parallel_layouts_by_hand():
    """Inference EP (inference.expert_layout): ep | T spreads the experts inside the TP group,
    T | ep is DP attention over ep/T groups; both hold n_experts/ep routed experts per GPU."""
    from transformer_calc.estimators.inference.roofline import rank_shard, expert_layout, prefill_step

    m = ModelConfig.model_validate(FINE)
    routed = 5 * 8 * 3 * 16 * 8  # 5 MoE layers x 8 experts x 3 matrices x D=16 x F_e=8
    total = count_params(m).total
    assert expert_layout(m, 2, 2) == (2, 1) and expert_layout(m, 2, 1) == (2, 2)
    assert expert_layout(m, 1, 4) == (4, 1) and expert_layout(m, 2, 8) == (8, 1)
    # T = 1, ep = 4: everything but the routed experts is replicated; each GPU keeps 2 experts.
    sh = rank_shard(m, InferenceSpec(batch_size=1, prompt_len=4, expert_parallel=4))
    assert sh.params == total - routed + routed // 4 and sh.n_experts == 2
    assert sh.expert_params == 3 * 16 * 8  # whole experts (etp = 1)
    # T = 2, ep = 2: the same bytes as T = 2 alone (experts split, not sliced), whole experts.
    t2 = rank_shard(m, InferenceSpec(batch_size=1, prompt_len=4, tensor_parallel=2))
    t2e2 = rank_shard(m, InferenceSpec(batch_size=1, prompt_len=4, tensor_parallel=2, expert_parallel=2))
    assert t2.params == t2e2.params and t2e2.expert_params == 2 * t2.expert_params
    # Weights read: 1 token x top-2 = 2 assignments; with ep = T = 2 a GPU receives 1 of them.
    from transformer_calc.estimators.inference.roofline import _weights_read_bytes

    spec = InferenceSpec(batch_size=1, prompt_len=4, tensor_parallel=2, expert_parallel=2)
    idle_experts = 4 - 1  # 4 local experts, 1 touched
    expected = t2e2.params - t2e2.gathered_params - 5 * idle_experts * t2e2.expert_params
    assert _weights_read_bytes(t2e2, spec, 1) == 2 * expected  # bf16
    # DP attention (T = 1 < ep = 4): two all-to-alls per MoE layer, no all-reduce.
    g = gpu("h100")
    st = prefill_step(m, g, InferenceSpec(batch_size=2, prompt_len=4, expert_parallel=4))
    assert st.comm.all_reduces == 0 and st.comm.all_to_alls == 2 * 5
    # each sends B·S·k / T = 2·4·2 assignments of D = 16 bf16 values, 3/4 of them away
    per = 2 * 4 * 2 * 16 * 2 * 3 / 4
    link = g.interconnect_bytes_s / 2
    assert st.comm.transfer_s == pytest.approx(10 * per / link)
    with pytest.raises(ValueError, match="divide one another"):
        expert_layout(m, 4, 3)
    with pytest.raises(ValueError, match="mixture-of-experts"):
        expert_layout(ModelConfig.model_validate(SLIDING), 1, 2)


def test_cli_inference_expert_parallel(capsys):
    t8 = _json(capsys, "inference", "--preset", "deepseek-v3", "--T", "8", "--gpu", "h200", "--S", "4096",
               "--weight-dtype", "fp8")
    dp_attn = _json(capsys, "inference", "--preset", "deepseek-v3", "--T", "8", "--ep", "32", "--gpu", "h200",
                    "--S", "4096", "--weight-dtype", "fp8")
    assert t8["inference"]["gpus"] == 8 and dp_attn["inference"]["gpus"] == 32
    assert dp_attn["memory"]["per_gpu"]["weights_bytes"] < t8["memory"]["per_gpu"]["weights_bytes"]
    assert dp_attn["memory"]["per_gpu"]["kv_cache_bytes"] == t8["memory"]["per_gpu"]["kv_cache_bytes"]  # latent, per group


def test_dense_first_layers_make_a_later_pipeline_stage_the_most_loaded():
    m = ModelConfig.model_validate({**FINE, "L": 8, "first_dense_layers": 2, "n_experts": 64})
    stages = training_memory(m, Workload(seq_len=8), Training(), Parallelism(pipeline=4))
    params = [st.params for st in stages]
    assert params[1] > params[0]  # stage 0 holds the 2 dense layers (and the embedding)
    assert max(stages, key=lambda s: s.total).stage != 0 or stages[0].total >= stages[1].total


@settings(max_examples=60)
@given(modern_model_configs())
def test_modern_invariants(m):
    p = count_params(m)
    assert p.total == p.embedding + p.position + p.embedding_projection + p.embedding_norm + p.layers + p.final_norm + p.lm_head + p.lm_head_bias
    assert 0 < p.active <= p.total
    assert tensor_parallel_params(m, 1) == p.total
    w = Workload(seq_len=32, batch_size=2)
    f = count_flops(m, w)
    win = count_flops(m, w, windowed=True)
    assert win.total <= f.total  # a window never computes more than the full square
    assert f.backward == 2 * f.forward
    spec = InferenceSpec(batch_size=2, prompt_len=40, new_tokens=30)
    kv = kv_cache(m, spec)
    assert kv.total_bytes <= 2 * 69 * kv.bytes_per_token  # capped layers hold fewer tokens
    assert matmul_params(m) <= p.total + m.vocab_size * m.d_embedding
    d = decode(m, gpu("a100-80gb"), spec)
    assert d.steps == 29 and d.seconds > 0
    mem = inference_memory(m, gpu("a100-80gb"), spec)
    assert mem.max_prompt_len >= 1 or m.max_seq_len < 30  # capped by the context: S + 30 - 1 <= max_seq_len


def test_longer_context_never_shrinks_the_cache():
    m = ModelConfig.model_validate(SLIDING)
    sizes = [kv_cache(m, InferenceSpec(batch_size=1, prompt_len=c)).total_bytes for c in range(1, 60)]
    assert sizes == sorted(sizes)


# ---------------------------------------------------------------------------- CLI
def _json(capsys, *argv):
    import json

    from transformer_calc.cli import run

    code = run([*argv, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_cli_memory_expert_parallel_splits_the_experts(capsys):
    one = _json(capsys, "memory", "--preset", "mixtral-8x7b", "--S", "4096", "--dp", "8", "--zero", "0")
    ep8 = _json(capsys, "memory", "--preset", "mixtral-8x7b", "--S", "4096", "--dp", "8", "--ep", "8", "--zero", "0")
    from transformer_calc.sources.presets import preset_model

    mixtral = count_params(preset_model("mixtral-8x7b"))
    moved = mixtral.n_moe_layers * 7 * mixtral.layer.mlp_weights // 8  # 7 of 8 experts per layer leave
    assert one["params"]["per_gpu"] - ep8["params"]["per_gpu"] == moved
    # weights and gradients of the moved experts leave; ZeRO-0: optimizer states too
    assert one["memory"]["per_gpu"]["weights_bytes"] - ep8["memory"]["per_gpu"]["weights_bytes"] == 2 * moved
    assert one["memory"]["per_gpu"]["optimizer_bytes"] - ep8["memory"]["per_gpu"]["optimizer_bytes"] == 12 * moved


def test_cli_sweep_has_an_ep_axis(capsys):
    data = _json(capsys, "sweep", "--preset", "mixtral-8x7b", "--ep", "1,2,8", "--dp", "8", "--S", "1024")
    rows = data["points"]
    mem = [r["peak_bytes"] for r in rows]
    assert [r["expert"] for r in rows] == [1, 2, 8] and mem == sorted(mem, reverse=True)


def test_cli_flops_windowed_and_inference_mla_cache(capsys):
    eager = _json(capsys, "flops", "--L", "4", "--D", "64", "--A", "4", "--V", "100", "--S", "512",
                  "--set", "attention_pattern=[sliding,full]", "--set", "sliding_window=64")
    win = _json(capsys, "flops", "--L", "4", "--D", "64", "--A", "4", "--V", "100", "--S", "512",
                "--set", "attention_pattern=[sliding,full]", "--set", "sliding_window=64", "--windowed")
    assert win["flops"]["total"] < eager["flops"]["total"] and win["flops"]["windowed"] is True
