"""DeepSeek-V4 inference (estimators/inference/roofline.py's DeepSeek-V4 shard, estimators/inference/deepseek_v4.py;
docs/formulas.md §5.16 "Inference"): the decode state against the bytes transformers 5.23's cache holds
(tools/crosscheck/kv_cache_deepseek_v4.py -v, its first case, 2 sequences; the numbers are fixtures here, the
suite needs no torch), the prefill and decode-step rooflines derived by hand from `cache_elements` and
`forward_flops`, the decode's closed-form sum against the steps added one by one, the paged capacity, the
`tcalc inference` / `serve` JSON, and the refusals by name."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

import transformer_calc as tc
from test_deepseek_v4 import CACHE_CFG, PUBLISHED, model
from test_inference import toy_gpu
from transformer_calc.cli import run
from transformer_calc.errors import TcalcError
from transformer_calc.estimators import deepseek_v4 as v4
from transformer_calc.estimators.inference import deepseek_v4 as inf
from transformer_calc.estimators.inference.roofline import (
    InferenceSpec,
    decode,
    decode_step,
    inference_memory,
    kv_cache,
    matmul_params,
    prefill_step,
)
from transformer_calc.estimators.inference.serving import ServingSpec, capacity, kv_sequence_bytes
from transformer_calc.model.units import FLOPS_PER_MAC

M = model(CACHE_CFG)  # L 4 (sliding, CSA, HCA, CSA), D 32, A 4, h_d 8, V 300, E 4, k 2, F 12, W 6, m 4, m' 8, d_I 4, H_I 2
GPU = toy_gpu(peak=10**12, bw=10**9, memory=10**7)

# kv_cache_deepseek_v4.py -v, case "sliding, CSA m=4, HCA m'=8, W=6", prompt S = 13, 2 sequences: the bytes of
# every tensor transformers 5.23's cache holds after the prompt and after each decode step (torch 2.13, CPU)
MEASURED = {"fp32": [5184, 6080, 6976, 4032, 4928, 5824, 6720], "bf16": [2592, 3040, 3488, 2016]}


def spec(**kw) -> InferenceSpec:
    return InferenceSpec(**{"batch_size": 2, "prompt_len": 13, "new_tokens": 7, **kw})


@pytest.mark.parametrize("dtype", sorted(MEASURED))
def test_state_bytes_equal_transformers_cache(dtype: str) -> None:
    """The state per sequence, the KV cache of `tcalc inference` and its deepseek_v4_state section hold the
    bytes transformers' cache tensors hold, after the prompt of 13 and after each decode step."""
    for step, measured in enumerate(MEASURED[dtype]):
        c = 13 + step
        assert 2 * inf.state_bytes(M, c, dtype) == measured
        s = spec(kv_dtype=dtype, new_tokens=step + 1)
        assert kv_cache(M, s).total_bytes == measured == kv_cache(M, s).per_gpu_bytes
        assert inf.decode_state(M, s).total_bytes == measured


def test_state_parts_by_hand() -> None:
    """At c = 19 (bf16): window min(19, 5) tokens x h_d x (2 + 3) = 200; CSA 19 // 4 = 4 entries x (8 + 4) x 2
    layers, HCA 19 // 8 = 2 x 8; buffers (kv and gate) 2·(2 layers·(19 mod 4 = 3)·2·12 + (19 mod 8 = 3)·8); overlap
    2·2·4·12 (docs/formulas.md §5.16): 840 values."""
    p = inf.decode_state(M, spec(new_tokens=7))
    assert p.context_len == 19 and p.layers_by_kind == {"sliding": 1, "csa": 2, "hca": 1}
    assert (p.window_bytes_per_sequence, p.compressed_bytes_per_sequence) == (2 * 200, 2 * (96 + 16))
    assert (p.buffer_bytes_per_sequence, p.overlap_bytes_per_sequence) == (2 * 2 * (2 * 3 * 2 * 12 + 3 * 8), 2 * 192)
    assert p.bytes_per_sequence == 1680 == inf.state_bytes(M, 19) and p.total_bytes == 3360


def test_matmul_params_by_hand() -> None:
    """forward_flops of one token less its attention core, / 2, plus the LM head D·V."""
    f = v4.forward_flops(M, 1, 1)
    assert f.blocks - f.attention_cores + f.indexer + f.idle_compressors == 111360
    assert matmul_params(M) == 111360 // 2 + 32 * 300 == 65280


