"""tcalc train / plan (issue 17): every term of the step time worked by hand on a tiny case, the
invariants, and the acceptance commands. Validation against published runs:
tools/validation/train_runs.py (docs/validation.md)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_calc.model.config import ModelConfig, Parallelism, Training, Workload
from transformer_calc.estimators.flops import count_flops
from transformer_calc.devices.hardware import GPU
from transformer_calc.estimators.training.train import (
    Network,
    estimate_step,
    micro_batch_count,
    plan_layouts,
    ring_all_reduce_s,
    ring_gather_s,
)

TINY = ModelConfig.model_validate({"L": 4, "D": 64, "A": 4, "V": 100, "K": 64, "bias": False})
GPU_ = GPU(name="toy", vendor="test", memory_bytes=10**12, memory_bw_bytes_s=10**12,
           peak_flops={"bf16": 10**15, "fp16": 10**15, "fp32": 10**14}, interconnect_bytes_s=2 * 10**11,
           source="test", verified=False)
NET = Network(node_size=8, intra_bytes_s=1e11, inter_bytes_s=1e10, intra_latency_s=1e-5, inter_latency_s=2e-5)


def est(par=Parallelism(), G=8, b=1, S=32, tr=Training(flash=True), net=NET, eff=0.5, **kw):
    return estimate_step(TINY, Workload(seq_len=S, batch_size=b), tr, par, GPU_, global_batch=G, network=net,
                         matmul_efficiency=eff, **kw)


def test_single_gpu_by_hand():
    e = est()
    # compute: hardware FLOPs of the whole batch (flash: the causal half of the core) at 50 % of 1e15
    flops = count_flops(TINY, Workload(seq_len=32, batch_size=8), causal=True).total
    assert e.compute_s == pytest.approx(flops / 5e14)
    assert e.micro_batches == 8
    assert e.tp_comm_s == e.pp_bubble_s == e.pp_comm_s == e.dp_comm_s == e.moe_all_to_all_s == e.cp_comm_s == 0
    # memory-bound: 3 passes x (2 norms x 2D + 2 adds x 3D + plain MLP: act in + out 2F) x p x tokens x L / bw
    per_token_layer = 2 * 2 * 64 + 2 * 3 * 64 + 2 * 256
    blocks = 3 * per_token_layer * 2 * 8 * 32 * 4
    embedding = (2 + 2 + 2 * 4) * 8 * 32 * 64  # lookup written; its gradient read, fp32 rows read and written
    loss = (2 + 4 + 4 + 2) * 8 * 32 * 100  # logits read, fp32 softmax written, read, gradient written
    assert e.memory_bound_s == pytest.approx((blocks + embedding + loss) / 0.9e12)
    assert e.step_time_s == pytest.approx(sum(e.breakdown.values()))
    assert e.mfu == pytest.approx(e.model_flops / (e.step_time_s * 1 * 1e15))


def test_ring_collectives_by_hand():
    assert ring_all_reduce_s(800, 4, 100.0, 1.0) == pytest.approx(2 * 3 / 4 * 8 + 2 * 3)  # 12 + 6
    assert ring_gather_s(800, 4, 100.0, 1.0) == pytest.approx(3 / 4 * 8 + 3)
    assert ring_all_reduce_s(800, 1, 100.0, 1.0) == 0


def test_tensor_parallel_term_by_hand():
    e = est(Parallelism(tensor=2, sequence_parallel=True))
    msg = 1 * 32 * 64 * 2  # b·S·D·p
    per = 2 * 1 / 2 * msg / 1e11 + 2 * 1 * 1e-5
    # m x (L x 4 all-reduces + the embedding's reduce-scatter + the head's input gather/scatter)
    assert e.tp_comm_s == pytest.approx(8 * (4 * 4 + 2) * per)


def test_pipeline_bubble_by_hand():
    e = est(Parallelism(pipeline=2), G=8)
    per_micro = (e.compute_s + e.memory_bound_s + e.tp_comm_s) / 8  # the slowest stage's
    first, last = e.stage_times_s
    assert last == pytest.approx(per_micro) and first < last  # the head and loss run on the last stage
    # 1F1B over stages of times t_s: (m - 1)·max t + Σ t, so the bubble is Σ t - max t
    assert e.pp_bubble_s == pytest.approx(first)
    # the last stage's share of the compute: its 2 blocks and the head, of all 4 blocks and the head
    f = count_flops(TINY, Workload(seq_len=32, batch_size=8), causal=True)
    block = f.layers / 4
    share = (2 * block + f.lm_head) / (4 * block + f.lm_head)
    assert e.compute_s == pytest.approx(f.total * share / (1e15 * 0.5))
    e2 = est(Parallelism(pipeline=2, virtual_stages=2), G=8)
    assert e2.pp_bubble_s == pytest.approx(e.pp_bubble_s / 2)
    act = 32 * 64 * 2
    assert e.pp_comm_s == pytest.approx(2 * (8 + 1) * (act / 1e11 + 1e-5))  # neighbours inside the node


def test_data_parallel_all_reduce_and_overlap():
    e = est(Parallelism(data=4), G=8, overlap_dp=False)
    from transformer_calc.estimators.params import count_params

    grads = count_params(TINY).total * 4  # fp32 gradients (mixed precision, the seed's 4 bytes)
    assert e.dp_comm_s == pytest.approx(ring_all_reduce_s(grads, 4, 1e11, 1e-5))
    assert e.dp_exposed_s == e.dp_comm_s
    hidden = est(Parallelism(data=4), G=8)
    assert hidden.dp_exposed_s <= e.dp_exposed_s


def test_layout_errors():
    with pytest.raises(ValueError, match="multiple of dp"):
        micro_batch_count(10, Parallelism(data=4), 1)
    with pytest.raises(ValueError, match="micro-batch"):
        micro_batch_count(8, Parallelism(data=2), 3)


@settings(max_examples=40)
@given(st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]), st.sampled_from([1, 2, 4]), st.floats(1.5, 10))
def test_more_bandwidth_never_slows_a_step(T, P, dp, factor):
    par = Parallelism(tensor=T, pipeline=P, data=dp, sequence_parallel=T > 1)
    slow = est(par, G=8 * dp)
    fast_net = Network(NET.node_size, NET.intra_bytes_s * factor, NET.inter_bytes_s * factor)
    fast = est(par, G=8 * dp, net=fast_net)
    assert fast.step_time_s <= slow.step_time_s


def test_bubble_vanishes_as_micro_batches_grow():
    fractions = [est(Parallelism(pipeline=4), G=G).pp_bubble_s / est(Parallelism(pipeline=4), G=G).step_time_s
                 for G in (4, 16, 64, 256)]
    assert fractions == sorted(fractions, reverse=True) and fractions[-1] < 0.02


def test_planner_best_is_never_slower_than_what_it_lists():
    plans, rejected = plan_layouts(TINY, 32, Training(flash=True), GPU_, gpus=16, global_batch=64, network=NET)
    assert plans and all(plans[0].estimate.step_time_s <= p.estimate.step_time_s for p in plans)
    assert all(p.parallelism.tensor <= NET.node_size and p.parallelism.gpus == 16 for p in plans)


def _json(capsys, *argv):
    from transformer_calc.cli import run

    code = run([*argv, "-f", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_acceptance_gpt3_on_64_a100(capsys):
    d = _json(capsys, "train", "--preset", "gpt3", "--V", "51200", "--gpus", "64", "--gpu", "a100-80gb",
              "--T", "8", "--P", "8", "--sp", "--recompute", "selective", "--global-batch", "64",
              "--micro-batch", "1", "--S", "2048")
    assert d["step_time_s"] == pytest.approx(sum(d["breakdown"].values()))
    assert 0 < d["mfu"] <= d["hfu"] < 1
    assert d["layout"]["data"] == 1 and d["batch"]["micro_batches"] == 64


def test_acceptance_plan_llama3_70b(capsys):
    d = _json(capsys, "plan", "--preset", "llama-3-70b", "--gpus", "1024", "--gpu", "h100",
              "--global-batch-tokens", "4M", "--S", "8192")
    assert d["plans"] and d["best_command"].startswith("tcalc train --preset llama-3-70b --gpus 1024")
    assert all(p["layout"]["tensor"] <= 8 for p in d["plans"])  # tensor parallelism within one node
    times = [p["step_time_s"] for p in d["plans"]]
    assert times == sorted(times)
    assert d["rejected"]


def test_train_budget_and_chosen_micro_batch(capsys):
    d = _json(capsys, "train", "--preset", "llama-3-8b", "--gpus", "8", "--gpu", "h100", "--T", "1",
              "--global-batch", "64", "--S", "4096", "--tokens", "1T", "--price-per-gpu-hour", "2")
    assert d["batch"]["micro_batch_chosen"] and d["batch"]["tried"]
    b = d["budget"]
    assert b["gpu_hours"] == pytest.approx(b["time_s"] * 8 / 3600) and b["cost"] == pytest.approx(2 * b["gpu_hours"])


PLAN_CASES = {
    # issue 21: CP was divided out twice (plan priced S/CP^2 tokens per rank: 66 GiB vs train's 126)
    "context-parallel": ["--preset", "llama-3-8b", "--gpus", "64", "--gpu", "h100", "--S", "64k", "--global-batch", "64"],
    "no-flash-pytorch": ["--preset", "gpt2", "--gpus", "8", "--gpu", "a100-80gb", "--S", "1024", "--global-batch", "64",
                         "--no-flash", "--framework", "pytorch"],
    "network": ["--preset", "llama-3-70b", "--gpus", "64", "--gpu", "h100", "--S", "4096", "--global-batch", "64",
                "--node-size", "4", "--inter-node-gb-s", "5"],
    "lora": ["--preset", "llama-3.1-8b", "--gpus", "8", "--global-batch", "32", "--S", "2048", "--finetune", "lora",
             "--lora-rank", "8"],
    "moe": ["--preset", "qwen3-30b-a3b", "--gpus", "16", "--gpu", "h100", "--S", "4096", "--global-batch", "64"],
    # issue 24: the torchtitan profile (FSDP2: ZeRO-3 only) with torch.compile
    "torchtitan": ["--preset", "llama-3-70b", "--gpus", "64", "--gpu", "h100", "--S", "8192", "--global-batch", "64",
                   "--framework", "torchtitan", "--compile"],
    "torchtitan-pipeline": ["--preset", "llama-3.1-405b", "--gpus", "128", "--gpu", "h100", "--S", "4096",
                            "--global-batch", "64", "--framework", "torchtitan"],
    # issue 24: 126 blocks, found with the embedding and loss as layers of the split (Meta's layout)
    "uneven-405b": ["--preset", "llama-3.1-405b", "--gpus", "16384", "--gpu", "h100", "--S", "8192",
                    "--global-batch", "2048"],
}


def test_plan_finds_metas_llama3_405b_layout(capsys):
    """Llama 3 paper (arXiv:2407.21783) Table 4 and §3.3.2: 405B on 16,384 H100 ran TP 8, PP 16,
    DP 128, 16M tokens, one block fewer on the first and last stages (the embedding and the loss as
    stage work; v = 8); `tcalc plan` found no layout before issue 24. Its best is at least as fast
    as Meta's layout priced by `tcalc train`, and fits."""
    plan = _json(capsys, "plan", *PLAN_CASES["uneven-405b"])
    meta = _json(capsys, "train", "--preset", "llama-3.1-405b", "--gpus", "16384", "--gpu", "h100", "--S", "8192",
                 "--global-batch", "2048", "--T", "8", "--P", "16", "--sp", "--virtual-stages", "8", "--zero", "2",
                 "--embedding-in-split", "--loss-in-split", "--micro-batch", "1")
    assert meta["memory"]["fits"] and meta["batch"]["micro_batches"] == 16
    best = plan["plans"][0]
    assert meta["step_time_s"] / best["step_time_s"] >= 0.85  # the target
    assert best["layout"]["pipeline"] == 16 and best["layout"]["embedding_in_split"] and best["layout"]["loss_in_split"]


