"""Gemma 4 under tensor parallelism (docs/formulas.md §5.14 "Tensor parallelism"): every layer class's share on
one of T ranks, as vLLM lays Gemma 4 out (vllm/model_executor/models/gemma4.py, vllm-project/vllm@001cabc1:
QKVParallelLinear with max(1, n_kv/T) K/V heads per rank, RowParallelLinear o_proj and down_proj,
MergedColumnParallelLinear gate/up, VocabParallelEmbedding for embed_tokens and embed_tokens_per_layer,
ColumnParallelLinear per_layer_model_projection, ReplicatedLinear per_layer_input_gate / per_layer_projection,
the router replicated, every norm replicated), and what inference, serve and sweep make of it. Exact goldens by
hand, properties, CLI JSON, and the refusals by name (expert parallelism, training at T > 1, Gemma 3n)."""

from __future__ import annotations

import json

import pytest
from hypothesis import event, given, settings, strategies as st

from test_gemma4 import TINY, TINY_3N, _model
from transformer_calc.cli import run
from transformer_calc.estimators.inference.roofline import InferenceSpec, kv_cache, matmul_params
from transformer_calc.estimators.params import count_params, shard_params, tensor_parallel_params
from transformer_calc.model.config import Parallelism, Training, Workload
from transformer_calc.sources.presets import preset_model


def test_worked_example_per_rank_by_hand():
    """§5.14's model (sliding, full, sliding, full; the last two kv-shared) on one of T = 2 ranks. Attention:
    sliding q 32·2·8 = 512, k = v 32·1·8 = 256, o 512, q/k norms 16 -> 1,552; full q 32·2·16 = 1,024, its one
    K/V head replicated (k 512, no W_V: k = v), o 1,024, norms 32 -> 2,592; kv-shared sliding 512 + 512 + 8 =
    1,032; kv-shared full 1,024 + 1,024 + 16 = 2,064. MLP (GeGLU) 3·32·24 = 2,304 on layers 0-1, the double-wide
    3·32·48 = 4,608 on layers 2-3; four RMSNorms of 32 per layer; token table ceil(300/2)·32 = 4,800 (tied);
    final norm 32; per-layer table ceil(100/2)·4·4 = 800; its projection 32·16/2 = 256, norm 4, each layer's gate
    and projection 2·32·4 and norm 32 (replicated) = 1,152."""
    m = _model(TINY)
    attention = 1552 + 2592 + 1032 + 2064
    mlp = 2 * 2304 + 2 * 4608
    assert tensor_parallel_params(m, 2) == 4800 + attention + mlp + 4 * 128 + 32 + 800 + 256 + 4 + 1152 == 28620
    # over both ranks: the whole model (54,956) plus a second copy of what every rank keeps whole: the full
    # layer's K/V head (512), the q/k norms (16 + 32 + 8 + 16), the block norms (4·128), the final norm (32),
    # the per-layer projection norm (4) and every layer's gate, projection and norm (1,152)
    assert 2 * 28620 == count_params(m).total + 512 + 72 + 512 + 32 + 4 + 1152


def test_worked_example_matmuls_and_cache_per_rank():
    """The weights one token multiplies on a rank (T = 2): q, k, v, o 1,536 + 2,560 + 1,024 + 2,048 = 7,168; the
    MLPs 4·2,304 + the double-wide half 2·2,304 = 13,824; the per-layer inputs 32·16/2 + 2·32·16 = 1,280; the
    head 150·32 = 4,800. The cache per token on a rank: sliding layer 0 2·1·8, full layer 1 2·1·16 (its one
    head replicated), the kv-shared layers none: 48 values, 96 bytes in bf16."""
    m = _model(TINY)
    assert matmul_params(m, 2) == 7168 + 13824 + 1280 + 4800 == 27072
    kv = kv_cache(m, InferenceSpec(batch_size=1, prompt_len=16, tensor_parallel=2))
    assert kv.per_gpu_bytes == 16 * 2 * (2 * 1 * 8 + 2 * 1 * 16) == 1536
    assert matmul_params(m, 1) == 2 * 7168 - 512 + 2 * 13824 + 3 * 32 * 16 + 300 * 32  # T = 1: the whole model


