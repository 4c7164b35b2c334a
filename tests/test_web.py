"""`tcalc web` without a browser (Starlette's test client): each page shows the API's result (every
number in a cell with its JSON key and exact value), its state is its URL, its command line gives
the same result, and bad input is an inline message, never a traceback. And the plain CLI never
imports the web or MCP dependencies (issue 27)."""

from __future__ import annotations

import contextlib
import html
import io
import json
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO

pytest.importorskip("starlette")
pytest.importorskip("jinja2")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

import transformer_calc.api as tc  # noqa: E402
from transformer_calc.cli import run  # noqa: E402
from transformer_calc.requests.training import MemoryRequest  # noqa: E402
from transformer_calc.web import forms  # noqa: E402
from transformer_calc.web.app import PAGES, create_app, set_lines  # noqa: E402

CONFIG = REPO / "tests" / "data" / "checkpoints" / "tiny-llama-fp8" / "config.json"
JOBS = REPO / "tests" / "data" / "check_jobs"
TRAIN_OK = str(JOBS / "train-ok.yaml")  # passes on an H100: `tcalc check` exits 0


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app(), base_url="http://127.0.0.1:8000")


def test_a_loopback_server_answers_only_loopback_host_names():
    """DNS rebinding: a page of another site that names 127.0.0.1 under its own host gets 400."""
    app = create_app()
    assert TestClient(app, base_url="http://evil.example").get("/memory?model=gpt2").status_code == 400
    assert TestClient(app, base_url="http://localhost:8000").get("/memory?model=gpt2").status_code == 200
    assert TestClient(app, base_url="http://[::1]:8000").get("/memory?model=gpt2").status_code == 200  # IPv6 loopback
    assert TestClient(app, base_url="http://[::2]:8000").get("/").status_code == 400
    assert TestClient(create_app(None), base_url="http://evil.example").get("/").status_code == 200


def cells(page: str) -> dict[str, tuple[str, str]]:
    """data-key -> (data-value, the text shown) of every result cell of a page."""
    found = re.findall(r'data-key="([^"]+)" data-value="([^"]*)">([^<]*)<', page)
    return {k: (html.unescape(v), html.unescape(t)) for k, v, t in found}


def flat(data, prefix=""):
    if isinstance(data, dict) and data:
        for k, v in data.items():
            yield from flat(v, f"{prefix}{k}.")
    elif isinstance(data, list) and data and all(isinstance(x, dict) for x in data):
        for i, x in enumerate(data[:64]):
            yield from flat(x, f"{prefix}{i}.")
    else:
        yield prefix[:-1], data


def cli_json(argv: list[str]) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run([*argv, "-f", "json"]) == 0, argv
    return json.loads(out.getvalue())


# The pages' URLs, each with the API call that gives the same result.
CASES = {
    "memory": ("model=llama-3-8b&S=4096&gpu=h100", lambda: tc.memory("llama-3-8b", S=4096, gpu="h100")),
    "inference": ("model=llama-3-8b&S=2048&B=4&gpu=h100", lambda: tc.inference("llama-3-8b", S=2048, B=4, gpu="h100")),
    "serve": ("model=llama-3-8b&gpu=h100&gpus=8&prompt_len=2000&output_len=500&ttft=1&tpot=0.05"
              "&concurrency=1,8,64,256&disaggregate=1P3D",
              lambda: tc.serve("llama-3-8b", gpu="h100", gpus=8, prompt_len=2000, output_len=500, ttft=1, tpot=0.05,
                               concurrency="1,8,64,256", disaggregate="1P3D")),
    "train": ("model=gpt2&gpus=8&global_batch=64&S=1024", lambda: tc.train("gpt2", gpus=8, global_batch=64, S=1024)),
    "plan": ("model=gpt2&gpus=8&global_batch=64&S=1024", lambda: tc.plan("gpt2", gpus=8, global_batch=64, S=1024)),
    "rl": ("model=qwen2.5-7b&gpus=16&group_size=8&prompts_per_step=256",
           lambda: tc.rl("qwen2.5-7b", gpus=16, group_size=8, prompts_per_step=256)),
    "params": ("model=gpt2", lambda: tc.params("gpt2")),
    "flops": ("model=gpt2&tokens=1e9&gpus=8&gpu=h100", lambda: tc.flops("gpt2", tokens="1e9", gpus=8, gpu="h100")),
    "mfu": ("model=gpt2&tokens_per_s=1e5&gpus=8&gpu=h100", lambda: tc.mfu("gpt2", tokens_per_s="1e5", gpus=8, gpu="h100")),
    "sweep": ("model=llama-3-8b&B=1,2&S=1k,2k&gpu=h100", lambda: tc.sweep("llama-3-8b", B="1,2", S="1k,2k", gpu="h100")),
    "presets": ("", tc.presets),
    "hardware": ("name=h100", lambda: tc.hardware("h100")),
    "check": (f"files={TRAIN_OK}&gpu=h100", lambda: tc.check(TRAIN_OK, gpu="h100")),
}