def test_decode_step_by_hand() -> None:
    """B = 2, the token at c = 19, bf16 weights and state (the toy GPU: 1 TFLOP/s, 1 GB/s)."""
    s = decode_step(M, GPU, spec(), 19)
    # 2·2·B·A·h_d per key: min(19, W 6) window keys in all 4 layers, 19 // 4 = 4 entries on each CSA layer
    # (below k_I 512), 19 // 8 = 2 on HCA; the 2 CSA indexers score 4 entries, 2·B·H_I·d_I each
    cores = 2 * 2 * 2 * 4 * 8 * (4 * 6 + 2 * 4 + 2)
    scoring = 2 * 2 * 2 * 2 * 4 * 4
    assert s.attention_flops == cores + scoring == 8960
    assert s.matmul_flops == 2 * 2 * 65280 and s.flops == 270080
    # every parameter but the embedding, less the expected untouched experts: B = 2 tokens of k 2 of E 4 leave
    # E·(1 − k/E)^B = 1 expert idle in each of the 4 MoE layers (3·D·F = 1152 parameters each), bf16
    assert s.weight_bytes == 2 * (80909 - 9600 - 4 * 1 * 3 * 32 * 12)
    assert s.kv_read_bytes == 2 * 2 * 728 == 5824 // 2  # the state at 18 tokens (fixture: fp32 5,824 bytes, 2 seqs)
    # the token's window entry (h_d, 2·h_d on the sliding-only layer) and its kv and gate in the open windows
    assert s.kv_write_bytes == 2 * 2 * (8 * (2 + 3) + 2 * (2 * 2 * (8 + 4)) + 2 * 8) == 2 * 2 * inf.appended_elements(M, 19) == 608
    assert s.bytes_moved == 142618 - 9216 + 2912 + 608 and s.bound == "memory"
    assert s.seconds == 136922 / 10**9


def test_prefill_by_hand() -> None:
    """B = 2 prompts of S = 13, causal: token i attends min(i, 6) window keys, floor(i / 4) CSA entries
    (sum 18), floor(i / 8) HCA entries (sum 6); sum of min(i, 6) = 63. Written: 13 window tokens per layer
    and the compressed layers' state at 13."""
    s = prefill_step(M, GPU, spec())
    assert s.matmul_flops == FLOPS_PER_MAC * 2 * 13 * 65280
    per_key, per_score = 4 * 2 * 8, 2 * 4  # A·2·h_d and H_I·d_I, FLOPs/2
    assert s.attention_flops == FLOPS_PER_MAC * 2 * (per_key * (4 * 63 + 2 * 18 + 6) + per_score * 2 * 18) == 76416
    # windows 13 x (16 + 3·8); CSA 3·12 + 1 open token·48 + overlap 96, twice; HCA 1·8 + 5·16
    assert s.kv_write_bytes == 2 * 2 * (13 * 40 + 2 * (36 + 48 + 96) + 88) == 3872
    assert s.kv_read_bytes == 0 and s.weight_bytes == 142618


def test_decode_sum_by_hand() -> None:
    """B = 2 after a prompt of 13: the steps at c = 14 .. 19. Window keys 6 per layer each step; CSA entries
    3, 3, 4, 4, 4, 4 (c // 4); HCA 1, 1, 2, 2, 2, 2 (c // 8); the states at 13 .. 18 read."""
    d = decode(M, GPU, spec())
    per_key, score = 2 * 2 * 2 * 4 * 8, 2 * 2 * 2 * 4
    fixed = 2 * 2 * 65280  # matmuls and LM head per step
    assert d.flops == 6 * fixed + per_key * (6 * 4 * 6 + 2 * 22 + 10) + score * 2 * 22 == 1618816
    assert d.bytes_moved == 6 * (142618 - 9216) + sum(MEASURED["fp32"][:6]) // 2 + 6 * 608 == 820572  # 1 expert idle (above)
    assert d.bound == "memory" and d.seconds == pytest.approx(820572 / 10**9, rel=1e-12)


def test_topk_caps_the_csa_attention() -> None:
    """index_topk 3: a CSA query attends min(c // 4, 3) entries and reads their h_d; its indexer still scores
    and reads every entry's d_I key."""
    small = model(CACHE_CFG | {"index_topk": 3})
    a, b = decode_step(small, GPU, spec(), 40), decode_step(M, GPU, spec(), 40)
    assert b.attention_flops - a.attention_flops == 2 * 2 * 2 * 4 * 8 * 2 * (10 - 3)
    # read at 39 tokens: 9 CSA entries, 3 attended: 6 x h_d x 2 CSA layers fewer values
    assert b.kv_read_bytes - a.kv_read_bytes == 2 * 2 * 6 * 8 * 2