@pytest.mark.parametrize("case", sorted(PLAN_CASES))
def test_plan_best_command_is_what_train_prices(capsys, case):
    """`tcalc plan`'s best layout, run as its best_command, has the peak memory and step time the
    plan listed (same model, layout, training settings and network)."""
    import shlex

    plan = _json(capsys, "plan", *PLAN_CASES[case])
    best, argv = plan["plans"][0], shlex.split(plan["best_command"])
    assert argv[:2] == ["tcalc", "train"]
    train = _json(capsys, *argv[1:])
    assert train["memory"]["peak_bytes"] == best["peak_bytes"]
    assert train["memory"]["fits"] is True
    assert train["step_time_s"] == best["step_time_s"] and train["breakdown"] == best["breakdown"]
    assert train["layout"] == best["layout"] and train["batch"]["micro_batch"] == best["micro_batch"]


# ---------------------------------------------------------------------------- job files (issue 21)
def _job(tmp_path, training: str) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(f"model: {{preset: gpt2}}\ntraining: {training}\n")
    return str(path)


def test_train_reads_the_job_files_training_section(tmp_path, capsys):
    """Every setting from the training: section equals the same setting as a flag."""
    job = _job(tmp_path, "{S: 512, B: 2, recompute: full, framework: pytorch, flash: false, T: 2, sp: true, "
                         "zero: 2, precision: bf16, gpu: a100-80gb}")
    from_file = _json(capsys, "train", "--config", job, "--gpus", "8", "--global-batch", "64")
    from_flags = _json(capsys, "train", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64", "--S", "512",
                       "--micro-batch", "2", "--recompute", "full", "--framework", "pytorch", "--no-flash", "--T", "2",
                       "--sp", "--zero", "2", "--precision", "bf16", "--gpu", "a100-80gb")
    assert from_file == from_flags
    assert from_file["batch"]["seq_len"] == 512 and from_file["layout"]["tensor"] == 2


