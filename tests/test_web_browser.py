"""`tcalc web` in a real browser (issue 27): Debian's headless Chromium, driven by Playwright, loads
each page of a `tcalc web` process, changes inputs, and checks that the numbers shown are the
API's; a hostile input is an inline message. Screenshots are kept as test artefacts (pytest's
tmp dir, or $TCALC_SCREENSHOTS). Skipped where Chromium or the extras are missing; CI installs
both (README's ci:test block)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

CHROMIUM = os.environ.get("TCALC_CHROMIUM", "/usr/bin/chromium")
if not Path(CHROMIUM).is_file() and shutil.which("chromium") is None:
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")
sync_api = pytest.importorskip("playwright.sync_api")

import transformer_calc.api as tc  # noqa: E402

JOBS = REPO / "tests" / "data" / "check_jobs"

# Chromium's flags for a hermetic run: no network of its own, no first-run, no sandbox (root in CI)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
START_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def server():
    """A `tcalc web --port 0` process; its URL read from its first line on stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "transformer_calc", "web", "--port", "0"], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        url = None
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            found = re.search(r"http://127\.0\.0\.1:\d+/", line)
            url = found.group(0) if found else None
        assert url, "tcalc web did not print its URL"
        yield url.rstrip("/")
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    where = os.environ.get("TCALC_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def playwright():
    pw = sync_api.sync_playwright().start()
    yield pw
    pw.stop()


def _browser(pw, tmp_path_factory, javascript: bool):
    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh --user-data-dir
    context = pw.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM if Path(CHROMIUM).is_file()
                                                    else shutil.which("chromium"), headless=True, args=FLAGS,
                                                    java_script_enabled=javascript,
                                                    viewport={"width": 1280, "height": 1000})
    return context


@pytest.fixture(scope="module")
def page(playwright, tmp_path_factory):
    context = _browser(playwright, tmp_path_factory, javascript=True)
    yield context.new_page()
    context.close()


@pytest.fixture(scope="module")
def page_without_js(playwright, tmp_path_factory):
    context = _browser(playwright, tmp_path_factory, javascript=False)
    yield context.new_page()
    context.close()


def open_panel(page, field: str) -> None:
    """Open the form's panel that holds a field (as a person clicks its heading)."""
    panel = page.locator(f"details:has(#f-{field})")
    if panel.get_attribute("open") is None:
        panel.locator("summary").first.click()


def shown(page, key: str) -> tuple[object, str]:
    """(the cell's exact JSON value, its text) of a result key on the page."""
    cell = page.locator(f'.output [data-key="{key}"]').first  # the tables (the banner repeats a few, formatted)
    return json.loads(cell.get_attribute("data-value")), cell.inner_text().strip()


def test_the_memory_page_shows_the_apis_numbers_and_follows_its_inputs(server, page, shots):
    page.goto(f"{server}/memory?model=llama-3-8b&S=4096&gpu=h100")
    result = tc.memory("llama-3-8b", S=4096, gpu="h100")
    assert shown(page, "memory.peak_bytes") == (result.memory.peak_bytes, f"{result.memory.peak_bytes:,} (154.6 GiB)")
    assert page.locator("svg[aria-label='memory timeline'] rect").count() >= len(result.memory.phases)
    assert page.locator("#command-line").inner_text() == "tcalc memory llama-3-8b --S 4096 --gpu h100"
    page.screenshot(path=str(shots / "memory.png"))

    # a text input, then Compute: the URL holds the new state (empty fields left out by the script)
    page.fill("#f-S", "8192")
    page.fill("#f-B", "2")
    with page.expect_navigation():
        page.click("#compute")
    assert page.url == f"{server}/memory?model=llama-3-8b&S=8192&B=2&gpu=h100"  # the form's order: the common options first
    assert shown(page, "memory.peak_bytes")[0] == tc.memory("llama-3-8b", S=8192, B=2, gpu="h100").memory.peak_bytes

    # a switch submits itself (flash is on by default: turning it off keeps the S x S scores)
    open_panel(page, "flash")
    with page.expect_navigation():
        page.select_option("#f-flash", "false")
    assert "flash=false" in page.url
    eager = tc.memory("llama-3-8b", S=8192, B=2, gpu="h100", flash=False).memory.peak_bytes
    assert shown(page, "memory.peak_bytes")[0] == eager > tc.memory("llama-3-8b", S=8192, B=2, gpu="h100").memory.peak_bytes
    assert page.locator("#command-line").inner_text().endswith("--no-flash --gpu h100")