@settings(max_examples=25, deadline=None)
@given(B=st.integers(1, 9), S=st.integers(1, 60), N=st.integers(1, 90), topk=st.integers(1, 12),
       bw_exp=st.integers(6, 13), dtype=st.sampled_from(["bf16", "fp32", "fp8"]))
def test_decode_sum_equals_the_steps(B: int, S: int, N: int, topk: int, bw_exp: int, dtype: str) -> None:
    """The closed form (one sum per residue modulo lcm(m, m') and per piece) equals the N - 1 steps added one
    by one (a test may loop; the estimator does not): FLOPs, bytes, compute-bound steps and seconds."""
    m = model(CACHE_CFG | {"index_topk": topk})
    gpu = toy_gpu(peak=10**12, bw=10**bw_exp, memory=10**9)
    s = spec(batch_size=B, prompt_len=S, new_tokens=N, kv_dtype=dtype)
    d = decode(m, gpu, s)
    steps = [decode_step(m, gpu, s, c) for c in range(S + 1, S + N)]
    assert (d.steps, d.flops, d.bytes_moved) == (N - 1, sum(x.flops for x in steps), sum(x.bytes_moved for x in steps))
    assert d.compute_bound_steps == sum(x.bound == "compute" for x in steps)
    assert d.seconds == pytest.approx(sum(x.seconds for x in steps), rel=1e-12, abs=1e-300)


@settings(max_examples=40, deadline=None)
@given(c=st.integers(8, 5_000), periods=st.integers(1, 20))
def test_state_grows_linearly_past_the_window(c: int, periods: int) -> None:
    """Past the window (W - 1 = 5 tokens) and the first CSA window, a period of lcm(4, 8) = 8 tokens adds
    exactly 2 CSA entries (h_d + d_I) on 2 layers and 1 HCA entry (h_d): the window is constant, the open
    windows repeat, the entries grow linearly (docs/formulas.md §5.16)."""
    a, b = v4.cache_elements(M, c), v4.cache_elements(M, c + 8 * periods)
    assert b.window == a.window == 5 * 8 * 5 and (b.buffers, b.overlap) == (a.buffers, a.overlap)
    assert b.compressed - a.compressed == periods * (2 * 2 * 12 + 8)


@settings(max_examples=40, deadline=None)
@given(B=st.integers(1, 200), S=st.integers(1, 3_000), N=st.integers(1, 300))
def test_memory_grows_with_batch(B: int, S: int, N: int) -> None:
    a = inference_memory(M, GPU, spec(batch_size=B, prompt_len=S, new_tokens=N))
    b = inference_memory(M, GPU, spec(batch_size=B + 1, prompt_len=S, new_tokens=N))
    assert b.total_bytes > a.total_bytes and b.kv_cache_bytes > a.kv_cache_bytes
    assert a.kv_cache_bytes == B * inf.state_bytes(M, S + N - 1)


def test_longest_prompt_fits() -> None:
    """The longest prompt (its buffers priced at their largest, a non-decreasing bound) fits; one more does not
    fit the bound."""
    gpu = toy_gpu(peak=10**12, bw=10**9, memory=10**6)
    s = spec(batch_size=3, new_tokens=5)
    mem = inference_memory(M, gpu, s)
    assert 0 < mem.max_prompt_len < M.max_seq_len
    assert inference_memory(M, gpu, dataclasses.replace(s, prompt_len=mem.max_prompt_len)).fits


def test_paged_sequence_by_hand() -> None:
    """A sequence of 40 tokens in blocks of 16: the sliding-only layer's window (2·h_d) min(3, ceil(6 / 16) + 1)
    = 2 blocks, the compressed layers' windows (h_d) 2 blocks each; the CSA layers' 10 entries one block of 16
    entries (h_d + d_I), their buffers at 3 tokens (48 each) and overlap (96); HCA 5 entries one block (h_d),
    buffers at 7 tokens (16 each): a constant slot beside the growing blocks."""
    s = spec(prompt_len=33, new_tokens=8)
    elements = 16 * 2 * 16 + 3 * 8 * 2 * 16 + 2 * (16 * 12 + 3 * 48 + 96) + (16 * 8 + 7 * 16)
    assert kv_sequence_bytes(M, s, ServingSpec(), 40) == 2 * elements == 4768
    cap = capacity(M, toy_gpu(peak=10**12, bw=10**9, memory=10**10), s, ServingSpec())
    assert cap.block_bytes == 2 * 16 * (16 + 3 * 8)  # one block of every layer's window
    assert cap.max_concurrent_sequences == cap.kv_budget_bytes // 4768