def test_train_flag_then_section_then_default(tmp_path, capsys):
    job = _job(tmp_path, "{S: 512, recompute: full, optimizer: sgd, T: 2, dp: 2}")
    d = _json(capsys, "train", "--config", job, "--global-batch", "64", "--recompute", "selective")
    assert d["training"]["recompute"] == "selective"  # the flag wins
    assert d["training"]["optimizer"] == "sgd"  # a key with no flag: the section's
    assert d["training"]["framework"] == "megatron" and d["training"]["flash"] is True  # train's defaults
    assert (d["layout"]["tensor"], d["layout"]["data"]) == (2, 2)  # no --gpus: the job's T x dp = 4 GPUs
    assert _json(capsys, "train", "--config", job, "--global-batch", "64", "--gpus", "8")["layout"]["data"] == 4
    adamw = _json(capsys, "train", "--preset", "gpt2", "--S", "512", "--recompute", "selective", "--T", "2",
                  "--gpus", "4", "--global-batch", "64")
    assert d["breakdown"]["optimizer_s"] < adamw["breakdown"]["optimizer_s"]


def test_train_micro_batches_from_the_job_file(tmp_path, capsys):
    job = _job(tmp_path, "{S: 512, micro_batches: 8}")
    d = _json(capsys, "train", "--config", job, "--gpus", "8", "--global-batch", "64")
    assert (d["batch"]["micro_batch"], d["batch"]["micro_batches"], d["batch"]["micro_batch_chosen"]) == (1, 8, False)
    from transformer_calc.cli import run

    assert run(["train", "--config", _job(tmp_path, "{S: 512, B: 2, micro_batches: 8}"), "--gpus", "8",
                "--global-batch", "64"]) == 2
    assert "micro_batches" in capsys.readouterr().err


