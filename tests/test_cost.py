"""What a run costs (estimators/cost.py, results/run_cost.py, presets/prices.yaml): published
training runs' GPU-hours, dollars, energy and CO2eq, the price table, and serve's $ per token."""

import pytest

import transformer_calc as tc
from transformer_calc.estimators import cost
from transformer_calc.errors import TcalcError


def test_llama31_model_card_energy_and_co2():
    """Llama 3.1 model card: 39.3M H100-80GB GPU-hours at 700 W TDP, 11,390 t CO2eq location-based.
    Reproduced with the stated factors of Meta's method (Touvron et al. 2023 §6: board power for
    every GPU-hour, PUE 1.1, 0.385 kg CO2eq/kWh, the US average): within 3 %."""
    kwh = cost.energy_kwh(39.3e6, cost.gpu_power_w(700, active_share=1.0))
    assert kwh == pytest.approx(39.3e6 * 0.7 * 1.1)  # 30.3 GWh at the facility
    co2 = cost.co2_tonnes(kwh)
    assert co2 == pytest.approx(11_390, rel=0.03)  # 11,651 t: +2.3 %


def test_deepseek_v3_price_and_report_arithmetic():
    """DeepSeek-V3 (arXiv:2412.19437 Table 1): 2,788K H800 GPU-hours at $2 = $5.576M; the price
    table carries the report's $2 for the H800, dated and sourced."""
    from transformer_calc.results.run_cost import price_section
    from transformer_calc.sources.presets import gpu

    price = price_section(gpu("h800"), None, None, None)
    assert price.usd_per_gpu_hour == 2.0 and price.date == "2024-12" and "2412.19437" in price.source
    assert 2.788e6 * price.usd_per_gpu_hour == pytest.approx(5.576e6)


# DeepSeek-V3's pre-training layout (arXiv:2412.19437 §3.1-3.3): 2,048 H800, 16-way pipeline, 64-way expert
# parallelism over 8 nodes, ZeRO-1 data parallelism, no TP; FP8 blockwise GEMMs (1x128 / 128x128); the dispatch
# in FP8, the combines in BF16 (§3.3.2); node-limited routing, a token to at most 4 nodes (§2.1.2); the
# all-to-all under the other micro-batch's compute (DualPipe's overlap; tcalc's dualpipe schedule needs an even
# block count per stage, which 61 blocks on 16 stages do not give, so 1F1B with the a2a overlap stands in);
# 15,360 sequences of 4,096 tokens per step (the batch after its ramp, §4.2). Full recomputation: what tcalc
# needs to fit 80 GB (DeepSeek recomputes only the norms and MLA up-projections and keeps the EMA on the host).
DEEPSEEK_V3 = dict(gpus=2048, gpu="h800", S=4096, global_batch=15360, T=1, P=16, ep=64, zero=1,
                   fp8_recipe="blockwise", first_stage_layers=3, last_stage_layers=2, micro_batch=1,
                   recompute="full", moe_a2a_overlap=True, dispatch_dtype="fp8", moe_max_nodes=4,
                   tokens=14_800_000_000_000)


def test_deepseek_v3_pretraining_gpu_hours_and_cost():
    """DeepSeek-V3 pre-training as published (14.8T tokens on 2,048 H800, its layout) at the report's
    $2 (the price table's, not given): GPU-hours and cost within 15 % of the report's 2,664K
    pre-training GPU-hours ($5.328M) and of its 2,788K in all ($5.576M). tcalc: 2.42M, $4.83M (-9 %)."""
    r = tc.train("deepseek-v3", **DEEPSEEK_V3)
    b = r.budget
    assert b.price.usd_per_gpu_hour == 2.0 and b.price.kind == "on_demand"
    assert b.gpu_hours == pytest.approx(2.664e6, rel=0.15)
    assert b.cost == pytest.approx(5.328e6, rel=0.15)
    assert b.gpu_hours == pytest.approx(2.788e6, rel=0.15) and b.cost == pytest.approx(5.576e6, rel=0.15)
    assert r.assumptions.dispatch_dtype == "fp8" and r.assumptions.moe_max_nodes == 4
    # without DeepSeek's dispatch (16-bit, every copy on its own) the all-to-all is exposed: +51 %
    plain = tc.train("deepseek-v3", **{k: v for k, v in DEEPSEEK_V3.items() if k not in ("dispatch_dtype", "moe_max_nodes")})
    assert plain.budget.gpu_hours > 1.4 * b.gpu_hours