def test_experts_over_ep_gpus_by_hand() -> None:
    """ep 2 (T 1): each GPU holds 2 of the 4 routed experts (3·32·12 each, 4 layers) and its own sequences'
    attention and state; a decode step of B 2 sends its 2·2 expert assignments through two all-to-alls per
    MoE layer (roofline._communication_exact), and reads the share of its 2 experts that the ep/T·B = 4 tokens
    routed over the group are expected to touch, 1 − (1 − k/E)^4 = 15/16 (memory.untouched_share)."""
    s = spec(expert_parallel=2)
    mem = inference_memory(M, GPU, s)
    assert mem.weights_bytes == 2 * (80909 - 4 * 2 * 3 * 32 * 12) == 143386
    assert mem.kv_cache_bytes == 3360  # the B sequences of this GPU's attention group, at 19 tokens
    step = decode_step(M, GPU, s, 19)
    assert step.weight_bytes == 143386 - 2 * 9600 - 2 * 4 * 2 * 3 * 32 * 12 // 16 and step.flops == 270080  # the per-GPU matmuls stay the average
    assert step.comm.all_to_alls == 2 * 4 and step.comm.all_reduces == 0 and step.comm.seconds > 0


@pytest.mark.parametrize("kw, field", [
    ({"tensor_parallel": 2}, "tensor parallelism .T 2"), ({"tensor_parallel": 2, "expert_parallel": 2}, "tensor parallelism .T 2"),
    ({"expert_parallel": 3}, "n_experts"), ({"kv_cache": False}, "kv_cache"), ({"cache_kv_heads": 1}, "cache_kv_heads"),
])
def test_unmodeled_layouts_refused_by_name(kw: dict, field: str) -> None:
    with pytest.raises((TcalcError, ValueError), match=field):
        decode_step(M, GPU, spec(**kw), 20)


def test_quantized_format_refused_by_name() -> None:
    with pytest.raises(TcalcError, match="DeepSeek-V4"):
        prefill_step(M, GPU, spec(weight_dtype="gptq-int4"))


def test_rates_with_a_long_period_refused() -> None:
    odd = model(CACHE_CFG | {"compress_rates": {"compressed_sparse_attention": 97, "heavily_compressed_attention": 89}})
    with pytest.raises(ValueError, match="least common multiple"):
        decode(odd, GPU, spec())


