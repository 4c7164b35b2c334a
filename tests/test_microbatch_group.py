"""N, the contiguous micro-batches per model chunk of the interleaved schedule (issue 24, round 4):
the Llama 3 paper's tunable N (arXiv:2407.21783 §3.3.2, Figure 6), Megatron-core's
`microbatch_group_size_per_vp_stage` (P <= N <= m; warm-up 2·(P − s − 1) + (v − 1)·N)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_calc.model.config import Parallelism, Training, Workload
from transformer_calc.estimators.training.memory import chunk_forwards_in_flight, training_memory
from transformer_calc.sources.presets import preset_model


def test_default_is_narayanans_schedule():
    for P, v, m, s in ((4, 2, 8, 0), (4, 2, 8, 3), (16, 8, 16, 1), (16, 8, 32, 1)):
        assert chunk_forwards_in_flight(P, v, m, s, P) == chunk_forwards_in_flight(P, v, m, s)


def test_by_hand():
    # P 4, v 2, m 8, stage 0: warm-up 2·3 + 1·N + 1; N 4: 11 = [4 + 3, 4]; N 8 (breadth-first): 15 = [8, 7]
    assert chunk_forwards_in_flight(4, 2, 8, 0, 4) == [7, 4]
    assert chunk_forwards_in_flight(4, 2, 8, 0, 8) == [8, 7]
    # N 6 of m 8: a group of 6 through both chunks (12), then the last 2: 6·2 + 1 = 13 -> [6 + 1, 6]
    assert chunk_forwards_in_flight(4, 2, 8, 0, 6) == [7, 6]
    # m 20, N 16 (m not a multiple of N): 40 = every forward; the last group of 4 through both chunks
    assert chunk_forwards_in_flight(16, 2, 20, 0, 16) == [20, 20]


@settings(max_examples=60, deadline=None)
@given(P=st.sampled_from([2, 4, 8, 16]), v=st.sampled_from([2, 4, 8]), extra=st.integers(0, 40), s=st.integers(0, 15),
       dN=st.integers(0, 40))
def test_in_flight_invariants(P, v, extra, s, dN):
    """Per chunk at most m forwards, chunk 0 first, the total the warm-up's (at most m·v), and a
    larger N never holds fewer."""
    m, s = P + extra, s % P
    N = P + dN % (m - P + 1)
    alive = chunk_forwards_in_flight(P, v, m, s, N)
    assert all(0 <= k <= m for k in alive) and alive == sorted(alive, reverse=True)
    assert sum(alive) == min(2 * (P - s - 1) + (v - 1) * N + 1, m * v)
    if N < m:
        assert sum(chunk_forwards_in_flight(P, v, m, s, N + 1)) >= sum(alive)


def test_llama3_8192_gpu_layout_with_n():
    """Table 4's 8,192-GPU layout (32 per replica): N = P = 16 holds 141 chunk forwards on stage 1,
    N = 24 holds 197; each one-block chunk forward of Llama 3.1 405B (S 8192, TP 8 + SP, Megatron's
    conventions) is the same bytes, so the activations grow by 56/141."""
    m = preset_model("llama-3.1-405b")
    par = Parallelism(tensor=8, sequence_parallel=True, pipeline=16, virtual_stages=8, data=64, zero=2,
                      embedding_in_split=True, loss_in_split=True)
    tr = Training(flash=True, framework="megatron", micro_batches=32)
    base = training_memory(m, Workload(seq_len=8192), tr, par)[1]
    wide = training_memory(m, Workload(seq_len=8192), tr, par.model_copy(update={"microbatch_group": 24}))[1]
    assert (base.in_flight, wide.in_flight) == (141, 197)
    assert wide.activations * 141 == base.activations * 197
    assert wide.weights == base.weights


def _cli(capsys, *argv):
    from transformer_calc.cli import run

    code = run([*argv, "-f", "json"])
    out, err = capsys.readouterr()
    return code, out, err


LAYOUT = ["train", "--preset", "llama-3.1-405b", "--gpu", "h100", "--T", "8", "--P", "16", "--sp", "--virtual-stages", "8",
          "--zero", "2", "--embedding-in-split", "--loss-in-split", "--micro-batch", "1", "--S", "8192",
          "--global-batch", "2048", "--gpus", "8192"]


def test_train_flag_memory_not_time(capsys):
    """The bubble stays (P − 1)/(v·m) (the paper: "Overall pipeline bubble ratio is (PP−1)/(V·M)"):
    same step time; the peak grows with N; JSON layout.microbatch_group only when given."""
    code, out, _ = _cli(capsys, *LAYOUT)
    base = json.loads(out)
    code, out, _ = _cli(capsys, *LAYOUT, "--microbatch-group", "32")
    wide = json.loads(out)
    assert code == 0 and wide["layout"]["microbatch_group"] == 32 and "microbatch_group" not in base["layout"]
    assert wide["memory"]["peak_bytes"] > base["memory"]["peak_bytes"]
    # N = 32 holds twice the warm-up's chunk forwards: 80.7 GiB of 78.7 usable, so tcalc train gives it
    # no step time (issue 34), and says what fits instead; the step time it would have is the same
    assert base["fits"] and not wide["fits"] and wide["step_time_s"] is None and wide["needs"]
    from transformer_calc.estimators.training.train import estimate_step
    from transformer_calc.model.config import Parallelism, Training, Workload
    from transformer_calc.sources.presets import gpu, preset_model

    lay = {k: v for k, v in base["layout"].items() if k not in ("gpus", "pipeline_schedule")}
    tr = Training(framework="megatron", flash=True, micro_batches=base["batch"]["micro_batches"])
    step = [estimate_step(preset_model("llama-3.1-405b"), Workload(seq_len=8192), tr,
                          Parallelism(**lay, microbatch_group=n), gpu("h100"), global_batch=2048).step_time_s
            for n in (None, 32)]
    assert step[0] == step[1] == pytest.approx(base["step_time_s"], rel=1e-12)


@pytest.mark.parametrize("extra, words", [
    (["--microbatch-group", "8"], ["microbatch_group (8)", "between P (16)", "(32)"]),
    (["--microbatch-group", "33"], ["microbatch_group (33)", "(32)"]),
])
def test_out_of_range_is_one_line(capsys, extra, words):
    code, out, err = _cli(capsys, *LAYOUT, *extra)
    assert code == 2 and not out and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert all(w in err for w in words), err


def test_needs_the_interleaved_schedule(capsys):
    code, out, err = _cli(capsys, "memory", "--preset", "gpt2", "--P", "4", "--microbatch-group", "4")
    assert code == 2 and "microbatch_group (4)" in err and "--virtual-stages" in err and "Traceback" not in err
