"""Hugging Face repo ids as MODEL, through the real huggingface_hub client, with no network: a
loopback fake of the Hub (tests/hubfake.py, HF_ENDPOINT) and a warm cache in a temporary HF_HOME.

huggingface_hub reads its settings at import, so tcalc runs in a subprocess with the environment
set: HF_ENDPOINT, HF_HOME, HF_HUB_OFFLINE, HF_TOKEN, HF_HUB_ETAG_TIMEOUT, HF_HUB_DOWNLOAD_TIMEOUT.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from hubfake import fake_hub, safetensors_bytes, safetensors_index, warm_cache
from test_checkpoint import LLAMA, bf16_tensors, fp8_tensors

pytest.importorskip("huggingface_hub")

REPO = "acme/tiny-llama"


def shards(tensors, n: int) -> dict[str, bytes]:
    names = list(tensors)
    files = {f"model-{k + 1:05d}-of-{n:05d}.safetensors": safetensors_bytes({x: tensors[x] for x in names[k::n]})
             for k in range(n)}
    return files | {"model.safetensors.index.json": safetensors_index(files)}


def repo_files(tensors=None, n: int = 2, config=None) -> dict[str, bytes]:
    return {"config.json": json.dumps(config or LLAMA).encode()} | shards(tensors or bf16_tensors(), n)


def data_bytes(files: dict[str, bytes]) -> int:
    import struct

    total = 0
    for name, raw in files.items():
        if name.endswith(".safetensors"):
            (n,) = struct.unpack("<Q", raw[:8])
            total += len(raw) - 8 - n
    return total


def tcalc(*argv: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    return subprocess.run([sys.executable, "-m", "transformer_calc", *argv], capture_output=True, text=True,
                          timeout=timeout, env=base | env)


def ok_json(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def one_error_line(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in out.stderr, out.stderr
    return lines[0]


def test_online_reads_headers_only(tmp_path):
    files = repo_files(n=3)
    with fake_hub({REPO: {"main": files}}) as hub:
        out = tcalc("params", REPO, "-f", "json", env={"HF_ENDPOINT": hub, "HF_HOME": str(tmp_path)})
        data = ok_json(out)
        ck = data["checkpoint"]
        assert ck["available"] and ck["source"] == f"{REPO}@main" and ck["files"] == 3
        assert ck["stored_bytes"] == data_bytes(files)
        assert ck["params"] == data["params"]["total"] and ck["unaccounted_params"] == 0
        assert data["model"]["name"] == REPO
        shard_requests = [r for r in hub.requests if r.path.endswith(".safetensors")]
        assert shard_requests, hub.requests
        for r in shard_requests:  # never the weights: every shard read is a range read of the first bytes
            assert r.method == "GET" and r.range is not None and r.range.startswith("bytes=0-"), r
    cached = list((tmp_path / "hub").rglob("*.safetensors"))
    assert cached == []  # nothing but config.json and the index was written, into the HF cache


def test_offline_warm_cache(tmp_path):
    """HF_HUB_OFFLINE=1 with a warm cache: the repo id resolves, the stored bytes come from the
    cached shards' headers, and the count equals the config file's."""
    files = repo_files(fp8_tensors(), n=2, config=LLAMA | {"quantization_config": {"quant_method": "fp8"}})
    warm_cache(tmp_path, REPO, files)
    env = {"HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    data = ok_json(tcalc("params", REPO, "-f", "json", env=env))
    (tmp_path / "config.json").write_bytes(files["config.json"])
    plain = ok_json(tcalc("params", "--hf-config", str(tmp_path / "config.json"), "-f", "json", env=env))
    assert data["params"] == plain["params"]
    assert data["checkpoint"]["stored_bytes"] == data_bytes(files)
    assert data["checkpoint"]["quantization"] == "fp8"
    inf = ok_json(tcalc("inference", REPO, "--S", "128", "--gpu", "h100", "-f", "json", env=env))
    assert inf["memory"]["per_gpu"]["weights_bytes"] == data_bytes(files)
    assert inf["inference"]["compute_dtype"] == "fp8"


def test_offline_revision_and_config_only_cache(tmp_path):
    files = repo_files(n=1)
    warm_cache(tmp_path, REPO, {"config.json": files["config.json"]}, revision="v1")
    env = {"HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    data = ok_json(tcalc("params", f"{REPO}@v1", "-f", "json", env=env))
    assert data["checkpoint"]["available"] is False and "offline" in data["checkpoint"]["note"]
    data2 = ok_json(tcalc("params", REPO, "--revision", "v1", "-f", "json", env=env))
    assert data2 == data
    line = one_error_line(tcalc("params", REPO, "-f", "json", env=env))  # main is not cached
    assert "HF_HUB_OFFLINE" in line


def test_gated_missing_and_bad_revision(tmp_path):
    files = repo_files(n=1)
    repos = {REPO: {"main": files}, "acme/gated": {"main": files}}
    with fake_hub(repos, gated=["acme/gated"], token="hf_good") as hub:
        env = {"HF_ENDPOINT": hub, "HF_HOME": str(tmp_path)}
        assert "HF_TOKEN" in one_error_line(tcalc("params", "acme/gated", env=env))
        granted = ok_json(tcalc("params", "acme/gated", "-f", "json", env=env | {"HF_TOKEN": "hf_good"}))
        assert granted["checkpoint"]["available"]
        assert "not found" in one_error_line(tcalc("params", "acme/nope", env=env))
        assert "revision" in one_error_line(tcalc("params", f"{REPO}@nope", env=env))
        assert "two revisions" in one_error_line(tcalc("params", f"{REPO}@v1", "--revision", "v2", env=env))


def test_repo_without_weights_and_without_config(tmp_path):
    with fake_hub({REPO: {"main": {"config.json": json.dumps(LLAMA).encode()}},
                   "acme/empty": {"main": {"README.md": b"hi"}}}) as hub:
        env = {"HF_ENDPOINT": hub, "HF_HOME": str(tmp_path)}
        data = ok_json(tcalc("params", REPO, "-f", "json", env=env))
        assert data["checkpoint"]["available"] is False and "no safetensors" in data["checkpoint"]["note"]
        assert "config.json" in one_error_line(tcalc("params", "acme/empty", env=env))


def test_hostile_remote_header(tmp_path):
    import struct

    bad = {"config.json": json.dumps(LLAMA).encode(), "model.safetensors": struct.pack("<Q", 2**63) + b"{}" * 8}
    with fake_hub({REPO: {"main": bad}}) as hub:
        line = one_error_line(tcalc("params", REPO, env={"HF_ENDPOINT": hub, "HF_HOME": str(tmp_path)}))
        assert "header length" in line


def test_no_network_and_time_out(tmp_path):
    """No server at the endpoint, or one that never answers: one line, within the time-outs."""
    env = {"HF_HOME": str(tmp_path), "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_ETAG_TIMEOUT": "1",
           "HF_HUB_DOWNLOAD_TIMEOUT": "1"}
    start = time.monotonic()
    line = one_error_line(tcalc("params", REPO, env=env))
    assert "Hub" in line and time.monotonic() - start < 30
    with fake_hub({REPO: {"main": repo_files(n=1)}}, slow=[REPO], delay_s=60) as hub:
        start = time.monotonic()
        line = one_error_line(tcalc("params", REPO, env=env | {"HF_ENDPOINT": hub}, timeout=90))
        elapsed = time.monotonic() - start
    assert elapsed < 45, elapsed
    assert "Hub" in line


def test_local_path_wins_over_repo_id(tmp_path):
    """`org/name` that exists on disk is the folder, as from_pretrained does."""
    from test_checkpoint import write_folder

    write_folder(tmp_path / "acme" / "tiny-llama", bf16_tensors())
    out = subprocess.run([sys.executable, "-m", "transformer_calc", "params", REPO, "-f", "json"], capture_output=True,
                         text=True, timeout=60, cwd=tmp_path, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    data = ok_json(out)
    assert data["checkpoint"]["format"] == "safetensors" and data["checkpoint"]["source"] == REPO


def test_start_up_does_not_import_the_hub():
    code = ("import sys; from transformer_calc.cli import run; run(['params', 'gpt2', '-f', 'json']); "
            "print('huggingface_hub' in sys.modules, 'gguf' in sys.modules, file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stderr.strip().splitlines()[-1] == "False False"