def test_state_bytes_bad_input_names_the_field() -> None:
    with pytest.raises(TcalcError, match="context_len"):
        inf.state_bytes(M, 0)
    with pytest.raises(TcalcError, match="kv_dtype"):
        inf.state_bytes(M, 4, "int3")
    llama = model({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
                   "intermediate_size": 128, "vocab_size": 100})
    with pytest.raises(TcalcError, match="deepseek_v4"):
        inf.state_bytes(llama, 4)


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert run([*args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_inference_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`tcalc inference --hf-config` on the toy: its JSON equals the library, the state by part beside the
    KV cache that holds the same bytes."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CACHE_CFG))
    data = _json(capsys, "inference", "--hf-config", str(path), "--gpu", "h100", "--B", "2", "--S", "13",
                 "--new-tokens", "7")
    assert data["kv_cache"]["total_bytes"] == 3360 == data["deepseek_v4_state"]["total_bytes"]
    assert data["deepseek_v4_state"]["compressed_bytes_per_sequence"] == 224
    assert data["decode"]["flops"] == 1618816 and data["prefill"]["attention_flops"] == 76416
    assert data["memory"]["per_gpu"]["kv_cache_bytes"] == 3360 and "serving" in data
    api = tc.inference(hf_config=str(path), gpu="h100", B=2, S=13, new_tokens=7)
    assert api.model_dump(mode="json") == data


def test_cli_serve_json(capsys: pytest.CaptureFixture[str]) -> None:
    """`tcalc serve` on the published DeepSeek-V4-Flash config: one GPU per replica, its T 2 layout rejected by name."""
    data = _json(capsys, "serve", "--hf-config", str(PUBLISHED), "--gpu", "b200", "--gpus", "2", "--prompt-len", "4k",
                 "--output-len", "512", "--weight-dtype", "int4")
    feasible = [x for x in data["layouts"] if x["feasible"]]
    assert [x["tensor"] for x in feasible] == [1] and feasible[0]["replicas"] == 2
    assert feasible[0]["concurrency"] >= 1
    rejected = [x for x in data["layouts"] if not x["feasible"]]
    assert rejected and all("DeepSeek-V4" in x["reason"] for x in rejected)


def test_preset_flash_runs() -> None:
    """The preset of the published config: 284,332,230,231 parameters; at 4 bits on a B200 a 64K context fits."""
    r = tc.inference("deepseek-v4-flash", gpu="b200", S=65536, new_tokens=1024, weight_dtype="int4")
    assert r.memory.per_gpu.weights_bytes == -(-284332230231 // 2) and r.memory.fits
    assert r.deepseek_v4_state is not None and r.decode.bound == "memory"


def test_cli_sweep_points_equal_inference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`tcalc sweep` prices a DeepSeek-V4 point as `tcalc inference` does (B 1 and 2, S 13, 7 new tokens)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CACHE_CFG))
    metrics = "kv_cache_bytes,inference_memory_bytes,time_to_first_token_s,time_per_output_token_s,decode_bound"
    data = _json(capsys, "sweep", "--hf-config", str(path), "--B", "1,2", "--S", "13", "--new-tokens", "7",
                 "--gpu", "h100", "--metrics", metrics)
    assert data["points_total"] == 2 and data["skipped"] == 0
    for row in data["points"]:
        one = _json(capsys, "inference", "--hf-config", str(path), "--B", str(row["batch_size"]), "--S", "13",
                    "--new-tokens", "7", "--gpu", "h100")
        assert row["kv_cache_bytes"] == one["kv_cache"]["total_bytes"] == row["batch_size"] * 1680
        assert row["inference_memory_bytes"] == one["memory"]["per_gpu"]["total_bytes"]
        assert row["time_per_output_token_s"] == one["decode"]["time_per_output_token_s"]
        assert row["time_to_first_token_s"] == one["time_to_first_token_s"]
        assert row["decode_bound"] == one["decode"]["bound"]


def test_cli_serve_expert_parallel_json(capsys: pytest.CaptureFixture[str]) -> None:
    """`tcalc serve --ep 8` on 16 H100s: replicas of 8 GPUs, each GPU 32 of the 256 experts and its own sequences;
    the library's layout equals the JSON."""
    args = ["--preset", "deepseek-v4-flash", "--gpu", "h100", "--gpus", "16", "--ep", "8", "--prompt-len", "2k",
            "--output-len", "256", "--tpot", "0.05"]
    data = _json(capsys, "serve", *args)
    best = data["best"]
    assert best is not None and (best["tensor"], best["replicas"], best["attention_groups"]) == (1, 2, 8)
    assert best["tpot_s"] <= 0.05 and best["concurrency"] >= 1
    api = tc.serve("deepseek-v4-flash", gpu="h100", gpus=16, ep=8, prompt_len=2048, output_len=256, tpot_s=0.05)
    assert api.model_dump(mode="json") == data


def test_long_context_against_deepseek_v32() -> None:
    """docs/validation.md: at 1M tokens DeepSeek's model card gives V4-Flash 7 % of V3.2's KV cache and 10 % of
    its single-token FLOPs (quoted by learnaivisually.com and docs.bswen.com; FP8/FP4 storage, FP8-equivalent
    FLOPs). tcalc, both in bf16 at c = 2^20, B = 1: 8.0 % and 12.0 % (nothing fitted)."""
    from transformer_calc.sources.presets import gpu, preset_model

    c, b200 = 2**20, gpu("b200")
    s = InferenceSpec(batch_size=1, prompt_len=c - 1, new_tokens=2, weight_dtype="bf16")
    v4f, v32 = preset_model("deepseek-v4-flash"), preset_model("deepseek-v3.2")
    kv = (kv_cache(v4f, s, c).total_bytes, kv_cache(v32, s, c).total_bytes)
    flops = (decode_step(v4f, b200, s, c).flops, decode_step(v32, b200, s, c).flops)
    assert kv == (7_220_270_080, 90_060_095_488) and flops == (140_347_572_224, 1_165_907_460_096)
    assert round(100 * kv[0] / kv[1], 1) == 8.0 and round(100 * flops[0] / flops[1], 1) == 12.0


@settings(max_examples=60, deadline=None)
@given(c=st.integers(1, 20_000), block=st.sampled_from([1, 16, 32, 64]), topk=st.integers(1, 600))
def test_paged_state_bounds_the_held_state(c: int, block: int, topk: int) -> None:
    """A paged sequence (window blocks, entry blocks, the open windows' constant slot) never holds less than the
    state transformers holds at that context, and never shrinks as the context grows (capacity's bisection)."""
    m = model(CACHE_CFG | {"index_topk": topk})
    s, serving = spec(batch_size=1), ServingSpec(block_size=block)
    paged = kv_sequence_bytes(m, s, serving, c)
    assert paged >= inf.state_bytes(m, c) and kv_sequence_bytes(m, s, serving, c + 1) >= paged