def test_train_api_reads_the_job_file(tmp_path, capsys):
    import transformer_calc.api as tc
    from transformer_calc.cli import run

    job = _job(tmp_path, "{S: 512, recompute: full, optimizer: sgd, T: 2, dp: 2, gpu: a100-80gb}")
    result = tc.train(job, global_batch=64)
    assert run(["train", "--config", job, "--global-batch", "64", "-f", "json"]) == 0
    assert result.model_dump(mode="json") == json.loads(capsys.readouterr().out)
    assert result.training.optimizer == "sgd" and result.gpu == "A100-SXM4-80GB"


def test_plan_reads_the_job_files_training_section(tmp_path, capsys):
    """The settings plan does not choose come from the section; its best_command (with --config)
    is what train prices."""
    import shlex

    job = _job(tmp_path, "{S: 512, framework: pytorch, flash: false, optimizer: sgd, gpu: a100-80gb, T: 4}")
    from transformer_calc.cli import run

    assert run(["plan", "--config", job, "--gpus", "8", "--global-batch", "64", "-f", "json"]) == 0
    out, err = capsys.readouterr()
    plan = json.loads(out)
    assert "plan chooses the layout" in err and "tensor" in err  # T: 4 is not used, and that is said
    flags = _json(capsys, "plan", "--preset", "gpt2", "--S", "512", "--framework", "pytorch", "--no-flash",
                  "--gpu", "a100-80gb", "--gpus", "8", "--global-batch", "64")
    assert plan["seq_len"] == 512 and plan["gpu"] == "A100-SXM4-80GB"
    assert plan["plans"][0]["peak_bytes"] < flags["plans"][0]["peak_bytes"]  # SGD keeps no Adam states
    argv = shlex.split(plan["best_command"])
    assert argv[2:4] == ["--config", job]
    train = _json(capsys, *argv[1:])
    assert train["memory"]["peak_bytes"] == plan["plans"][0]["peak_bytes"]
    assert train["step_time_s"] == plan["plans"][0]["step_time_s"]