PAGES = {  # page: (query, the API's result, the keys to read)
    "inference": ("model=llama-3-8b&S=2048&B=4&gpu=h100", lambda: tc.inference("llama-3-8b", S=2048, B=4, gpu="h100"),
                  ["kv_cache.total_bytes", "prefill.time_s", "decode.time_per_output_token_s",
                   "serving.max_concurrent_sequences"]),
    "serve": ("model=llama-3-8b&gpu=h100&gpus=8&prompt_len=2000&output_len=500&ttft=1&tpot=0.05",
              lambda: tc.serve("llama-3-8b", gpu="h100", gpus=8, prompt_len=2000, output_len=500, ttft=1, tpot=0.05),
              ["best.tokens_per_s", "best.tpot_s", "layouts.0.concurrency"]),
    "train": ("model=gpt2&gpus=8&global_batch=64&S=1024", lambda: tc.train("gpt2", gpus=8, global_batch=64, S=1024),
              ["step_time_s", "mfu", "breakdown.compute_s"]),
    "plan": ("model=gpt2&gpus=8&global_batch=64&S=1024", lambda: tc.plan("gpt2", gpus=8, global_batch=64, S=1024),
             ["plans.0.step_time_s", "plans.0.mfu", "evaluated"]),
    "params": ("model=gpt2", lambda: tc.params("gpt2"), ["params.total"]),
    "sweep": ("model=llama-3-8b&B=1,2,4&S=1k,4k&gpu=h100", lambda: tc.sweep("llama-3-8b", B="1,2,4", S="1k,4k", gpu="h100"),
              ["points.0.peak_bytes", "points.5.model_flops", "points.5.fits"]),
    "presets": ("", tc.presets, ["0.params", "3.max_seq_len"]),
    "hardware": ("", tc.hardware, ["0.memory_bytes", "2.memory_bw_bytes_s"]),
    "check": (f"files={JOBS / 'train-ok.yaml'}&gpu=h100", lambda: tc.check(str(JOBS / "train-ok.yaml"), gpu="h100"),
              ["files.0.status", "files.0.checks.0.value", "files.0.checks.0.limit", "passed"]),
}


def _value(data, key):
    for part in key.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


@pytest.mark.parametrize("command", sorted(PAGES))
def test_each_page_shows_the_apis_numbers(server, page, shots, command):
    query, call, keys = PAGES[command]
    page.goto(f"{server}/{command}?{query}")
    data = call().model_dump(mode="json")
    for key in keys:
        assert shown(page, key)[0] == _value(data, key), (command, key)
    if command in ("inference", "serve", "train", "plan", "sweep"):
        assert page.locator("figure.chart svg").count() >= 1
    page.screenshot(path=str(shots / f"{command}.png"), full_page=False)


@pytest.mark.parametrize("query, field, text", [
    ("model=llama-3-8b&S=1e400", "S", "'1e400' is too large"),
    ("model=no-such-preset", "model", "MODEL 'no-such-preset' is not a path, a preset"),
])
def test_a_hostile_input_is_an_inline_message(server, page, shots, query, field, text):
    page.goto(f"{server}/memory?{query}")
    message = page.locator(f"#e-{field}")
    assert message.is_visible() and text in message.inner_text()
    # beside its field, inside the field's box
    assert page.locator(f".field.has-error #f-{field}").count() == 1
    assert page.locator("td[data-key]").count() == 0 and "Traceback" not in page.content()
    page.screenshot(path=str(shots / f"error-{field}.png"))


def test_the_pages_work_without_javascript(server, page_without_js):
    """The server renders the numbers; a form submitted without the script sends its empty
    fields, and the server redirects to the clean URL."""
    page = page_without_js
    page.goto(f"{server}/memory?model=gpt2")
    open_panel(page, "S")
    page.fill("#f-S", "512")
    with page.expect_navigation():
        page.click("#compute")
    assert page.url == f"{server}/memory?model=gpt2&S=512"
    assert shown(page, "memory.peak_bytes")[0] == tc.memory("gpt2", S=512).memory.peak_bytes