def test_every_page_has_a_case():
    assert set(CASES) == set(PAGES)


@pytest.mark.parametrize("command", sorted(CASES))
def test_a_page_shows_every_number_of_the_apis_result(client, command):
    query, call = CASES[command]
    r = client.get(f"/{command}?{query}")
    assert r.status_code == 200, r.text[:500]
    shown = cells(r.text)
    expected = dict(flat(call().model_dump(mode="json")))
    assert expected, command
    for key, value in expected.items():
        if key.startswith("model.") or isinstance(value, list):
            continue  # the model's fields are folded, lists of numbers shown joined: checked below
        assert key in shown, (command, key)
        assert json.loads(shown[key][0]) == value, (command, key)
    # the exact JSON is one click away, and equals the API's
    assert client.get(f"/{command}.json?{query}").json() == call().model_dump(mode="json")


def test_the_memory_page_draws_the_timeline_and_the_breakdown(client):
    r = client.get("/memory?model=llama-3-8b&S=4096&gpu=h100")
    result = tc.memory("llama-3-8b", S=4096, gpu="h100")
    assert r.text.count("<svg") == 2
    assert 'aria-label="memory timeline"' in r.text and 'aria-label="memory breakdown"' in r.text
    for phase in result.memory.phases:
        assert f">{html.escape(phase.phase)}<" in r.text  # a bar per phase, labelled
    peak = cells(r.text)["memory.peak_bytes"]
    assert peak == (str(result.memory.peak_bytes), f"{result.memory.peak_bytes:,} (154.6 GiB)")


def test_the_inference_page_draws_a_roofline_and_the_capacity_matrix(client):
    r = client.get("/inference?model=llama-3-8b&S=2048&B=4&gpu=h100")
    result = tc.inference("llama-3-8b", S=2048, B=4, gpu="h100")
    assert 'aria-label="roofline"' in r.text and 'id="capacity-matrix"' in r.text
    matrix = result.serving.budget_matrix
    shown = cells(r.text)
    for i, row in enumerate(matrix.kv_fraction):
        for j, frac in enumerate(row):
            assert float(shown[f"serving.budget_matrix.kv_fraction.{i}.{j}"][0]) == frac


@pytest.mark.parametrize("command, chart", [("serve", "serving layouts"), ("train", "step time breakdown"),
                                            ("plan", "ranked layouts"), ("serve", "latency-throughput curve"),
                                            ("serve", "disaggregated pools"), ("sweep", "sweep peak_bytes"),
                                            ("sweep", "sweep model_flops")])
def test_serve_train_and_plan_draw_their_charts(client, command, chart):
    assert f'aria-label="{chart}"' in client.get(f"/{command}?{CASES[command][0]}").text


@pytest.mark.parametrize("command", sorted(CASES))
def test_the_page_prints_the_command_that_gives_the_same_result(client, command):
    query, _ = CASES[command]
    page = client.get(f"/{command}?{query}").text
    line = html.unescape(re.search(r'<code id="command-line">([^<]*)</code>', page).group(1))
    import shlex

    argv = shlex.split(line)
    assert argv[:2] == ["tcalc", command]
    assert cli_json(argv[1:]) == client.get(f"/{command}.json?{query}").json()


