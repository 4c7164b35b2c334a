"""Hostile input, round 3 (issue 36): the Hub client against a hostile mirror (tests/hostile_mirror.py,
loopback only), the file readers, the MCP server's protocol, the terminal, the messages, and the
previous rounds' surfaces. Each case: one `Error:` line naming the field, file or variable, exit 2,
nothing on stdout; or a correct answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import transformer_calc.api as tc
from transformer_calc.cli import run
from transformer_calc.errors import TcalcError

from hostile_mirror import Serve, hostile_mirror
from hubfake import safetensors_bytes, safetensors_index
from test_checkpoint import LLAMA, bf16_tensors, write_folder

REPO = "acme/tiny-llama"


def tcalc(*argv: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "TCALC_HUB"))}
    return subprocess.run([sys.executable, "-m", "transformer_calc", *argv], capture_output=True, text=True,
                          timeout=timeout, env=base | (env or {}))


def one_error_line(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout[:200], out.stderr)
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in out.stderr, out.stderr
    return lines[0]


def _error(capsys, *argv) -> str:
    code = run(list(argv))
    out, err = capsys.readouterr()
    assert code == 2, (argv, code, out[:200], err)
    assert out == "" and err.startswith("Error: ") and err.count("\n") == 1, err
    return err


def _ok(capsys, *argv) -> dict:
    code = run([*argv, "-f", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _repo() -> dict[str, bytes]:
    shard = safetensors_bytes(bf16_tensors())
    return {"config.json": json.dumps(LLAMA).encode(), "model.safetensors": shard}


# ---------------------------------------------------------------------------- the Hub: writes stay in HF_HOME
pytest.importorskip("huggingface_hub")


@pytest.mark.parametrize("revision", ["../../../../x", "/etc/x", "a/../../b", "main\n", "x" * 600, "refs/../../y"])
def test_a_revision_that_is_a_path_is_refused(tmp_path, revision):
    home = tmp_path / "home"
    before = _files_under(tmp_path)
    for argv in (["params", REPO, "--revision", revision], ["params", f"{REPO}@{revision}"]):
        out = tcalc(*argv, env={"HF_HOME": str(home), "HF_ENDPOINT": "http://127.0.0.1:9"})
        line = one_error_line(out)
        assert any(k in line for k in ("revision", "MODEL", "does not exist")) and len(line) < 400, line
    assert _files_under(tmp_path) - before <= {"home", "home/hub"}


@pytest.mark.parametrize("etag, commit", [("../../../x", None), ("/tmp/abs-etag", None), ("..", None),
                                          (None, "../../../../c"), (None, "/abs")])
def test_a_mirrors_etag_or_commit_never_becomes_a_path_outside_the_cache(tmp_path, etag, commit):
    files = _repo()
    serve = {name: Serve(body, etag=etag if name == "config.json" else None,
                         **({"commit": commit} if commit is not None else {})) for name, body in files.items()}
    home = tmp_path / "home"
    with hostile_mirror(serve) as mirror:
        out = tcalc("params", REPO, "-f", "json", env={"HF_HOME": str(home), "HF_ENDPOINT": mirror.url})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["checkpoint"]["available"]
    outside = {p for p in _files_under(tmp_path) if not p.startswith("home")}
    assert outside == set(), outside
    assert not Path("/tmp/abs-etag").exists()
    for p in home.rglob("*"):
        assert os.path.realpath(p).startswith(str(home.resolve())), p


def test_the_cache_is_laid_out_as_huggingface_hub_reads_it(tmp_path):
    """A good answer is cached where huggingface_hub looks: offline, the same command answers."""
    files = _repo()
    with hostile_mirror({n: Serve(b) for n, b in files.items()}) as mirror:
        online = tcalc("params", REPO, "-f", "json", env={"HF_HOME": str(tmp_path), "HF_ENDPOINT": mirror.url})
    assert online.returncode == 0, online.stderr
    offline = tcalc("params", REPO, "-f", "json", env={"HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["params"] == json.loads(online.stdout)["params"]


# ---------------------------------------------------------------------------- the Hub: every wait bounded
@pytest.mark.parametrize("slow", ["config.json", "model.safetensors"])
def test_a_dripped_body_is_bounded_by_one_deadline(tmp_path, slow):
    files = _repo()
    serve = {n: Serve(b, drip_s=0.2 if n == slow else 0.0) for n, b in files.items()}
    with hostile_mirror(serve) as mirror:
        for how in ({"TCALC_HUB_TIMEOUT": "2"}, {}):
            argv = ["params", REPO] + (["--hub-timeout", "2"] if not how else [])
            start = time.monotonic()
            line = one_error_line(tcalc(*argv, env={"HF_HOME": str(tmp_path), "HF_ENDPOINT": mirror.url} | how))
            assert time.monotonic() - start < 15
            assert "more than 2 s" in line and "--hub-timeout" in line, line


def test_a_rate_limit_is_an_error_not_an_hour_of_sleep(tmp_path):
    serve = {"config.json": Serve(status=429, headers={"Retry-After": "3600", "RateLimit-Reset": "3600"})}
    with hostile_mirror(serve) as mirror:
        start = time.monotonic()
        line = one_error_line(tcalc("params", REPO, env={"HF_HOME": str(tmp_path), "HF_ENDPOINT": mirror.url}))
    assert time.monotonic() - start < 15
    assert "429" in line and "3600" in line, line


def test_a_range_read_stops_at_the_header_whatever_the_server_sends(tmp_path):
    """A server that ignores Range and sends 300 MiB: the header is read, the rest never."""
    files = _repo()
    serve = {"config.json": Serve(files["config.json"]),
             "model.safetensors": Serve(files["model.safetensors"], ignore_range=True, pad=300 << 20)}
    with hostile_mirror(serve) as mirror:
        out = tcalc("params", REPO, "-f", "json", env={"HF_HOME": str(tmp_path), "HF_ENDPOINT": mirror.url})
        time.sleep(0.2)
        sent = mirror.sent.get("model.safetensors", 0)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["checkpoint"]["available"]
    assert sent < 32 << 20, sent  # socket buffers at most, never the 300 MiB


# ---------------------------------------------------------------------------- the Hub: settings
@pytest.mark.parametrize("env, says", [
    ({"HF_HUB_ETAG_TIMEOUT": "abc"}, "HF_HUB_ETAG_TIMEOUT ('abc')"),
    ({"HF_HUB_DOWNLOAD_TIMEOUT": "-1"}, "HF_HUB_DOWNLOAD_TIMEOUT ('-1')"),
    ({"HF_HOME": "/dev/null"}, "HF_HOME ('/dev/null') is not a folder"),
    ({"HF_TOKEN": "hf_é\u2028abc"}, "HF_TOKEN holds a character that is not printable ASCII"),
    ({"TCALC_HUB_TIMEOUT": "soon"}, "TCALC_HUB_TIMEOUT ('soon')"),
    ({"HF_ENDPOINT": "not a url"}, "HF_ENDPOINT"),
])
def test_bad_hub_settings_name_the_variable(tmp_path, env, says):
    line = one_error_line(tcalc("params", REPO, env={"HF_HOME": str(tmp_path / "h"), "HF_ENDPOINT": "http://127.0.0.1:9"} | env))
    assert says in line, line


def test_hub_timeout_applies_to_repo_ids_only(capsys):
    assert "--hub-timeout" in _error(capsys, "params", "gpt2", "--hub-timeout", "5")
    assert "--hub-timeout" in _error(capsys, "params", "gpt2", "--hub-timeout", "0")


# ---------------------------------------------------------------------------- checkpoint readers
def test_metadata_holding_json_text_and_bracketed_tensor_names_are_read(tmp_path, capsys):
    """kohya / mergekit write JSON text into __metadata__ values; names may hold brackets."""
    tensors = bf16_tensors()
    meta = {"ss_network_args": json.dumps({"a": [[[[{"b": [1, 2]}]]]]}), "mergekit": "[[[[[[[[{{{{"}
    path = tmp_path / "ckpt"
    write_folder(path, tensors)
    (path / "model.safetensors").write_bytes(safetensors_bytes(tensors | {"extra[0].scale[1]": ("F32", (1,))}, meta))
    data = _ok(capsys, "params", str(path))
    assert data["checkpoint"]["available"] and data["checkpoint"]["params"] == data["params"]["total"] + 1
    (path / "model.safetensors").write_bytes(safetensors_bytes({"w": ("F32", (1,))}, {"a": "x"})[:8]
                                             + b'{"a":' + b"[" * 50 + b"]" * 50 + b"}")
    assert "nests deeper" in _error(capsys, "params", str(path))


@pytest.mark.parametrize("value", [["model.safetensors"], {"file": "model.safetensors"}, 3, None, True])
def test_a_weight_map_value_that_is_not_a_file_name_is_named(tmp_path, capsys, value):
    path = tmp_path / "ckpt"
    write_folder(path, bf16_tensors(), shards=2)
    index = json.loads((path / "model.safetensors.index.json").read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = value
    (path / "model.safetensors.index.json").write_text(json.dumps(index))
    line = _error(capsys, "params", str(path))
    assert "weight_map[" in line and first[:20] in line and "not a file name" in line, line


def test_a_checkpoint_that_contradicts_its_config_is_refused_with_both_counts(tmp_path, capsys):
    big = dict(LLAMA, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256)  # Llama-3-8B's config.json beside the tiny weights
    path = tmp_path / "ckpt"
    write_folder(path, bf16_tensors(), config=big)
    line = _error(capsys, "inference", str(path), "--S", "128", "--gpu", "h100")
    assert "8,030,261,248" in line and "headers hold" in line and "not one model" in line, line
    tiny = tmp_path / "tiny"
    write_folder(tiny, bf16_tensors(), config=dict(LLAMA, num_hidden_layers=1, vocab_size=8))  # the reverse
    assert "not one model" in _error(capsys, "params", str(tiny))
    tied = tmp_path / "tied"  # a head tied in the config, stored untied: within the tolerance
    write_folder(tied, bf16_tensors(), config=dict(LLAMA, tie_word_embeddings=True))
    assert _ok(capsys, "params", str(tied))["checkpoint"]["available"]


def test_a_long_model_string_is_one_line_everywhere(capsys):
    long = "a" * 10_000
    line = _error(capsys, "params", long)
    assert "10,000 characters" in line and len(line) < 300
    with pytest.raises(TcalcError, match="10,000 characters"):
        tc.params(long)
    assert "10,000 characters" in _error(capsys, "params", "org/" + "b" * 9_996)


# ---------------------------------------------------------------------------- MCP: the protocol
def _mcp_exchange(lines: list[str], timeout: float = 60, expect: int | None = None) -> list[dict]:
    """Start `tcalc mcp`, initialize, send `lines` raw, and read one answer per line that gets one."""
    pytest.importorskip("mcp")
    init = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    done = {"jsonrpc": "2.0", "id": "last", "method": "tools/list"}
    text = "\n".join([json.dumps(init), json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                      *lines, json.dumps(done)]) + "\n"
    proc = subprocess.Popen([sys.executable, "-m", "transformer_calc", "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    answers = []
    try:
        proc.stdin.write(text)
        proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            answer = json.loads(line)
            answers.append(answer)
            if any(a.get("id") == "last" for a in answers) and len(answers) >= 2 + (expect or 0):
                break
    finally:
        proc.stdin.close()
        proc.kill()
        proc.wait()
    assert any(a.get("id") == "last" for a in answers), answers
    return [a for a in answers[1:] if a.get("id") != "last"]


BAD_LINES = [
    ("{not json", -32700), ('{"jsonrpc": "2.0", "id": 1, "method": "tools/list"', -32700),
    ('[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]', -32600), ("[]", -32600), ("42", -32600),
    ('{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}', -32600), ('{"id": 1, "method": "tools/list"}', -32600),
    ('{"jsonrpc": "2.0", "id": 1}', -32600), ('{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}', -32600),
    ('{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}', -32600), ('{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', -32600),
    ('{"jsonrpc": "2.0", "id": 1, "method": 7}', -32600),
    ('{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', -32600), ('{"jsonrpc": "2.0", "id": [1], "method": "tools/list"}', -32600),
    ('{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": "x"}', -32600), ("\"text\"", -32600), ("null", -32600),
    (json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                 "params": {"name": "memory", "arguments": {"model": None}}}).replace("null", "[" * 500 + "]" * 500), -32600),
]


def test_every_malformed_mcp_line_gets_a_json_rpc_error():
    answers = _mcp_exchange([line for line, _ in BAD_LINES])
    assert [a["error"]["code"] for a in answers] == [code for _, code in BAD_LINES], answers
    for a in answers:
        assert a["jsonrpc"] == "2.0" and len(a["error"]["message"]) < 200


def test_mcp_check_and_schema_without_arguments_and_a_huge_keyword():
    calls = [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}}
             for i, (name, args) in enumerate([("check", {}), ("schema", {}), ("memory", {"model": "gpt2", "k" * 1_000_000: 1})])]
    answers = sorted(_mcp_exchange([json.dumps(c) for c in calls], expect=3), key=lambda a: a["id"])
    texts = [a["result"]["content"][0]["text"] for a in answers]
    assert all(a["result"]["isError"] for a in answers)
    assert "files is required" in texts[0] and "name is required" in texts[1]
    assert "unexpected keyword argument" in texts[2] and len(texts[2]) < 300
    with pytest.raises(TcalcError, match="files is required"):
        tc.check()


# ---------------------------------------------------------------------------- terminal and messages
def test_control_characters_in_a_gguf_name_are_escaped_in_tables(tmp_path, capsys):
    pytest.importorskip("gguf")
    from test_gguf import _case_llama, write_gguf

    arch, meta, tensors, _ = _case_llama()
    evil = "evil\x1b]0;pwned\x07\x1b[2J\x9b31m\u202etxt"
    write_gguf(tmp_path / "m.gguf", arch, dict(meta) | {"general.name": evil}, tensors)
    for command in (["params"], ["inference", "--S", "128", "--gpu", "h100"], ["memory"]):
        assert run([command[0], str(tmp_path / "m.gguf"), *command[1:]]) == 0
        out, _ = capsys.readouterr()
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\u202e" not in out, command
        assert "evil\\x1b]0;pwned\\x07" in out, out[:400]
    assert _ok(capsys, "params", str(tmp_path / "m.gguf"))["model"]["name"] == evil  # JSON keeps the value


def test_control_characters_in_an_error_line_are_escaped(capsys):
    line = _error(capsys, "memory", "gpt2", "--gpu", "h\x1b]0;x\x07")
    assert "\x1b" not in line and "\\x1b" in line


@pytest.mark.parametrize("argv, near", [
    (["memory", "gpt2", "--gpu", "zzzzqqqq"], "known: "), (["memory", "gpt2", "--gpu", "x" * 5000], "known: "),
])
def test_known_lists_are_clipped_closest_first(capsys, argv, near):
    line = _error(capsys, *argv)
    assert near in line and "more)" in line and len(line) < 250, line


def test_known_list_ranks_the_closest_first():
    from transformer_calc.errors import known_list

    assert known_list("qwen", ["llama", "qwen2", "gpt2", "qwen3"], limit=2) == "known: qwen2, qwen3, ... (2 more)"


def test_an_unknown_query_key_on_the_web_page_is_clipped():
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from transformer_calc.web.app import create_app

    client = TestClient(create_app(hosts=None))
    r = client.get("/memory?model=gpt2&" + "k" * 10_000 + "=1")
    assert r.status_code == 400 and r.text.count("k" * 100) == 0
    r = client.get("/params?model=" + "a" * 10_000)
    assert r.status_code == 400 and "10,000 characters" in r.text


# ---------------------------------------------------------------------------- streams and signals
SLOW = {"plan": ["plan", "llama-3-70b", "--gpus", "16384", "--global-batch", "4096"],
        "serve": ["serve", "llama-3-70b", "--gpu", "h100", "--gpus", "64", "--prompt-len", "2000", "--output-len", "500"],
        "train": ["train", "llama-3-70b", "--gpus", "1024", "--global-batch", "1024"]}


@pytest.mark.parametrize("command", sorted(SLOW))
def test_sigint_during_plan_serve_and_train_exits_130(command):
    import signal

    for delay in (0.35, 0.5, 0.65):
        proc = subprocess.Popen([sys.executable, "-m", "transformer_calc", *SLOW[command]], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        if proc.returncode == 0:  # it finished first: the whole answer, no line
            assert err == "" and out
            continue
        assert proc.returncode == 130 and err == "Error: interrupted\n", (delay, proc.returncode, err)
        if out:  # Ctrl-C after the answer was written (cli.main: still "interrupted"): that answer, whole
            whole = subprocess.run([sys.executable, "-m", "transformer_calc", *SLOW[command]], capture_output=True,
                                   text=True, timeout=60)
            assert out == whole.stdout, (delay, out[-200:])


def _sh(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("argv", ["params gpt2", "presets -f json", "memory llama-3-8b", "inference llama-3-8b --S 200000"])
def test_a_full_stdout_is_one_line_and_a_full_stderr_exits_2(argv):
    tcalc_ = f"{sys.executable} -m transformer_calc {argv}"
    full_out = _sh(f"{tcalc_} > /dev/full")
    assert full_out.returncode == 2 and full_out.stderr.count("Error: ") == 1, full_out.stderr
    assert "cannot write the output" in full_out.stderr
    bad = _sh(f"{sys.executable} -m transformer_calc params no-such-model 2> /dev/full")
    assert bad.returncode == 2
    both = _sh(f"{tcalc_} > /dev/full 2> /dev/full")
    assert both.returncode == 2


def test_train_with_absurd_sizes_answers_fast(capsys):
    start = time.monotonic()
    line = _error(capsys, "train", "llama-3-8b", "--L", "1000000000", "--P", "1000000000", "--gpus", "1000000000",
                  "--global-batch", "1000000000")
    assert "pipeline" in line and "1024" in line
    _ok(capsys, "train", "llama-3-8b", "--L", "1000000000", "--gpus", "1000000000", "--global-batch", "1000000000")
    assert time.monotonic() - start < 10


# ---------------------------------------------------------------------------- options that cannot apply, job files, check
@pytest.mark.parametrize("argv, says", [
    (["inference", "llama-3-8b", "--S", "128", "--block-size", "32", "--no-kv-cache"], "--block-size (32)"),
    (["serve", "llama-3-8b", "--gpu", "h100", "--ep", "2", "--prompt-len", "100", "--output-len", "10"], "--ep (2)"),
    (["sweep", "llama-3-8b", "--etp", "2"], "--etp (2)"),
    (["sweep", "llama-3-8b", "--etp", "2", "--T", "2"], "drop --etp"),
    (["serve", "llama-3-8b", "--gpu", "h100", "--max-num-batched-tokens", "4", "--max-num-seqs", "8", "--prompt-len", "100",
      "--output-len", "10"], "--max-num-batched-tokens (4) is below --max-num-seqs (8)"),
    (["inference", "llama-3-8b", "--S", "128", "--max-num-batched-tokens", "4", "--max-num-seqs", "8"], "vLLM refuses"),
])
def test_an_option_that_cannot_apply_is_refused(capsys, argv, says):
    assert says in _error(capsys, *argv)


def test_etp_still_applies_to_a_moe_model_in_a_sweep(capsys):
    data = _ok(capsys, "sweep", "mixtral-8x7b", "--etp", "1", "--T", "2", "--ep", "2", "--dp", "2")
    assert data["points_total"] == 1


@pytest.mark.parametrize("section, says", [
    ("inference: {ttft_s: '1'}", "ttft_s ('1'): is text, not a number"),
    ("inference: {tpot_s: '0.05'}", "tpot_s ('0.05'): is text"),
    ("inference: {block_size: 16.0}", "block_size (16.0): is a float, not a whole number; give 16"),
    ("inference: {block_size: 16.5}", "block_size (16.5): is a float"),
    ("inference: {memory_utilization: '0.9'}", "memory_utilization ('0.9'): is text"),
])
def test_serve_job_files_keep_their_numbers_typed(tmp_path, capsys, section, says):
    job = tmp_path / "job.yaml"
    job.write_text(f"model: {{preset: llama-3-8b}}\n{section}\n")
    assert says in _error(capsys, "serve", "--config", str(job), "--gpu", "h100", "--prompt-len", "100", "--output-len", "10")
    code = run(["check", str(job), "-f", "json"])
    out, _ = capsys.readouterr()
    assert code == 2 and json.loads(out)["files"][0]["status"] == "invalid"


@pytest.mark.parametrize("recipe, gpu", [("mxfp8", "h100"), ("tensorwise", "a100-80gb"), ("nvfp4", "h100")])
def test_check_says_invalid_for_an_fp8_recipe_the_gpu_cannot_run(tmp_path, capsys, recipe, gpu):
    job = tmp_path / "job.yaml"
    job.write_text(f"model: {{preset: llama-3-8b}}\ntraining: {{fp8_recipe: {recipe}}}\nchecks: {{gpu: {gpu}}}\n")
    code = run(["check", str(job), "-f", "json"])
    out, _ = capsys.readouterr()
    data = json.loads(out)
    assert code == 2 and data["files"][0]["status"] == "invalid" and data["invalid"] == 1, data
    assert f"fp8_recipe {recipe}" in data["files"][0]["error"]


@pytest.mark.parametrize("call, says", [
    (lambda: tc.memory("gpt2", gpu=None), "gpu=None"),
    (lambda: tc.memory("gpt2", flash=None), "flash=None"),
    (lambda: tc.inference("gpt2", S=128, cuda_graphs="yes"), "cuda_graphs='yes': is not a boolean"),
    (lambda: tc.inference("gpt2", S=128, cuda_graphs=1), "cuda_graphs=1: is not a boolean"),
    (lambda: tc.serve("gpt2", block_size=16.0, prompt_len=100, output_len=10), "block_size=16.0: is a float"),
    (lambda: tc.memory("gpt2", S=4096.0), "S=4096.0: is a float"),
])
def test_the_api_refuses_none_and_values_of_the_wrong_type(call, says):
    with pytest.raises(TcalcError, match=re_escape(says)):
        call()


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


def test_an_unknown_api_keyword_is_clipped():
    with pytest.raises(TypeError) as err:
        tc.memory("gpt2", **{"k" * 10_000: 1})
    assert len(str(err.value)) < 200


def test_the_api_is_bounded_by_the_same_deadline(tmp_path):
    """The deadline lives in the resolver, under every door: the API (and so the web page and MCP)."""
    files = _repo()
    code = ("import transformer_calc.api as tc\n"
            "try:\n    tc.params('acme/tiny-llama', hub_timeout=2)\n"
            "except ValueError as exc:\n    print(exc)\n")
    with hostile_mirror({n: Serve(b, drip_s=0.2) for n, b in files.items()}) as mirror:
        start = time.monotonic()
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                             env={k: v for k, v in os.environ.items() if not k.startswith("HF_")}
                             | {"HF_HOME": str(tmp_path), "HF_ENDPOINT": mirror.url})
    assert time.monotonic() - start < 15
    assert "more than 2 s" in out.stdout and out.stderr == "", (out.stdout, out.stderr)


def test_rich_markup_in_a_name_is_text(tmp_path, capsys):
    pytest.importorskip("gguf")
    from test_gguf import _case_llama, write_gguf

    arch, meta, tensors, _ = _case_llama()
    name = "[/bold] x [link=https://evil]click[/link] [red] :smile:"
    write_gguf(tmp_path / "m.gguf", arch, dict(meta) | {"general.name": name}, tensors)
    assert run(["params", str(tmp_path / "m.gguf")]) == 0
    out, _ = capsys.readouterr()
    assert name in " ".join(out.split())  # the table may wrap it


def test_check_lines_escape_a_file_name(tmp_path, capsys):
    job = tmp_path / "evil\x1b[2J.yaml"
    job.write_text("model: {preset: gpt2}\ntraining: {S: 0}\n")
    assert run(["check", str(job)]) == 2
    out, _ = capsys.readouterr()
    assert "\x1b" not in out and "evil\\x1b[2J.yaml" in out


def test_an_mcp_null_argument_is_not_given():
    """The tool's input schema allows null for an optional field (its default): MCP leaves it out,
    where the Python API refuses an explicit None."""
    pytest.importorskip("mcp")
    from transformer_calc.mcp_server.server import call

    assert call("params", {"model": "gpt2", "tensor": None}) == call("params", {"model": "gpt2"})
    with pytest.raises(TcalcError, match="tensor=None"):
        tc.params("gpt2", tensor=None)


def test_a_deeply_nested_sweep_axis_is_refused():
    deep: object = 1
    for _ in range(5_000):
        deep = [deep]
    with pytest.raises(TcalcError, match="takes one value or a list"):
        tc.sweep("gpt2", B=deep)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.one_of(JSON.map(json.dumps), st.text(max_size=40),
                 st.dictionaries(st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"]), JSON,
                                 max_size=6).map(json.dumps)))
def test_the_mcp_gate_answers_any_line_or_passes_a_request_on(line):
    """Whatever a line holds: None (one JSON-RPC message, passed to the SDK) or one error answer."""
    pytest.importorskip("mcp")
    from transformer_calc.mcp_server.server import gate

    answer = gate(line)
    if answer is None:
        message = json.loads(line)
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0"
    else:
        assert answer["error"]["code"] in (-32700, -32600) and len(answer["error"]["message"]) < 200
        json.dumps(answer)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_printable_leaves_no_control_character(text):
    from transformer_calc.errors import printable

    out = printable(text)
    assert all(ch.isprintable() or ch == " " for ch in out)
    assert out == text or any(not ch.isprintable() and ch != " " for ch in text)