def test_a_config_json_uploaded_in_the_picker(server, page):
    config = REPO / "tests" / "data" / "checkpoints" / "tiny-llama-fp8" / "config.json"
    page.goto(f"{server}/")
    page.set_input_files("#config", str(config))
    with page.expect_navigation():
        page.click("#upload button[type=submit]")
    assert page.url.startswith(f"{server}/memory?set=")
    assert shown(page, "memory.peak_bytes")[0] == tc.memory(hf_config=config).memory.peak_bytes


def test_the_picker_opens_a_page_for_a_model(server, page):
    page.goto(f"{server}/")
    page.fill("#model", "gpt2")
    page.select_option("#page", "params")
    with page.expect_navigation():
        page.click("#pick button[type=submit]")
    assert page.url == f"{server}/params?model=gpt2"
    assert shown(page, "params.total")[0] == tc.params("gpt2").params.total


# ---------------------------------------------------------------------------- round 2
def test_the_serve_page_draws_the_curve_and_the_pools(server, page, shots):
    query = ("model=llama-3-8b&gpu=h100&gpus=8&prompt_len=2000&output_len=500&tpot=0.05&concurrency=1,8,64,256"
             "&disaggregate=1P3D")
    page.goto(f"{server}/serve?{query}")
    result = tc.serve("llama-3-8b", gpu="h100", gpus=8, prompt_len=2000, output_len=500, tpot=0.05,
                      concurrency="1,8,64,256", disaggregate="1P3D")
    held = [p.concurrency for p in result.curve.points if p.tpot_s is not None]
    curve = page.locator("svg[aria-label='latency-throughput curve']")
    assert [int(c.get_attribute("data-concurrency")) for c in curve.locator("circle").all()] == held * 2
    for i, p in enumerate(result.curve.points):
        assert shown(page, f"curve.points.{i}.tpot_s")[0] == p.tpot_s
    assert page.locator("svg[aria-label='disaggregated pools'] rect[data-pool]").count() == 2
    assert shown(page, "disaggregated.bottleneck")[0] == result.disaggregated.bottleneck
    curve.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "serve-curve.png"))

    # another concurrency list: the curve follows the input
    open_panel(page, "concurrency")
    page.fill("#f-concurrency", "4,16")
    with page.expect_navigation():
        page.click("#compute")
    assert "concurrency=4%2C16" in page.url
    points = tc.serve("llama-3-8b", gpu="h100", gpus=8, prompt_len=2000, output_len=500, tpot=0.05,
                      concurrency="4,16", disaggregate="1P3D").curve.points
    assert [shown(page, f"curve.points.{i}.ttft_s")[0] for i in range(2)] == [p.ttft_s for p in points]


def test_the_sweep_page_follows_its_inputs(server, page, shots):
    page.goto(f"{server}/sweep?model=gpt2&B=1,2")
    page.fill("#f-S", "256,512")
    with page.expect_navigation():
        page.click("#compute")
    assert page.url == f"{server}/sweep?model=gpt2&B=1%2C2&S=256%2C512"
    data = tc.sweep("gpt2", B="1,2", S="256,512").model_dump(mode="json")
    for i, point in enumerate(data["points"]):
        assert shown(page, f"points.{i}.peak_bytes")[0] == point["peak_bytes"]
    assert page.locator("svg[aria-label='sweep peak_bytes'] circle").count() == len(data["points"])
    assert page.locator("#command-line").inner_text() == "tcalc sweep gpt2 --B 1,2 --S 256,512"
    page.screenshot(path=str(shots / "sweep.png"))
    page.goto(f"{server}/sweep?model=gpt2&B=1..5000:1")
    assert "this page prices at most" in page.locator("#problem").inner_text()


def test_a_preset_links_to_its_params_page(server, page, shots):
    page.goto(f"{server}/presets")
    page.screenshot(path=str(shots / "presets.png"))
    name = tc.presets()[1].name
    with page.expect_navigation():
        page.click("#presets a[data-key='1.name']")
    assert page.url == f"{server}/params?model={name}"
    assert shown(page, "params.total")[0] == tc.params(name).params.total