def test_plan_searches_the_frameworks_schedules_and_train_prices_them(capsys):
    """Issue 24: with --framework torchtitan plan also tries ZB-V and DualPipe (two chunks per
    stage), FSDP2 sharding only; each listed row, run through `tcalc train` with its schedule, has
    the listed step time and peak. Megatron's plans keep 1F1B / interleaved."""
    plan = _json(capsys, "plan", *PLAN_CASES["torchtitan-pipeline"], "--top", "200")
    rows = plan["plans"]
    assert {r["layout"]["pipeline_schedule"] for r in rows} >= {"zb-v", "interleaved"}
    assert all(r["layout"]["zero"] in (0, 3) for r in rows)
    row = next(r for r in rows if r["layout"]["pipeline_schedule"] == "zb-v")
    lay = row["layout"]
    train = _json(capsys, "train", "--preset", "llama-3.1-405b", "--gpus", "128", "--gpu", "h100", "--S", "4096",
                  "--global-batch", "64", "--framework", "torchtitan", "--T", str(lay["tensor"]), "--P",
                  str(lay["pipeline"]), "--virtual-stages", "2", "--pipeline-schedule", "zb-v", "--zero",
                  str(lay["zero"]), *(["--sp"] if lay["sequence_parallel"] else []), "--micro-batch",
                  str(row["micro_batch"]), "--recompute", row["recompute"],
                  *(["--first-stage-layers", str(lay["first_stage_layers"])] if lay["first_stage_layers"] else []),
                  *(["--last-stage-layers", str(lay["last_stage_layers"])] if lay["last_stage_layers"] else []),
                  *(["--embedding-in-split"] if lay["embedding_in_split"] else []),
                  *(["--loss-in-split"] if lay["loss_in_split"] else []))
    assert train["step_time_s"] == row["step_time_s"] and train["memory"]["peak_bytes"] == row["peak_bytes"]
    megatron = _json(capsys, "plan", *PLAN_CASES["uneven-405b"], "--top", "50")
    assert {r["layout"]["pipeline_schedule"] for r in megatron["plans"]} <= {"1f1b", "interleaved"}
