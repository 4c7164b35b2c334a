"""What a run costs (estimators/cost.py, results/run_cost.py, presets/prices.yaml): published
training runs' GPU-hours, dollars, energy and CO2eq, the price table, and serve's $ per token."""

import pytest

import transformer_calc as tc
from transformer_calc.estimators import cost


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


DEEPSEEK_V3 = dict(gpus=2048, gpu="h800", S=4096, global_batch=15360, T=1, P=16, ep=64, zero=1,
                   fp8_recipe="blockwise", first_stage_layers=3, last_stage_layers=2, micro_batch=1,
                   recompute="full", moe_a2a_overlap=True, tokens=14_800_000_000_000)


@pytest.mark.xfail(strict=True, reason=(
    "tcalc's step time for DeepSeek-V3's layout is 30 s, the report's 19.9 s (2,664K GPU-hours of pre-training "
    "over 235,240 steps): 4.01M GPU-hours, +51 %. The gap is the MoE all-to-all (10.8 s exposed): moe_time.py "
    "sends every token to its 8 experts in 16 bits, where DeepSeek-V3 routes each token to at most 4 nodes and "
    "dispatches in FP8 (§2.1.2, §3.3), and DualPipe's full overlap of the rest; not modelled yet"))
def test_deepseek_v3_pretraining_gpu_hours_and_cost():
    """DeepSeek-V3 pre-training as published (14.8T tokens on 2,048 H800; PP16, EP64 over 8 nodes,
    ZeRO-1 data parallelism, FP8 blockwise GEMMs) at the report's $2: GPU-hours and cost within 15 %
    of the report's 2,664K pre-training GPU-hours and $5.328M."""
    r = tc.train("deepseek-v3", **DEEPSEEK_V3)
    assert r.budget.price.usd_per_gpu_hour == 2.0
    assert r.budget.gpu_hours == pytest.approx(2.664e6, rel=0.15)
    assert r.budget.cost == pytest.approx(5.328e6, rel=0.15)


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
    f.write_text('prices:\n  - {gpu: h100, kind: on_demand, usd_per_gpu_hour: -1, provider: x, date: "2026-04", source: y}\n')
    with pytest.raises(Exception, match="usd_per_gpu_hour"):
        price_section(h100, None, None, f)


def test_cost_options_need_tokens():
    from transformer_calc.errors import TcalcError

    with pytest.raises(TcalcError, match="--tokens"):
        tc.train("llama-3.1-8b", gpus=8, global_batch=64, pue=1.2)


def test_serve_cost_per_million_tokens():
    """serve: $ per hour = GPUs x price; input and output tokens share it by the prefill's share of a
    request's time; a --request-rate needs whole replicas."""
    r = tc.serve("llama-3.1-8b", gpu="h100", gpus=8, prompt_len=1000, output_len=200, request_rate=20, price=2.0)
    c = r.cost
    assert c.cost_per_hour == pytest.approx(8 * 2.0)
    hourly_in = c.cost_per_million_input_tokens * c.input_tokens_per_s * 3600 / 1e6
    hourly_out = c.cost_per_million_output_tokens * c.output_tokens_per_s * 3600 / 1e6
    assert hourly_in + hourly_out == pytest.approx(c.cost_per_hour)
    assert c.gpus_for_request_rate % (r.best.gpus // r.best.replicas) == 0
    assert c.energy.kwh == pytest.approx(8 * 0.7 * 1.1)