def test_gemma_4_31b_per_rank():
    """gemma-4-31b (60 layers, D 5,376; 50 sliding layers of 16 K/V heads of 256, 10 full layers of 4 K/V heads
    of 512, k = v; vocabulary 262,144). Replicated on every rank: 4 RMSNorms per layer (60·4·5,376), the final
    norm, the q/k norms (50·2·256 + 10·2·512) = 1,331,456; the rest split T ways (T = 2, 4: exact halves and
    quarters). At T = 8 each rank holds one of the full layers' four K/V heads (k = v: keys only), replicated
    on 2 ranks: half a head's 5,376·512 more than the even split, in each of the 10 full layers."""
    m = preset_model("gemma-4-31b")
    total, R = count_params(m).total, 60 * 4 * 5376 + 5376 + 50 * 2 * 256 + 10 * 2 * 512
    assert (total, R) == (30697345280, 1331456)
    assert tensor_parallel_params(m, 2) == (total - R) // 2 + R == 15349338368
    assert tensor_parallel_params(m, 4) == (total - R) // 4 + R == 7675334912
    assert tensor_parallel_params(m, 8) == (total - R) // 8 + R + 10 * 5376 * 256


def test_gemma_4_31b_cache_per_gpu():
    """T = 8, S = 8,192: a sliding layer keeps its last 1,023 tokens of 16/8 = 2 K/V heads (2·2·256 values), a
    full layer all 8,192 of its one replicated head (2·1·512); bf16: 50·1,024·1,023·2 + 10·1,024·8,192·2 bytes."""
    m = preset_model("gemma-4-31b")
    kv = kv_cache(m, InferenceSpec(batch_size=1, prompt_len=8192, tensor_parallel=8))
    assert kv.per_gpu_bytes == 50 * 1024 * 1023 * 2 + 10 * 1024 * 8192 * 2 == 272527360
    one = kv_cache(m, InferenceSpec(batch_size=1, prompt_len=8192))
    assert kv.total_bytes == one.total_bytes  # the whole cache does not depend on T
    assert kv_cache(m, InferenceSpec(batch_size=1, prompt_len=8192, tensor_parallel=2)).per_gpu_bytes * 2 == one.per_gpu_bytes


def test_gemma_4_26b_a4b_per_rank():
    """gemma-4-26b-a4b (30 layers, D 2,816, 128 experts of 704 beside a dense MLP of 2,112): the experts split
    by their width T ways (FusedMoE without expert parallelism), the router (2,816·128 + 2,816 + 128 per layer)
    replicated with the 7 RMSNorms per layer, the final norm and the q/k norms (25·2·256 + 5·2·512). At T = 4 the
    full layers' two K/V heads (k = v) are replicated on 2 ranks each: half a head's 2,816·512 more per full layer."""
    m = preset_model("gemma-4-26b-a4b")
    total = count_params(m).total
    R = 30 * (2816 * 128 + 2816 + 128) + 30 * 7 * 2816 + 2816 + 25 * 2 * 256 + 5 * 2 * 512
    assert count_params(m).layer.router == 2816 * 128 + 2816 + 128
    assert tensor_parallel_params(m, 2) == (total - R) // 2 + R
    assert tensor_parallel_params(m, 4) == (total - R) // 4 + R + 5 * 2816 * 256


@st.composite
def tp_configs(draw: st.DrawFn) -> tuple[dict, int]:
    T = draw(st.sampled_from([1, 2, 4]))
    L = draw(st.integers(2, 8))
    kv = draw(st.sampled_from([1, 2, 4, 8]))
    types = [draw(st.sampled_from(["sliding_attention", "full_attention"])) for _ in range(L)]
    types[-1] = "full_attention"
    cfg = {"model_type": "gemma4_text", "vocab_size": draw(st.integers(60, 70)), "hidden_size": 8 * draw(st.integers(1, 4)),
           "num_hidden_layers": L, "num_attention_heads": 8 * draw(st.integers(1, 2)), "num_key_value_heads": kv,
           "num_global_key_value_heads": draw(st.sampled_from([1, 2, 4])), "intermediate_size": 4 * draw(st.integers(1, 10)),
           "head_dim": 4 * draw(st.integers(1, 3)), "global_head_dim": 4 * draw(st.integers(1, 3)),
           "hidden_size_per_layer_input": draw(st.sampled_from([0, 4])), "vocab_size_per_layer_input": draw(st.sampled_from([32, 33])),
           "layer_types": types, "attention_k_eq_v": draw(st.booleans())}
    shared = draw(st.integers(0, L - 1))
    if shared and set(types[: L - shared]) == set(types):
        cfg |= {"num_kv_shared_layers": shared, "use_double_wide_mlp": draw(st.booleans())}
    if draw(st.booleans()):
        cfg |= {"enable_moe_block": True, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 4 * draw(st.integers(1, 3))}
    return cfg, T