def test_the_url_is_the_state_and_the_form_holds_it(client):
    page = client.get("/memory?model=llama-3-8b&S=8k&recompute=full&flash=true&T=2&set=tied_embeddings%3Dtrue").text
    assert re.search(r'name="S" value="8k"', page)
    assert re.search(r'name="T" value="2"', page)
    assert re.search(r'<option value="true" selected>on</option>', page)  # --flash
    assert "tied_embeddings=true</textarea>" in page
    line = html.unescape(re.search(r'<code id="command-line">([^<]*)</code>', page).group(1))
    assert line == "tcalc memory llama-3-8b --set tied_embeddings=true --S 8k --recompute full --flash --T 2"
    # the API's other spellings are the same option
    assert cells(client.get("/memory?model=gpt2&seq_len=512").text)["workload.seq_len"][0] == "512"


def test_empty_fields_are_dropped_from_the_url(client):
    r = client.get("/memory?model=gpt2&S=&B=&T=2", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/memory?model=gpt2&T=2"


@pytest.mark.parametrize("query, field, text", [
    ("model=llama-3-8b&S=1e400", "S", "S='1e400': '1e400' is too large"),
    ("model=no-such-preset", "model", "MODEL 'no-such-preset' is not a path, a preset"),
    ("model=llama-3-8b&gpu=no-such-gpu", "gpu", "unknown GPU 'no-such-gpu'"),
    ("model=llama-3-8b&T=3", "T", "must be divisible by T (3)"),
    ("model=llama-3-8b&recompute=bogus", "recompute", "recompute ('bogus')"),
    ("model=llama-3-8b&flash=maybe", "flash", "flash='maybe'"),
])
def test_a_bad_value_is_a_message_beside_its_field(client, query, field, text):
    r = client.get(f"/memory?{query}")
    assert r.status_code == 400
    message = re.search(rf'<p class="error" id="e-{field}" role="alert">([^<]*)</p>', r.text)
    assert message and text in html.unescape(message.group(1)), r.text[-2000:]
    assert "Traceback" not in r.text and 'data-key="memory.peak_bytes"' not in r.text


def test_an_error_no_field_owns_is_shown_above_the_result(client):
    r = client.get("/train?model=gpt2&gpus=7&T=2&global_batch=64")
    assert r.status_code == 400
    assert "--gpus (7) must be a multiple of T x P x CP" in html.unescape(r.text)
    r = client.get("/memory?model=gpt2&nonsense=1")
    assert r.status_code == 400 and 'id="problem"' in r.text and "memory has no option 'nonsense'" in html.unescape(r.text)
    r = client.get("/memory?model=gpt2&S=512&seq_len=1024")
    assert r.status_code == 400 and "give it once" in r.text
    assert client.get("/memory.json?model=llama-3-8b&S=1e400").json()["error"].startswith("S='1e400'")


def test_the_start_page_lists_the_presets_and_the_page_asks_for_a_model(client):
    index = client.get("/").text
    for preset in tc.presets().root:
        assert f'href="/memory?model={preset.name}"' in index
    page = client.get("/memory").text
    assert 'id="needs-model"' in page and "data-key" not in page
    assert client.get("/nowhere").status_code == 404


def test_the_picker_opens_the_page_it_names(client):
    r = client.get("/open?model=Qwen%2FQwen3-8B&page=inference", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/inference?model=Qwen%2FQwen3-8B"
    assert client.get("/open?model=gpt2&page=nowhere").status_code == 400


def test_an_uploaded_config_is_the_hf_config_it_holds(client):
    """The upload is read in memory; its fields become --set lines in the URL; the page's result
    is `--hf-config` on the same file."""
    r = client.post("/upload", files={"config": ("config.json", CONFIG.read_bytes(), "application/json")},
                    data={"page": "memory"}, follow_redirects=False)
    assert r.status_code == 303
    location = r.headers["location"]
    assert location.startswith("/memory?set=")
    page = client.get(location)
    assert page.status_code == 200
    expected = tc.memory(hf_config=CONFIG).memory.peak_bytes
    assert cells(page.text)["memory.peak_bytes"][0] == str(expected)


@pytest.mark.parametrize("body, text", [
    (b"{not json", "invalid JSON"),
    (b"[1, 2]", "expected a JSON object"),
    (b'{"model_type": "no-such-type"}', "no-such-type"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_a_bad_upload_is_a_message(client, body, text):
    r = client.post("/upload", files={"config": ("config.json", body, "application/json")}, data={"page": "memory"})
    assert r.status_code == 400 and text in html.unescape(r.text) and "Traceback" not in r.text


def test_an_oversized_upload_is_refused(client):
    r = client.post("/upload", files={"config": ("config.json", b" " * (2 << 20), "application/json")},
                    data={"page": "memory"})
    assert r.status_code == 400 and "Traceback" not in r.text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["S", "B", "T", "dp", "zero", "gpu", "recompute", "flash", "model", "set", "x"]),
       value=st.text(max_size=30))
def test_any_query_is_a_page_or_an_inline_error_never_a_traceback(client, key, value):
    r = client.get("/memory", params=[("model", "gpt2"), (key, value)])
    assert r.status_code in (200, 303, 400), r.text[-500:]
    assert "Traceback" not in r.text and "internal error" not in r.text


def test_set_lines_read_back_to_the_same_model():
    spec = {"n_layers": 2, "name": "x 1", "positional": "rotary", "dropout": 0.0, "tied_embeddings": False,
            "weight_format": "fp8", "source": "dropped"}
    parsed = MemoryRequest.from_keywords({"set": set_lines(spec)}).set
    assert parsed == {k: v for k, v in spec.items() if k != "source"}
    assert set_lines({"name": "true"}) == ['name="true"']  # a string that would read as a boolean


def test_form_fields_come_from_the_request_model():
    fields = forms.form(MemoryRequest, {}, {})
    declared = [n for n, o in MemoryRequest.options().items() if o.api]
    common = list(MemoryRequest.common_options())  # first, in their own panel (issue 38), then the rest as declared
    assert [f.name for f in fields] == common + [n for n in declared if n not in common]
    assert {f.panel for f in fields if f.name in common} == {forms.COMMON_PANEL}
    by_name = {f.name: f for f in fields}
    assert by_name["seq_len"].key == "S" and by_name["seq_len"].flag == "--S"
    assert by_name["flash"].kind == "switch" and by_name["set"].kind == "lines"
    assert by_name["model"].panel == forms.COMMON_PANEL and by_name["preset"].panel == forms.MODEL_PANEL


# ---------------------------------------------------------------------------- the plain CLI's start-up
DOOR_MODULES = ("starlette", "uvicorn", "jinja2", "multipart", "mcp", "mcp_types", "httpx", "anyio",
                "transformer_calc.web", "transformer_calc.mcp_server")


@pytest.mark.parametrize("argv", [["memory", "--preset", "gpt2", "-f", "json"], ["--help"], ["web", "--help"],
                                  ["mcp", "--help"]])
def test_the_plain_cli_never_imports_the_web_or_mcp_dependencies(argv):
    code = ("import sys, io, contextlib\nfrom transformer_calc.cli import run\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    code = run({argv!r})\n"
            f"print(code, sorted(m for m in {DOOR_MODULES!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert out.stdout.split(None, 1) == ["0", "[]\n"], out.stdout + out.stderr


# ---------------------------------------------------------------------------- tcalc web's own options
def _run(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = run(argv)
    return code, err.getvalue()


@pytest.mark.parametrize("argv, text", [
    (["web", "--port", "70000"], "--port"),
    (["web", "--port", "-1"], "--port"),
    (["web", "--host", "a b"], "--host"),
])
def test_a_bad_host_or_port_is_one_error_line(argv, text):
    code, err = _run(argv)
    assert code == 2 and err.startswith("Error: ") and text in err and err.count("\n") == 1, err


def test_a_server_on_ipv6_loopback_checks_the_host_header():
    """`tcalc web --host ::1`: the Host check applies (round 1 answered any Host there)."""
    import socket
    import time
    import urllib.error
    import urllib.request

    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    proc = subprocess.Popen([sys.executable, "-m", "transformer_calc", "web", "--host", "::1", "--port", "0"], cwd=REPO,
                            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"http://\[::1\]:\d+/", proc.stderr.readline()).group(0)

        def status(host: str | None) -> int:
            request = urllib.request.Request(url + "presets", headers={"Host": host} if host else {})
            for _ in range(50):
                try:
                    with urllib.request.urlopen(request, timeout=10) as r:
                        return r.status
                except urllib.error.HTTPError as exc:
                    return exc.code
                except urllib.error.URLError:
                    time.sleep(0.1)  # not listening yet
            raise AssertionError("tcalc web --host ::1 did not answer")

        assert status(None) == 200  # Host: [::1]:PORT
        assert status("evil.example") == 400
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_port_in_use_is_one_error_line():
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, err = _run(["web", "--port", str(port)])
    assert code == 2 and err.startswith(f"Error: --host 127.0.0.1 --port {port}: cannot bind"), err


# ---------------------------------------------------------------------------- the URL == the command line
# Valid texts per memory option, as a person types them in the form.
TEXTS = {"seq_len": ["512", "8k", "1e3"], "batch_size": ["1", "4"], "recompute": ["none", "selective", "full"],
         "flash": ["true", "false"], "tensor": ["1", "2"], "sequence_parallel": ["true", "false"],
         "zero": ["0", "1", "3"], "data": ["1", "8"], "gpu": ["h100", "a100-80gb"], "optimizer": ["adamw", "sgd"],
         "set": ["tied_embeddings=true", "mlp=swiglu\ntied_embeddings=false"], "framework": ["pytorch", "megatron"]}


@settings(max_examples=40, deadline=None)
@given(chosen=st.dictionaries(st.sampled_from(sorted(TEXTS)), st.integers(0, 2), max_size=6))
def test_the_printed_command_is_the_urls_request(chosen):
    """The command line a page prints parses (by the CLI's own typer command) to the request the
    page's URL gives the API."""
    import shlex

    import typer.main

    from transformer_calc.cli import _app_for, _request  # the CLI's parse, without running

    options = MemoryRequest.options()
    items = [("model", "gpt2")]
    for name, i in chosen.items():
        values = TEXTS[name]
        items.append((forms.field_key(name, options[name]), values[i % len(values)]))
    keywords, texts = forms.read_query(MemoryRequest, items)
    from_url = MemoryRequest.from_keywords(keywords)
    argv = shlex.split(forms.command_line(MemoryRequest, texts))
    assert argv[:2] == ["tcalc", "memory"]
    group = typer.main.get_command(_app_for(argv[1:]))  # the app with `memory` alone, as `tcalc memory` builds it
    ctx = group.commands["memory"].make_context("memory", argv[2:])
    from_cli = _request(MemoryRequest, {k: v for k, v in ctx.params.items() if k != "fmt"})
    # no --set: the CLI's empty list reads as {}, the API's absent keyword as None (both: no overrides)
    assert from_cli.model_copy(update={"set": from_cli.set or None}) == from_url


# ---------------------------------------------------------------------------- round 2: serve's curve, the other pages
def _svg(page: str, label: str) -> str:
    return re.search(rf'<svg [^>]*aria-label="{re.escape(label)}".*?</svg>', page, re.S).group(0)


def test_the_serve_curve_draws_each_concurrency_the_engine_holds(client):
    """TTFT and TPOT against tokens/s per GPU, one point per --concurrency value with times (a
    point over the KV cache's capacity, 256 here, is rejected in the table, not drawn)."""
    query, call = CASES["serve"]
    page = client.get(f"/serve?{query}").text
    curve = call().curve
    held = [p.concurrency for p in curve.points if p.tpot_s is not None]
    rejected = [p for p in curve.points if p.tpot_s is None]
    assert held == [1, 8, 64] and [p.concurrency for p in rejected] == [256] and rejected[0].reason
    svg = _svg(page, "latency-throughput curve")
    drawn = [int(c) for c in re.findall(r'data-concurrency="(\d+)"', svg)]
    assert drawn == held * 2  # the TTFT panel, then the TPOT panel
    assert "target 50 ms" in svg and "target 1 s" in svg  # the targets as lines
    shown = cells(page)
    assert json.loads(shown["curve.points.3.reason"][0]) == rejected[0].reason


def test_the_disaggregated_pools_show_the_bottleneck(client):
    page = client.get(f"/serve?{CASES['serve'][0]}").text
    d = CASES["serve"][1]().disaggregated
    svg = _svg(page, "disaggregated pools")
    assert re.findall(r'data-pool="(\w+)"', svg) == ["prefill", "decode"]
    assert f"{d.bottleneck}-bound" in svg and f"{d.prefill_instances}P{d.decode_instances}D" in svg
    assert json.loads(cells(page)["disaggregated.requests_per_s"][0]) == d.requests_per_s


def test_the_sweep_chart_takes_the_clis_default_axes(client):
    """x: the first varying axis other than model and gpu; a line per value of the next one (cli.py
    _sweep_plot_args); a point per grid point."""
    page = client.get("/sweep?model=llama-3-8b&B=1,2,4&S=1k,2k&metrics=peak_bytes").text
    svg = _svg(page, "sweep peak_bytes")
    assert "peak_bytes against batch_size, a line per seq_len" in svg
    assert svg.count("<polyline") == 2 and svg.count("<circle") == 6


def test_a_sweep_over_the_pages_limit_is_refused_before_pricing(client):
    from transformer_calc.web.app import SWEEP_MAX_POINTS

    r = client.get(f"/sweep?model=gpt2&B=1..{SWEEP_MAX_POINTS + 1}:1")
    assert r.status_code == 400
    assert f"the grid has {SWEEP_MAX_POINTS + 1:,} points; this page prices at most {SWEEP_MAX_POINTS:,}" in r.text
    assert "data-key=" not in r.text


def test_the_presets_page_links_each_preset_to_its_params_page(client):
    page = client.get("/presets").text
    names = [p.name for p in tc.presets()]
    links = re.findall(r'<a href="/params\?model=([^"]+)" data-key="(\d+)\.name"', page)
    assert [html.unescape(n) for n, _ in links] == names and [int(i) for _, i in links] == list(range(len(names)))
    first = names[0]
    assert client.get(f"/params?model={first}").status_code == 200


def test_the_hardware_table_links_each_accelerator_to_its_page(client):
    page = client.get("/hardware").text
    table = tc.hardware().model_dump(mode="json")
    shown = cells(page)
    for i, row in enumerate(table):
        assert json.loads(shown[f"{i}.memory_bytes"][0]) == row["memory_bytes"]
        assert json.loads(shown[f"{i}.memory_bw_bytes_s"][0]) == row["memory_bw_bytes_s"]
        assert json.loads(shown[f"{i}.peak_flops.bf16"][0]) == row["peak_flops"].get("bf16")
        assert f'href="/hardware?name={row["name"]}"' in page
    one = client.get(f"/hardware?name={table[0]['name']}")
    assert json.loads(cells(one.text)["memory_bytes"][0]) == table[0]["memory_bytes"]


def test_a_job_file_in_the_url_is_checked_as_the_file_it_holds(client):
    """`job=`: the YAML text, checked from memory; the result is the API's on that file, named job.yaml."""
    from urllib.parse import quote

    path = JOBS / "infer.yaml"
    r = client.get(f"/check?job={quote(path.read_text())}&max_memory=70GiB")
    assert r.status_code == 200
    expected = tc.check(str(path), max_memory="70GiB").model_dump(mode="json")
    expected["files"][0]["file"] = "job.yaml"
    assert client.get(f"/check.json?job={quote(path.read_text())}&max_memory=70GiB").json() == expected
    shown = cells(r.text)
    for key, value in flat(expected):
        if not isinstance(value, list):
            assert json.loads(shown[key][0]) == value, key
    assert html.unescape(re.search(r'id="command-line">([^<]*)<', r.text).group(1)) == "tcalc check job.yaml --max-memory 70GiB"
    status = expected["files"][0]["status"]
    assert status == "fail" and "exits 1" in re.search(r'id="verdict">(.*?)</p>', r.text, re.S).group(1)  # on its A100, its TTFT limit


def test_an_uploaded_job_file_goes_into_the_url(client):
    path = JOBS / "train-ok.yaml"
    r = client.post("/check/upload", files={"job": ("train-ok.yaml", path.read_bytes())}, follow_redirects=False)
    assert r.status_code == 303
    page = client.get(r.headers["location"])
    assert html.unescape(re.search(r'<textarea id="f-job"[^>]*>([^<]*)<', page.text).group(1)) == path.read_text().rstrip()
    assert json.loads(cells(page.text)["files.0.status"][0]) == tc.check(str(path)).files[0].status == "pass"


@pytest.mark.parametrize("query, text", [
    ("job=model%3A%20%5B1", "job.yaml: invalid YAML"),  # an INVALID file, as tcalc check reports it
    ("job=" + "a" * 4001, "job: 4,001 characters; the page&#39;s URL holds a job file of at most 4,000"),
    ("job=a&job=b", "job is given twice in the query"),
    ("job=model%3A%20%7Bpreset%3A%20gpt2%7D&max_memory=zz", "(&#39;zz&#39;) is not a size"),
    ("files=/no/such.yaml", "file &#39;/no/such.yaml&#39; does not exist; check the path"),  # INVALID
])
def test_a_bad_job_file_is_a_message(client, query, text):
    r = client.get(f"/check?{query}")
    assert text in r.text and "Traceback" not in r.text


@pytest.mark.parametrize("files, text", [
    ({"job": ("x.yaml", b"\xff\xfe")}, "job: not UTF-8 text"),
    ({"job": ("x.yaml", b"a" * 4001)}, "job: over 4,000 characters"),
    ({"job": ("x.yaml", b"  \n")}, "job: the file is empty"),
    ({"job": ("x.yaml", "\u6a21" * 1500)}, "job: 13,504 bytes once in the URL, over 12,000"),  # 3 bytes, %XX each
    ({"other": ("x.yaml", b"model: {}")}, "job: no file was sent"),
])
def test_a_bad_job_upload_is_a_message_beside_the_box(client, files, text):
    r = client.post("/check/upload", files=files)
    assert r.status_code == 400
    assert text in html.unescape(re.search(r'id="e-job"[^>]*>([^<]*)<', r.text).group(1))


def test_every_page_is_in_the_navigation(client):
    nav = re.search(r"<nav>(.*?)</nav>", client.get("/").text, re.S).group(1)
    assert re.findall(r'href="/(\w+)"', nav) == list(PAGES)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(["check", "sweep", "hardware", "presets"]),
       key=st.sampled_from(["job", "files", "gpu", "max_memory", "model", "B", "S", "metrics", "name", "x"]),
       value=st.text(min_size=1, max_size=60))
def test_any_query_of_the_new_pages_is_a_page_or_an_inline_error(client, command, key, value):
    """Hostile text in any key of check, sweep, hardware and presets: a page or an inline message,
    never a traceback nor the page's internal-error line."""
    r = client.get(f"/{command}", params={"model": "gpt2", key: value} if command == "sweep" and key != "model"
                   else {key: value})
    assert r.status_code in (200, 303, 400), r.text[:300]
    assert "Traceback" not in r.text and "internal error" not in r.text


BANNER_PAGES = {  # page: (query, the headline's start)
    "memory": ("model=llama-3-8b&S=4096&gpu=h100", "Does not fit on H100-SXM5-80GB: 154.6 GiB needed, 75.94 GiB over"),
    "inference": ("model=llama-3-8b&gpu=h100", "Fits on H100-SXM5-80GB"),
    "serve": ("model=llama-3-8b&gpu=h100&gpus=8&prompt_len=2000&output_len=500&ttft=1&tpot=0.05", "Best on 8 × H100"),
    "train": ("model=gpt2&gpus=8&global_batch=64&S=1024&tokens=1e9", "Fits on 8 × H100-SXM5-80GB: a step takes"),
    "plan": ("model=gpt2&gpus=8&global_batch=64&S=1024", "Fastest of"),
    "params": ("model=llama-3-8b", "8,030,261,248 parameters"),
    "flops": ("model=gpt2", ""),
    "mfu": ("model=gpt2&gpus=8&global_batch=64&step_time=0.5&S=1024", "MFU 1.4 %"),
    "sweep": ("model=llama-2-7b&B=1,2,4&T=1,2&gpu=a100-80gb", "2 of 6 points fit; nearest the limit: batch size 2, tensor 2"),
}


@pytest.mark.parametrize("command", list(BANNER_PAGES))
def test_each_page_leads_with_its_verdict(client, command):
    """Issue 38: the answer first: a banner whose headline says it in words and whose key numbers
    are the result's (each carries its JSON key and exact value), above the form and the charts."""
    query, headline = BANNER_PAGES[command]
    page = client.get(f"/{command}?{query}").text
    assert page.index('id="banner"') < page.index('id="options"')
    banner = page[page.index('id="banner"'):page.index("</section>", page.index('id="banner"'))]
    assert re.search(r'<p class="headline" id="headline">([^<]*)<', banner).group(1).startswith(html.escape(headline))
    data = client.get(f"/{command}.json?{query}").json()
    numbers = re.findall(r'<dt>([^<]+)</dt><dd data-key="([^"]+)" data-value="([^"]*)">([^<]*)<', banner)
    assert len(numbers) >= 2, command
    for label, key, value, text in numbers:
        leaf = data
        for part in key.split("."):
            leaf = leaf[int(part)] if isinstance(leaf, list) else leaf[part]
        assert json.loads(html.unescape(value)) == leaf, key
        assert "_" not in label and text, (label, text)  # words, not raw keys
        assert text != html.unescape(value) or isinstance(leaf, int), (label, text)  # a unit where the value has one


def test_the_details_are_in_words(client):
    """Issue 38: the tables under the charts label each value in words (the glossary's spellings,
    the unit in the cell), the raw key only in the label's title, the cell's data-key and the JSON."""
    page = client.get("/inference?model=llama-3-8b&gpu=h100").text
    labels = re.findall(r'<th title="([^"]*)">([^<]*)</th>', page)
    assert len(labels) > 50
    assert [shown for _, shown in labels if "_" in shown] == []
    assert ("expected.time_to_first_token_s", "time to first token") in labels
    assert re.search(r'<summary title="kv_cache">KV cache</summary>', page)


def test_the_serve_charts_have_titled_axes_with_ticks():
    """Issue 38: the serve charts' axes carried two ticks (0 and the maximum) and the y title sat
    among the points: now round ticks on both axes and a title beside each."""
    import transformer_calc.api as tc
    from transformer_calc.web import charts

    r = tc.serve("llama-3.1-70b", gpu="h100", gpus=8, prompt_len=2000, output_len=500, ttft=1, tpot=0.05,
                 concurrency="1,8,64")
    layouts = charts.serve_layouts(r)
    assert len(re.findall(r'font-size="9" text-anchor="end"', layouts)) >= 4  # y ticks
    assert len(re.findall(r'font-size="9" text-anchor="middle"', layouts)) >= 4  # x ticks
    assert "rotate(-90" in layouts and "output tokens/s per GPU" in layouts
    curve = charts.serve_curve(r)
    assert curve.count("rotate(-90") == 2 and len(re.findall(r'font-size="9" text-anchor="end"', curve)) >= 6
    assert "rotate(-90" in charts.roofline(tc.inference("llama-3-8b", gpu="h100"))