def test_train_budget_cost_energy():
    """The budget's money and energy: cost = GPU-hours x price; per day = price x GPUs x 24; energy =
    GPU-hours x the modelled power x PUE; a given price replaces the table's."""
    r = tc.train("llama-3.1-8b", gpus=64, global_batch=512, T=2, tokens=10**12, price=3.0, pue=1.2, grid_intensity=100)
    b = r.budget
    assert b.price.kind == "given" and b.cost == pytest.approx(b.gpu_hours * 3.0)
    assert b.cost_per_day == pytest.approx(3.0 * 64 * 24)
    assert b.cost_per_billion_tokens == pytest.approx(b.cost / 1000)
    e = b.energy
    assert e.power_w_per_gpu == pytest.approx(70 + 630 * e.active_share)
    assert e.kwh == pytest.approx(b.gpu_hours * e.power_w_per_gpu / 1000 * 1.2)
    assert e.co2_tonnes == pytest.approx(e.kwh * 100 / 1e6)
    assert 0 < e.active_share <= 1


def test_price_kinds_and_prices_file(tmp_path):
    """--price-kind picks the table's latest price of that kind; a --prices file's entries win."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.results.run_cost import price_section
    from transformer_calc.sources.presets import gpu

    h100 = gpu("h100")
    assert price_section(h100, None, "spot", None).usd_per_gpu_hour == 1.52
    assert price_section(h100, None, "reserved", None).date == "2026-04"
    assert price_section(gpu("l4"), None, None, None) is None  # none published in the table
    f = tmp_path / "p.yaml"
    f.write_text('prices:\n  - {gpu: h100, kind: on_demand, usd_per_gpu_hour: 9.5, provider: mine, date: "2026-04", '
                 'source: "our contract"}\n')
    assert price_section(h100, None, None, f).usd_per_gpu_hour == 9.5
    f.write_text('prices:\n  - {gpu: h100, kind: on_demand, usd_per_gpu_hour: 9.5, provider: mine, date: "2020-01", '
                 'source: "an old contract"}\n')
    assert price_section(h100, None, None, f).usd_per_gpu_hour == 9.5  # the file wins whatever its date
    assert price_section(h100, None, "spot", f).usd_per_gpu_hour == 1.52  # none of that kind there: the table's
    f.write_text('prices:\n  - {gpu: h100, kind: spot, usd_per_gpu_hour: 1, provider: x, date: "2026-13", source: y}\n')
    with pytest.raises(TcalcError, match="YYYY-MM"):
        price_section(h100, None, None, f)
    f.write_text('prices:\n  - {gpu: h100, kind: cheap, usd_per_gpu_hour: 1, provider: x, date: "2026-01", source: y}\n')
    with pytest.raises(TcalcError, match="kind"):
        price_section(h100, None, None, f)
    f.write_text('prices:\n  - {gpu: h100, kind: on_demand, usd_per_gpu_hour: -1, provider: x, date: "2026-04", source: y}\n')
    with pytest.raises(TcalcError, match="usd_per_gpu_hour"):
        price_section(h100, None, None, f)


def test_job_file_cost_section(tmp_path):
    """A job file's cost: section sets the cost options (read by their parsers, `prices` relative to
    the file); a flag wins over it; an unknown key or a bad value is an error naming it."""
    from transformer_calc.errors import TcalcError

    (tmp_path / "p.yaml").write_text('prices:\n  - {gpu: h100, kind: spot, usd_per_gpu_hour: 0.9, provider: me, '
                                     'date: "2026-05", source: "our quote"}\n')
    job = tmp_path / "job.yaml"
    job.write_text("model:\n  preset: llama-3.1-8b\ncost:\n  prices: p.yaml\n  price_kind: spot\n  pue: 1.3\n"
                   "  checkpoint_mode: async\n")
    kw = dict(config=job, gpus=64, global_batch=512, T=2, tokens=10**12)
    b = tc.train(**kw).budget
    assert b.price.usd_per_gpu_hour == 0.9 and b.energy.pue == 1.3 and b.goodput.checkpoint_mode == "async"
    assert tc.train(**kw, pue=1.05, price=4.0).budget.energy.pue == 1.05
    job.write_text("model:\n  preset: gpt2\ncost:\n  pue: 0.5\n")
    with pytest.raises(TcalcError, match="cost: pue"):
        tc.train(config=job, global_batch=8, tokens=10**9)
    job.write_text("model:\n  preset: gpt2\ncost:\n  puee: 1.5\n")
    with pytest.raises(TcalcError, match="did you mean 'pue'"):
        tc.train(config=job, global_batch=8, tokens=10**9)


def test_cost_options_need_tokens():
    from transformer_calc.errors import TcalcError

    with pytest.raises(TcalcError, match="--tokens"):
        tc.train("llama-3.1-8b", gpus=8, global_batch=64, pue=1.2)


def test_serve_cost_per_million_tokens():
    """serve: $ per hour = GPUs x price; input and output tokens share it by the prompts' share of the
    GPUs' time; a --request-rate needs whole replicas."""
    r = tc.serve("llama-3.1-8b", gpu="h100", gpus=8, prompt_len=1000, output_len=200, request_rate=20, price=2.0)
    c = r.cost
    assert c.cost_per_hour == pytest.approx(8 * 2.0)
    hourly_in = c.cost_per_million_input_tokens * c.input_tokens_per_s * 3600 / 1e6
    hourly_out = c.cost_per_million_output_tokens * c.output_tokens_per_s * 3600 / 1e6
    assert hourly_in + hourly_out == pytest.approx(c.cost_per_hour)
    assert c.gpus_for_request_rate % (r.best.gpus // r.best.replicas) == 0
    assert c.energy.kwh == pytest.approx(8 * 0.7 * 1.1)


def test_serve_prefill_share_is_the_prompts_gpu_time():
    """The input tokens' share of the hour is requests/s x one prompt's prefill alone (not TTFT / E2E,
    which counts the wait while the GPUs serve others): it grows with the prompt, and at 1,000-token
    prompts and 200-token outputs on an 8B model the prompts (5x the decode FLOPs) take most of the
    GPUs' time, so a million input tokens costs less than a million output tokens but not ~nothing."""
    shares = []
    for prompt in (100, 1000, 4000):
        r = tc.serve("llama-3.1-8b", gpu="h100", gpus=8, prompt_len=prompt, output_len=200, price=2.0)
        share = r.best.prefill_share
        assert 0 < share <= 1 and r.cost.prefill_share == share
        shares.append(share)
    assert shares == sorted(shares)
    r = tc.serve("llama-3.1-8b", gpu="h100", gpus=8, prompt_len=1000, output_len=200, price=2.0)
    c = r.cost
    assert 0.3 < c.prefill_share < 0.95
    assert 0.05 < c.cost_per_million_input_tokens / c.cost_per_million_output_tokens < 1


def test_every_shipped_price_names_a_known_gpu_a_source_and_a_date():
    from transformer_calc.sources.presets import gpu, price_table

    table = price_table()
    assert len(table) >= 8
    for p in table:
        assert gpu(p.gpu).name and p.source and len(p.date) == 7 and p.kind in ("on_demand", "reserved", "spot")


def test_web_panel_carries_the_cost():
    """The train and serve pages draw a cost and energy panel (web/charts.py cost_panel)."""
    pytest.importorskip("starlette")
    from transformer_calc.web import charts

    r = tc.train("llama-3.1-8b", gpus=64, global_batch=512, T=2, tokens=10**12)
    panel = charts.cost_panel(r)
    assert panel.startswith("<svg") and "goodput" in panel and "CO2eq" in panel
    assert any("cost and energy" in c for c in charts.charts("train", r))
    s = tc.serve("llama-3.1-8b", gpu="h100", gpus=8, prompt_len=1000, output_len=200, request_rate=20)
    assert "per million tokens" in charts.cost_panel(s)
    assert charts.cost_panel(tc.train("gpt2", gpus=8, global_batch=64)) is None  # no --tokens: no budget


def test_mcp_tools_carry_the_cost():
    """The MCP tools take the cost options (in `options`: named in the compact schema, typed by the
    `options` tool's full schema, the request's) and return the cost sections (the result's)."""
    pytest.importorskip("mcp")
    from transformer_calc.mcp_server import server

    for command, names in (("train", ("price_per_gpu_hour", "pue", "checkpoint_mode", "dispatch_dtype")),
                           ("serve", ("price_kind", "grid_intensity_g_per_kwh"))):
        assert set(names) <= set(server.full_input_schema(command)["properties"])
        compact = server.input_schema(command)["properties"]
        assert all(n in compact or n in compact["options"]["description"] for n in names)
    assert "cost" in server.output_schema("serve")["properties"]
    out = server.call("train", {"model": "gpt2", "gpus": 8, "global_batch": 64, "tokens": 10**9, "price_per_gpu_hour": 2})
    assert out["budget"]["price"]["usd_per_gpu_hour"] == 2 and "goodput" in out["budget"]


@pytest.mark.parametrize("option", [{"dispatch_dtype": "fp8"}, {"moe_max_nodes": 4}, {"moe_load_imbalance": 1.2},
                                    {"moe_a2a_overlap": True}, {"moe_a2a_overlap": False}])
def test_moe_dispatch_options_on_a_dense_model_are_refused(option):
    """--dispatch-dtype and --moe-max-nodes change a MoE model's all-to-all; a dense model has none, so
    they are refused by name rather than silently ignored (issue 36's contract)."""
    with pytest.raises(TcalcError, match="is dense"):
        tc.train("llama-3.1-8b", gpus=8, T=2, global_batch=64, **option)