@settings(max_examples=60, deadline=None)
@given(tp_configs())
def test_per_rank_share_properties(case):
    """T ranks hold the model at least once (T·rank >= total), a rank holds no more at a larger T, T = 1 holds
    the whole model; and, when every kind's K/V heads and both vocabularies split evenly, T·rank exceeds the
    total by exactly T - 1 more copies of what is replicated (norms, q/k norms, the router, the per-layer gates
    and projections: count_params' own fields, checked against transformers by tools/crosscheck/hf_params.py)."""
    cfg, T = case
    m = _model(cfg)
    total = count_params(m).total
    assert tensor_parallel_params(m, 1) == shard_params(m, 1).total(m) == total
    rank = tensor_parallel_params(m, T)
    assert T * rank >= total
    for smaller in (t for t in (1, 2, 4) if t < T):
        assert tensor_parallel_params(m, smaller) >= rank
    d = count_params(m).as_dict()
    replicated = (d["layers_norms"] + d["layers_qk_norm"] + d["layers_router"] + d["final_norm"]
                  + d.get("per_layer_inputs", 0) - m.d_model * m.n_layers * m.per_layer_input_dim)
    even = (m.n_kv_heads % T == 0 and all(m.kv_heads_of(kind) % T == 0 for kind in set(m.attention_pattern))
            and m.vocab_size % T == 0 and (m.per_layer_vocab_size or m.vocab_size) % T == 0)
    event(f"T {T}, even {even}")
    if even:
        assert T * rank == total + (T - 1) * replicated


def test_cli_json_params_and_inference(capsys):
    """`tcalc params` and `tcalc inference` at T = 4 on -f json: the per-rank count and the cache per GPU."""
    assert run(["params", "gemma-4-31b", "--T", "4", "--text-only", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["weights"]["tensor"], data["weights"]["params_per_rank"]) == (4, 7675334912)
    assert data["weights"]["bytes_per_rank"] == 2 * 7675334912  # bf16
    assert run(["inference", "gemma-4-31b", "--T", "4", "--S", "8192", "--B", "1", "--gpu", "h100", "--text-only",
                "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["inference"]["tensor"] == 4
    assert data["kv_cache"]["per_gpu_bytes"] == (50 * 2 * 4 * 256 * 1023 + 10 * 2 * 1 * 512 * 8192) * 2 == 377282560
    assert data["prefill"]["communication_s"] > 0  # the two all-reduces per layer


def test_serve_and_sweep_price_t(capsys):
    assert run(["sweep", "gemma-4-31b", "--T", "1,2,4", "--B", "1", "--S", "8192", "--gpu", "h100",
                "--metrics", "kv_cache_bytes,time_per_output_token_s", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["points"]
    assert [r["tensor"] for r in rows] == [1, 2, 4]
    tpot = [r["time_per_output_token_s"] for r in rows]
    assert tpot[0] > tpot[1] > tpot[2]


def test_refusals_by_name():
    m = preset_model("gemma-4-26b-a4b")
    with pytest.raises(ValueError, match="expert parallelism .ep 2. is not priced for .*Gemma 4.*use ep 1"):
        shard_params(m, 1, 2)
    with pytest.raises(ValueError, match="tensor and expert parallelism .T 2, ep 1. is not priced for .*AltUp, LAuReL .Gemma 3n.*use T 1"):
        shard_params(_model(TINY_3N), 2)
    three = {**TINY, "num_attention_heads": 6, "num_global_key_value_heads": 3, "num_key_value_heads": 2}
    with pytest.raises(ValueError, match=r"full_kv_heads \(3\) and T \(2\) must divide one another"):
        shard_params(_model(three), 2)
    ple = {**TINY, "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"],
           "num_kv_shared_layers": 0, "use_double_wide_mlp": False, "hidden_size_per_layer_input": 3}
    with pytest.raises(ValueError, match=r"n_layers x per_layer_input_dim \(6.*divisible by T \(4\)"):
        shard_params(_model(ple), 4)


def test_training_at_t_is_refused_by_name():
    from transformer_calc.estimators.training.memory import training_memory, valid_tensor_parallel

    m = _model(TINY)
    with pytest.raises(ValueError, match="training .* at T 2 is not priced for .*Gemma 4"):
        training_memory(m, Workload(seq_len=8, batch_size=1), Training.model_validate({}), Parallelism(tensor=2))
    assert valid_tensor_parallel(m) == [1]  # the planners try T = 1 only
