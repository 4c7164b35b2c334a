"""Pipeline schedules (issue 24, transformer_calc/estimators/training/schedules.py): each bubble
worked by hand from its paper's formula, the orderings between them, their memory, and the CLI
(`--pipeline-schedule`, `--virtual-stages auto`)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_calc.estimators.training.memory import training_memory
from transformer_calc.estimators.training.schedules import bubble_s, forwards_in_flight
from transformer_calc.estimators.training.train import estimate_step
from transformer_calc.model.config import Parallelism, PipelineSchedule, Training, Workload
from transformer_calc.sources.presets import gpu as gpu_by_name
from transformer_calc.sources.presets import preset_model

S1F1B, SI, ZBH1, ZBV, DUAL = (PipelineSchedule.one_f_one_b, PipelineSchedule.interleaved, PipelineSchedule.zb_h1,
                              PipelineSchedule.zb_v, PipelineSchedule.dualpipe)


def test_bubbles_by_hand():
    """P = 4 even stages, t = F + B = 3, B = 2, W = 1 per micro-batch (DeepSeek-V3 Table 2's
    letters): 1F1B (P−1)(F+B) = 9; interleaved v = 2: 4.5; ZB-H1 (P−1)(F+B−2W) = 3; ZB-V over
    chunks of half a stage (P−1)(F_c+B_c−3W_c) = 3·(1.5 − 1.5) = 0; DualPipe
    (P/2−1)(F&B+B−3W) with chunks of half a stage = 1·(1.5 + 1 − 1.5) = 1."""
    stages = [(4, 3.0, 2.0, 1.0)]
    assert bubble_s(S1F1B, stages, 4, 1) == pytest.approx(9)
    assert bubble_s(SI, stages, 4, 2) == pytest.approx(4.5)
    assert bubble_s(ZBH1, stages, 4, 1) == pytest.approx(3)
    assert bubble_s(ZBV, stages, 4, 2) == pytest.approx(0)
    assert bubble_s(DUAL, stages, 4, 2) == pytest.approx(1)
    # uneven stages (a flow shop): 1F1B's bubble is Σ t_s − max t_s
    uneven = [(1, 2.0, 1.5, 0.5), (2, 3.0, 2.0, 1.0), (1, 4.0, 3.0, 1.0)]
    assert bubble_s(S1F1B, uneven, 4, 1) == pytest.approx(2 + 6 + 4 - 4)
    assert bubble_s(ZBH1, uneven, 4, 1) == pytest.approx(1 + 2 + 2 - 2)
    assert bubble_s(S1F1B, stages, 1, 1) == 0


@settings(max_examples=80, deadline=None)
@given(P=st.integers(2, 64).map(lambda p: 2 * (p // 2) or 2), t=st.floats(0.01, 10), b_share=st.floats(0.5, 0.8),
       w_share=st.floats(0, 1))
def test_schedules_order(P, t, b_share, w_share):
    """W ≤ B ≤ t: zero-bubble schedules never idle more than 1F1B, ZB-V never more than ZB-H1,
    DualPipe never more than 1F1B; none is negative."""
    B = b_share * t
    W = w_share * B / 2  # the weight-gradient part is at most half the backward
    stages = [(P, t, B, W)]
    one = bubble_s(S1F1B, stages, P, 1)
    zb1, zbv, dual = bubble_s(ZBH1, stages, P, 1), bubble_s(ZBV, stages, P, 2), bubble_s(DUAL, stages, P, 2)
    assert 0 <= zbv <= zb1 <= one + 1e-12 and 0 <= dual <= one + 1e-12


def test_in_flight_by_schedule():
    assert forwards_in_flight(ZBV, 8, 2, 32, 7) == [8, 8]  # every stage holds P micro-batches
    assert forwards_in_flight(DUAL, 8, 2, 32, 0) == [9, 9]  # P + 1
    assert forwards_in_flight(DUAL, 8, 2, 4, 0) == [4, 4]  # at most m
    assert forwards_in_flight(ZBH1, 8, 1, 32, 0) is None  # 1F1B's count


LLAMA70 = preset_model("llama-3-70b")
W = Workload(seq_len=4096, batch_size=1)
TR = Training(flash=True, framework="megatron", micro_batches=16)


def _par(schedule, v):
    return Parallelism(tensor=8, pipeline=8, data=2, sequence_parallel=True, zero=1, virtual_stages=v,
                       pipeline_schedule=schedule)


def test_step_and_memory_by_schedule():
    h100 = gpu_by_name("h100")
    step = {s: estimate_step(LLAMA70, W, TR, _par(s, v), h100, global_batch=32)
            for s, v in (("1f1b", 1), ("zb-h1", 1), ("zb-v", 2), ("dualpipe", 2))}
    assert step["zb-h1"].compute_s == step["1f1b"].compute_s
    assert step["zb-v"].pp_bubble_s < step["zb-h1"].pp_bubble_s < step["1f1b"].pp_bubble_s
    assert step["zb-v"].pp_comm_s == pytest.approx(2 * step["1f1b"].pp_comm_s)  # a V: twice the traffic
    one = training_memory(LLAMA70, W, TR, _par("1f1b", 1))
    zb1 = training_memory(LLAMA70, W, TR, _par("zb-h1", 1))
    dual = training_memory(LLAMA70, W, TR, _par("dualpipe", 2))
    assert [s.total for s in zb1] == [s.total for s in one]  # ZB-H1 holds what 1F1B holds
    assert dual[0].weights == 2 * one[0].weights and dual[0].gradients == 2 * one[0].gradients
    assert dual[0].optimizer == one[0].optimizer


def test_schedule_needs_its_chunks():
    with pytest.raises(ValueError, match="virtual-stages 2"):
        Parallelism(pipeline=4, pipeline_schedule="zb-v")
    with pytest.raises(ValueError, match="must be even"):
        Parallelism(pipeline=3, virtual_stages=2, pipeline_schedule="dualpipe")
    with pytest.raises(ValueError, match="one model chunk"):
        Parallelism(pipeline=4, virtual_stages=2, pipeline_schedule="1f1b")
    assert Parallelism(pipeline=4, virtual_stages=2).schedule is SI


def _json(capsys, *argv):
    from transformer_calc.cli import run

    code = run([*argv, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_cli_schedule_and_auto_virtual_stages(capsys):
    from transformer_calc.cli import run

    base = ["train", "llama-3-70b", "--gpus", "64", "--T", "8", "--P", "8", "--sp", "--global-batch", "64",
            "--S", "8192", "--micro-batch", "1"]
    zb = _json(capsys, *base, "--pipeline-schedule", "zb-h1")
    one = _json(capsys, *base)
    assert zb["layout"]["pipeline_schedule"] == "zb-h1" and one["layout"]["pipeline_schedule"] == "1f1b"
    assert zb["breakdown"]["pp_bubble_s"] < one["breakdown"]["pp_bubble_s"]
    auto = _json(capsys, *base, "--virtual-stages", "auto")
    v = auto["layout"]["virtual_stages"]
    assert v in (1, 2)  # 80 blocks over 8 stages: 10 each, v must divide 10
    explicit = _json(capsys, *base, "--virtual-stages", str(v))
    assert explicit["step_time_s"] == auto["step_time_s"]
    code = run([*base, "--pipeline-schedule", "zb-v", "--format", "json"])
    err = capsys.readouterr().err
    assert code == 2 and "--virtual-stages 2" in err and "Traceback" not in err


def test_dualpipe_takes_deepseek_v3s_61_layers_on_pp16():
    """DeepSeek-V3 ran its 61 layers on 16 DualPipe ranks (arXiv:2412.19437 §3.2): chunks of unequal
    size, split as evenly as possible (13 stages of 4 blocks, 3 of 3; a stage's two chunks differ by
    at most one), every block placed once; the interleaved schedule still needs P·v | L."""
    from transformer_calc.estimators.training.pipeline import pipeline_stage, pipeline_units

    dual = Parallelism(pipeline=16, virtual_stages=2, pipeline_schedule="dualpipe", data=1)
    units = pipeline_units(61, dual)
    assert units == [4] * 13 + [3] * 3
    stages = [pipeline_stage(61, dual, s, units) for s in range(16)]
    blocks = sorted(b for st_ in stages for c in st_.chunks for b in range(c.start, c.stop))
    assert blocks == list(range(61))  # each block once
    assert [c.n_layers for c in stages[15].chunks] == [2, 1]
    assert [c.n_layers for c in stages[0].chunks] == [2, 2]
    with pytest.raises(ValueError, match="divisible by P x virtual stages"):
        pipeline_units(61, Parallelism(pipeline=16, virtual_stages=2, data=1))
    even = Parallelism(pipeline=4, virtual_stages=2, pipeline_schedule="dualpipe", data=1)
    assert [(c.start, c.stop) for c in pipeline_stage(16, even, 1).chunks] == [(2, 4), (10, 12)]  # as before
