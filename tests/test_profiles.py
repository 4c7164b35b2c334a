"""The torchtitan time profile (issue 24, transformer_calc/estimators/training/profiles.py): its
elementwise bytes worked by hand from torchtitan's Llama code, FSDP2's exposed communication by
hand, the invariants, the memory convention, and the CLI. Validation against torchtitan's published
runs: tools/validation/train_runs.py (docs/validation.md)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_calc.estimators.training.profiles import (
    TORCHTITAN_GEMM_FRACTION,
    attention_core_s,
    fsdp2_step,
    fused_bytes,
    torchtitan_bytes,
)
from transformer_calc.estimators.training.train import estimate_step
from transformer_calc.model.config import Parallelism, Training, Workload
from transformer_calc.sources.presets import gpu as gpu_by_name
from transformer_calc.sources.presets import preset_model

LLAMA3_8B = preset_model("llama-3-8b")  # D 4096, 32 q heads and 8 kv heads of 128, F 14336, RMSNorm, RoPE


def test_elementwise_bytes_of_llama3_8b_by_hand():
    """Per token and block, forward, p = 2 (profiles.py docstring, torchtitan 9dec370's model code):
    eager RMSNorm 4p + 28 = 36 B per D element (two norms), RoPE 2p + 16 = 20 B per q and k element
    ((32 + 8) x 128), SwiGLU 5p = 10 B per F element, two residual adds of 3p = 6 B per D element."""
    eager = torchtitan_bytes(LLAMA3_8B, 2, compiled=False)
    assert (eager.norm, eager.rope, eager.glu, eager.residual) == (36, 20, 10, 6)
    assert eager.per_token_layer(LLAMA3_8B, 1) == 2 * 36 * 4096 + 2 * 6 * 4096 + 20 * 40 * 128 + 10 * 14336 == 589824
    compiled = torchtitan_bytes(LLAMA3_8B, 2, compiled=True)  # one read and one write per fused chain
    assert compiled.per_token_layer(LLAMA3_8B, 1) == 2 * 4 * 4096 + 2 * 6 * 4096 + 4 * 40 * 128 + 6 * 14336 == 188416
    # the fused-kernel profiles (megatron, pytorch): RoPE inside the attention kernel, not counted
    assert fused_bytes(LLAMA3_8B, 2).per_token_layer(LLAMA3_8B, 1) == 2 * 4 * 4096 + 2 * 6 * 4096 + 6 * 14336
    assert eager.per_token_layer(LLAMA3_8B, 8) == 589824 / 8  # tensor parallelism shards every term


def test_fsdp2_exposed_by_hand():
    """Per block 1 s all-gather, 2 s reduce-scatter, 3 s forward, 2 s backward; root 0.5 s each way;
    4 blocks, one micro-batch. Forward: root + first block gathered in full, the other three hidden
    (1 < 3): 1.5 s. Backward: the first gather, three blocks of (1 + 2) - 2 = 1 s, the last reduce
    and the root's: 1 + 3 + 2 + 0.5 = 6.5 s. All traffic: root 0.5 + 4 gathers forward, 4 backward,
    4 reduces and the root's: 17 s."""
    kw = dict(all_gather_block_s=1.0, reduce_scatter_block_s=2.0, all_gather_root_s=0.5, reduce_scatter_root_s=0.5,
              forward_block_s=3.0, backward_block_s=2.0, blocks=4)
    t = fsdp2_step(**kw, micro_batches=1, pipelined=False)
    assert t.exposed_s == pytest.approx(1.5 + 6.5) and t.total_s == pytest.approx(17.0)
    assert fsdp2_step(**kw, micro_batches=3, pipelined=False).exposed_s == pytest.approx(3 * 8.0)
    # under PP: gathered once, reduced once per step (3 x max(0, 2 - 2) + 2 + 0.5 in the backward)
    t = fsdp2_step(**kw, micro_batches=3, pipelined=True)
    assert t.exposed_s == pytest.approx(1.5 + 2.5) and t.total_s == pytest.approx(4.5 + 8.5)


@settings(max_examples=60, deadline=None)
@given(ag=st.floats(0, 10), rs=st.floats(0, 10), f=st.floats(0, 10), b=st.floats(0, 10), L=st.integers(1, 200),
       m=st.integers(1, 64), pp=st.booleans())
def test_fsdp2_exposed_never_exceeds_the_traffic(ag, rs, f, b, L, m, pp):
    t = fsdp2_step(all_gather_block_s=ag, reduce_scatter_block_s=rs, all_gather_root_s=ag, reduce_scatter_root_s=rs,
                   forward_block_s=f, backward_block_s=b, blocks=L, micro_batches=m, pipelined=pp)
    assert 0 <= t.exposed_s <= t.total_s + 1e-9


def _step(tr: Training, par: Parallelism = Parallelism(data=8, zero=3), gpu: str = "h100", S: int = 8192, b: int = 2):
    return estimate_step(LLAMA3_8B, Workload(seq_len=S, batch_size=b), tr, par, gpu_by_name(gpu),
                         global_batch=b * par.data)


@settings(max_examples=15, deadline=None)
@given(recompute=st.sampled_from(["none", "selective", "full"]), dp=st.sampled_from([2, 8, 64]),
       gpu=st.sampled_from(["h100", "a100-80gb", "h200"]))
def test_compile_never_slows_a_step(recompute, dp, gpu):
    eager = Training(framework="torchtitan", flash=True, recompute=recompute)
    compiled = eager.model_copy(update={"compile": True})
    par = Parallelism(data=dp, zero=3)
    e, c = _step(eager, par, gpu), _step(compiled, par, gpu)
    assert c.memory_bound_s < e.memory_bound_s and c.compute_s == e.compute_s
    assert c.step_time_s < e.step_time_s


def test_torchtitan_gemms_and_attention_core_on_hopper():
    """The GEMMs at TORCHTITAN_GEMM_FRACTION of the H100's MAMF (0.801); the attention core at
    FlashAttention-2's measured rates (333 / 318 TFLOP/s, FA's count: backward 2.5x the forward)."""
    e = _step(Training(framework="torchtitan", flash=True))
    assert e.assumptions["matmul_efficiency"] == pytest.approx(0.801 * TORCHTITAN_GEMM_FRACTION)
    from transformer_calc.estimators.training.profiles import SDPA_FLASH_FLOPS_S
    from transformer_calc.estimators.training.train import lookup_efficiency

    h100 = lookup_efficiency(SDPA_FLASH_FLOPS_S, "H100-SXM5-80GB", None)
    assert h100 == (333e12, 318e12)
    assert attention_core_s(h100, 333e12, recompute_core=False) == pytest.approx(1 + 2.5 * 333 / 318)
    assert attention_core_s(h100, 333e12, recompute_core=True) == pytest.approx(2 + 2.5 * 333 / 318)
    assert lookup_efficiency(SDPA_FLASH_FLOPS_S, "A100-SXM4-80GB", None) is None  # the GEMM efficiency there
    assert attention_core_s(None, 1e12, recompute_core=True) is None


def test_fsdp2_hides_more_with_larger_micro_batches():
    """128 GPUs over a 50 GB/s NIC: the per-block all-gather of 8B/32 blocks in bf16 takes about
    10 ms; a bigger micro-batch gives each block more compute to hide it behind."""
    tr = Training(framework="torchtitan", flash=True, compile=True)
    small = _step(tr, Parallelism(data=128, zero=3), b=1)
    large = _step(tr, Parallelism(data=128, zero=3), b=4)
    assert large.dp_exposed_s < small.dp_exposed_s <= small.dp_comm_s


def test_pytorch_fsdp_prefetches_per_block_each_micro_batch():
    """The pytorch profile's FSDP (`--zero 3`: FSDP1 or FSDP2, one unit per block) gathers and
    reduces per block behind the blocks' compute, every micro-batch alike (PyTorch FSDP notes,
    "FSDP Prefetch Nuances": implicit forward prefetching is always on). 64 GPUs over the 50 GB/s
    NIC, 4 micro-batches of 2: exposed = 4 x one micro-batch's, and far below all the traffic (the
    earlier price hid the 8 whole-model gathers behind one micro-batch's backward only)."""
    tr = Training(framework="pytorch", flash=True, recompute="full")

    def step(m: int):
        par = Parallelism(data=64, zero=3)
        return estimate_step(LLAMA3_8B, Workload(seq_len=4096, batch_size=2), tr, par, gpu_by_name("h100"),
                             global_batch=2 * 64 * m)

    one, four = step(1), step(4)
    assert four.dp_exposed_s == pytest.approx(4 * one.dp_exposed_s, rel=1e-9)
    assert 0 < four.dp_exposed_s < 0.5 * four.dp_comm_s


def test_torchtitan_memory_keeps_no_sharded_16_bit_copy():
    """FSDP2 in torchtitan: the sharded fp32 parameters are the master copy; pytorch's convention
    counts a 2-byte sharded compute copy beside it (2 B/param/dp more). Under PP the 16-bit
    parameters of the stage stay gathered between micro-batches."""
    from transformer_calc.estimators.training.memory import training_memory

    w = Workload(seq_len=4096, batch_size=1)
    par = Parallelism(data=8, zero=3)
    titan = training_memory(LLAMA3_8B, w, Training(framework="torchtitan", flash=True), par)[0]
    torch_ = training_memory(LLAMA3_8B, w, Training(framework="pytorch", flash=True), par)[0]
    assert titan.weights == 0 and torch_.weights == -(-titan.params // 8) * 2
    assert titan.optimizer == torch_.optimizer  # the fp32 master and the two moments, sharded
    pp = training_memory(LLAMA3_8B, w, Training(framework="torchtitan", flash=True),
                         Parallelism(data=4, pipeline=2, zero=3))[0]
    assert pp.weights == pp.params * 2


def _json(capsys, *argv):
    from transformer_calc.cli import run

    code = run([*argv, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_cli_torchtitan_compile(capsys):
    args = ["train", "llama-3-8b", "--gpus", "8", "--S", "8192", "--global-batch", "16", "--micro-batch", "2",
            "--zero", "3", "--framework", "torchtitan", "--recompute", "full"]
    eager, compiled = _json(capsys, *args), _json(capsys, *args, "--compile")
    assert compiled["training"]["compile"] is True and eager["training"]["compile"] is False
    assert compiled["breakdown"]["memory_bound_s"] < eager["breakdown"]["memory_bound_s"]
    assert compiled["memory"]["peak_bytes"] == eager["memory"]["peak_bytes"]


def test_cli_compile_needs_torchtitan(capsys):
    from transformer_calc.cli import run

    code = run(["train", "llama-3-8b", "--global-batch", "16", "--compile", "--format", "json"])
    _, err = capsys.readouterr()
    assert code == 2 and "--framework torchtitan" in err and "Traceback" not in err


def test_power_capped_board_runs_at_the_cube_root_clock():
    """A board capped below the power its peaks are rated at (Meta's 500 W Grand Teton H100, peaks of
    the 700 W SXM): matmuls and the SDPA attention core at (500/700)^(1/3) of the rated clock
    (step.POWER_CAP_CLOCK_EXPONENT), HBM traffic unchanged; a board at its rated power: 1."""
    from transformer_calc.estimators.training.step import power_cap_clock_scale

    capped, sxm = gpu_by_name("h100-96gb-hbm2e"), gpu_by_name("h100")
    assert (capped.board_power_w, capped.rated_power_w) == (500, 700)
    assert power_cap_clock_scale(capped) == pytest.approx((500 / 700) ** (1 / 3)) == pytest.approx(0.8939, abs=1e-4)
    assert power_cap_clock_scale(sxm) == 1.0
    # the law against NVIDIA's datasheets of the one GH100 die: the 400 W NVL's 835.5 over the SXM's 989.4
    assert (400 / 700) ** (1 / 3) == pytest.approx(835.5 / 989.4, rel=0.02)
    tr = Training(precision="mixed", recompute="op", flash=True, framework="torchtitan", compile=True)
    w, par = Workload(seq_len=8192, batch_size=2), Parallelism(data=8, zero=3)
    est = {g: estimate_step(LLAMA3_8B, w, tr, par, gpu_by_name(g), global_batch=16)
           for g in ("h100-96gb-hbm2e", "h100")}
    # the same die: the capped board's compute is the SXM's over the clock scale (attention core too)
    assert est["h100-96gb-hbm2e"].compute_s == pytest.approx(est["h100"].compute_s / power_cap_clock_scale(capped))
    # the memory-bound term moves with HBM bandwidth only (2.4 vs 3.35 TB/s), not with the clock
    assert est["h100-96gb-hbm2e"].memory_bound_s == pytest.approx(est["h100"].memory_bound_s * 3350 / 2400)


def test_power_capped_board_is_one_answer_in_training_and_inference():
    """One answer per question: the capped board's clock applies to inference's and serve's expected
    times as it does to train's (devices/hardware.power_cap_clock_scale): a compute-bound prefill's
    expected compute is the SXM's over the clock scale; the datasheet roofline bound is unchanged."""
    import transformer_calc as tc
    from transformer_calc.devices.hardware import power_cap_clock_scale

    clock = power_cap_clock_scale(gpu_by_name("h100-96gb-hbm2e"))
    r = {g: tc.inference("llama-3-8b", gpu=g, batch_size=8, prompt_len=4096, new_tokens=1)
         for g in ("h100-96gb-hbm2e", "h100")}
    assert r["h100-96gb-hbm2e"].expected.prefill.compute_s == pytest.approx(
        r["h100"].expected.prefill.compute_s / clock, rel=1e-6)
    assert r["h100-96gb-hbm2e"].prefill.compute_s == pytest.approx(r["h100"].prefill.compute_s, rel=1e-9)