def test_an_accelerator_links_to_its_page(server, page, shots):
    page.goto(f"{server}/hardware")
    gpu = tc.hardware().root[2]
    with page.expect_navigation():
        page.click("#hardware a[data-key='2.name']")
    assert shown(page, "memory_bytes")[0] == gpu.memory_bytes
    assert page.locator("#command-line").inner_text() == f"tcalc hardware {gpu.name}"
    page.screenshot(path=str(shots / "hardware.png"))


@pytest.mark.parametrize("javascript", [True, False])
def test_a_job_file_uploaded_on_the_check_page(server, page, page_without_js, shots, javascript):
    """The upload is a plain form: the file's text lands in the URL, the check runs on that URL."""
    tab = page if javascript else page_without_js
    job = JOBS / "infer.yaml"
    tab.goto(f"{server}/check")
    tab.set_input_files("#job-file", str(job))
    with tab.expect_navigation():
        tab.click("#job-upload button[type=submit]")
    assert tab.url.startswith(f"{server}/check?job=")
    expected = tc.check(str(job))
    assert shown(tab, "files.0.status")[0] == expected.files[0].status == "fail"
    for j, c in enumerate(expected.files[0].checks):
        assert shown(tab, f"files.0.checks.{j}.ok")[0] == c.ok
        assert shown(tab, f"files.0.checks.{j}.value")[0] == c.value
    assert tab.locator("#command-line").inner_text() == "tcalc check job.yaml"
    tab.screenshot(path=str(shots / f"check{'' if javascript else '-nojs'}.png"), full_page=True)

    # a limit changed in the form: the same job, checked again
    tab.fill("#f-max_tpot", "0.01")
    with tab.expect_navigation():
        tab.click("#compute")
    again = tc.check(str(job), max_tpot_s=0.01).files[0].checks
    assert shown(tab, "files.0.checks.3.ok")[0] == again[3].ok is False


def test_a_hostile_job_file_is_an_inline_message(server, page, shots):
    page.goto(f"{server}/check?job={'a' * 4001}")
    assert "at most 4,000" in page.locator("#e-job").inner_text()
    page.goto(f"{server}/check?job=model%3A%20%5B1")
    assert "invalid YAML" in page.locator("[data-key='files.0.error']").inner_text()
    page.screenshot(path=str(shots / "check-invalid.png"))


FIRST_SCREEN = {  # page: the query whose verdict the first screen shows
    "memory": "model=llama-3-8b&S=4096&dp=8&zero=3&gpu=h100",
    "inference": "model=llama-3.1-8b&S=8192&gpu=rtx-4090&weight_dtype=q4_k_m",
    "serve": "model=llama-3.1-70b&gpu=h100&gpus=8&prompt_len=2000&output_len=500&ttft=1&tpot=0.05",
    "train": "model=llama-3.1-8b&gpus=8&gpu=h100&S=4096&global_batch=64&zero=2&tokens=1e12",
    "plan": "model=gpt2&gpus=8&global_batch=64&S=1024",
    "params": "model=llama-3-8b",
}


@pytest.mark.parametrize("command", list(FIRST_SCREEN))
def test_the_first_screen_shows_the_verdict_and_the_key_numbers(server, page, shots, command):
    """Issue 38: in a 1280 x 800 window, without scrolling, the banner's headline and every key
    number are visible, and each number is the API's (its data-value the JSON's)."""
    page.set_viewport_size({"width": 1280, "height": 800})
    try:
        page.goto(f"{server}/{command}?{FIRST_SCREEN[command]}")
        data = json.loads(page.request.get(f"{server}/{command}.json?{FIRST_SCREEN[command]}").text())
        headline = page.locator("#headline")
        assert headline.is_visible() and headline.inner_text().strip()
        numbers = page.locator("#key-numbers dd")
        assert numbers.count() >= 3, command
        for item in [headline, *(numbers.nth(i) for i in range(numbers.count()))]:
            box = item.bounding_box()
            assert box is not None and box["y"] + box["height"] <= 800 and box["x"] + box["width"] <= 1280, command
        for i in range(numbers.count()):
            cell = numbers.nth(i)
            leaf = data
            for part in cell.get_attribute("data-key").split("."):
                leaf = leaf[int(part)] if isinstance(leaf, list) else leaf[part]
            assert json.loads(cell.get_attribute("data-value")) == leaf
        page.screenshot(path=str(shots / f"first-screen-{command}.png"))
    finally:
        page.set_viewport_size({"width": 1280, "height": 1000})
