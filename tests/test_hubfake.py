"""hubfake is faithful: the real huggingface_hub client, run in a subprocess (it reads HF_ENDPOINT,
HF_HOME, HF_HUB_OFFLINE and its time-outs at import), downloads from the fake, range-reads shard
headers through it, raises its typed errors from it, times out on it, and resolves what warm_cache
lays out offline. Only loopback sockets; every server stops when its `with` block ends."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hubfake import (  # noqa: E402
    commit_sha,
    fake_hub,
    file_etag,
    parse_safetensors_header,
    safetensors_bytes,
    safetensors_index,
    warm_cache,
)

needs_hf = pytest.mark.skipif(importlib.util.find_spec("huggingface_hub") is None, reason="needs huggingface_hub")

CONFIG = json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2}).encode()
SHARD1 = safetensors_bytes(
    {"model.embed_tokens.weight": ("BF16", (256, 64)), "model.layers.0.mlp.up_proj.weight": ("BF16", (128, 64))},
    {"format": "pt"},
)
SHARD2 = safetensors_bytes(
    {"model.layers.1.mlp.up_proj.weight": ("F8_E4M3", (128, 64)), "model.layers.1.mlp.up_proj.weight_scale": ("F32", ())},
    {"format": "pt"},
)
SHARDS = {"model-00001-of-00002.safetensors": SHARD1, "model-00002-of-00002.safetensors": SHARD2}
INDEX = safetensors_index(SHARDS)
MODEL = {"config.json": CONFIG, "model.safetensors.index.json": INDEX, **SHARDS}
REPOS = {
    "org/model": {"main": MODEL, "v1": {"config.json": b'{"model_type": "gpt2"}'}, "refs/pr/1": {"config.json": b"{}"}},
    "org/gated": {"main": {"config.json": CONFIG}},
    "org/private": {"main": {"config.json": CONFIG}},
    "org/slow": {"main": MODEL},
}
TOKEN = "hf_fakeTokenForTests"

PRELUDE = """
import json, sys, time
out = {}
def timed(fn, *a, **kw):
    t = time.monotonic()
    try:
        r = fn(*a, **kw)
        return {"ok": r if isinstance(r, (str, int, float, bool, type(None), list, dict)) else repr(r),
                "s": time.monotonic() - t}
    except Exception as e:
        resp = getattr(e, "response", None)
        return {"error": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__],
                "status": getattr(resp, "status_code", None), "msg": str(e), "s": time.monotonic() - t}
"""


def client(code: str, *, endpoint: str, hf_home: Path, timeout: float = 30, **env: str) -> dict:
    """Run `code` (which fills the dict `out`) with a fresh huggingface_hub in a subprocess; return `out`."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith(("HF_", "HUGGINGFACE_")) or k.lower().endswith("_proxy"))
    }
    clean.update(
        HF_ENDPOINT=endpoint,
        HF_HOME=str(hf_home),
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        NO_PROXY="127.0.0.1,localhost",
        **env,
    )
    script = PRELUDE + textwrap.dedent(code) + "\nprint(json.dumps(out))\n"
    p = subprocess.run([sys.executable, "-c", script], env=clean, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- safetensors_bytes


def test_safetensors_bytes_is_valid_and_padded():
    data = safetensors_bytes(
        {
            "w": ("F8_E4M3", (3, 5)),  # 15 bytes: forces padding of what follows to stay valid
            "w_scale": ("F32", ()),
            "qweight": ("I32", (8, 16)),  # packed GPTQ int4
            "b": ("BF16", (7,)),
            "idx": ("I64", (2,)),
        },
        {"format": "pt", "quant_method": "gptq"},
    )
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0
    raw = data[8 : 8 + n]
    assert 0 <= n - len(raw.rstrip(b" ")) < 8  # JSON, then fewer than 8 spaces of padding
    header = parse_safetensors_header(data)
    assert header.pop("__metadata__") == {"format": "pt", "quant_method": "gptq"}
    assert header == {
        "w": {"dtype": "F8_E4M3", "shape": [3, 5], "data_offsets": [0, 15]},
        "w_scale": {"dtype": "F32", "shape": [], "data_offsets": [15, 19]},
        "qweight": {"dtype": "I32", "shape": [8, 16], "data_offsets": [19, 531]},
        "b": {"dtype": "BF16", "shape": [7], "data_offsets": [531, 545]},
        "idx": {"dtype": "I64", "shape": [2], "data_offsets": [545, 561]},
    }
    assert len(data) == 8 + n + 561 and data[8 + n :] == bytes(561)
    assert safetensors_bytes({}) == struct.pack("<Q", 8) + b"{}      "
    for bad in ({"x": ("F99", (1,))}, {"x": ("F4", (3,))}, {"x": ("F32", (-1,))}):
        with pytest.raises(ValueError):
            safetensors_bytes(bad)
    index = json.loads(INDEX)
    assert index["metadata"]["total_size"] == (256 * 64 + 128 * 64) * 2 + 128 * 64 + 4
    assert set(index["weight_map"].values()) == set(SHARDS)


# --------------------------------------------------------------------------- online, then offline


@needs_hf
def test_download_online_then_offline_from_the_cache_it_filled(tmp_path):
    with fake_hub(REPOS) as hub:
        commit, v1 = hub.commit("org/model"), hub.commit("org/model", "v1")
        online = client(
            """
            from huggingface_hub import hf_hub_download
            out["config"] = hf_hub_download("org/model", "config.json", revision="main")
            out["index"] = hf_hub_download("org/model", "model.safetensors.index.json")
            out["by_sha"] = hf_hub_download("org/model", "config.json", revision=%r)
            out["v1"] = hf_hub_download("org/model", "config.json", revision="v1")
            out["pr"] = hf_hub_download("org/model", "config.json", revision="refs/pr/1")
            out["main_by_sha"] = hf_hub_download("org/model", "config.json", revision=%r)
            """
            % (v1, commit),
            endpoint=hub,
            hf_home=tmp_path,
        )
        seen = [(r.method, r.path, r.status) for r in hub.requests]
    snap = tmp_path / "hub" / "models--org--model" / "snapshots"
    assert online["config"] == str(snap / commit / "config.json")
    assert Path(online["config"]).read_bytes() == CONFIG
    assert Path(online["index"]).read_bytes() == INDEX
    assert online["v1"] == str(snap / commit_sha("org/model", "v1") / "config.json")
    assert online["pr"] == str(snap / commit_sha("org/model", "refs/pr/1") / "config.json")
    assert online["by_sha"] == online["v1"]
    assert online["main_by_sha"] == online["config"]
    # What hf_hub_download asks: HEAD for metadata, then GET of the same URL (small git files are not redirected).
    assert seen[:4] == [
        ("HEAD", "/org/model/resolve/main/config.json", 200),
        ("GET", "/org/model/resolve/main/config.json", 200),
        ("HEAD", "/org/model/resolve/main/model.safetensors.index.json", 200),
        ("GET", "/org/model/resolve/main/model.safetensors.index.json", 200),
    ]
    assert seen[4:] == [
        ("HEAD", f"/org/model/resolve/{v1}/config.json", 200),  # a commit sha resolves too
        ("GET", f"/org/model/resolve/{v1}/config.json", 200),
        ("HEAD", "/org/model/resolve/v1/config.json", 200),  # already cached at that commit: HEAD only
        ("HEAD", "/org/model/resolve/refs%2Fpr%2F1/config.json", 200),  # revision quoted with safe=""
        ("GET", "/org/model/resolve/refs%2Fpr%2F1/config.json", 200),
        # main_by_sha: a commit sha whose file is cached returns without any request
    ]
    assert (tmp_path / "hub" / "models--org--model" / "refs" / "main").read_text() == commit
    assert (tmp_path / "hub" / "models--org--model" / "blobs" / file_etag("config.json", CONFIG)).is_file()

    # The server is gone: offline mode serves the same files from the cache, without a request.
    offline = client(
        """
        from huggingface_hub import hf_hub_download, try_to_load_from_cache
        out["config"] = hf_hub_download("org/model", "config.json")
        out["v1"] = hf_hub_download("org/model", "config.json", revision="v1")
        out["cached"] = try_to_load_from_cache("org/model", "model.safetensors.index.json")
        out["missing"] = timed(hf_hub_download, "org/model", "never-fetched.json")
        """,
        endpoint=hub,
        hf_home=tmp_path,
        HF_HUB_OFFLINE="1",
    )
    assert offline["config"] == online["config"]
    assert offline["v1"] == online["v1"]
    assert offline["cached"] == online["index"]
    assert offline["missing"]["error"] == "LocalEntryNotFoundError"


# --------------------------------------------------------------------------- range reads


@needs_hf
def test_range_reads_return_206_and_only_the_header_bytes(tmp_path):
    shard = "model-00001-of-00002.safetensors"
    with fake_hub(REPOS) as hub:
        out = client(
            f"""
            from huggingface_hub import HfApi, constants, get_session, hf_hub_url
            from huggingface_hub.utils import build_hf_headers, hf_raise_for_status
            url = hf_hub_url("org/model", {shard!r}, revision="main", endpoint=constants.ENDPOINT)
            r = get_session().get(url, headers={{**build_hf_headers(token=None), "range": "bytes=0-7"}}, timeout=5)
            hf_raise_for_status(r)
            n = int.from_bytes(r.content, "little")
            out["first"] = [r.status_code, r.content.hex(), r.headers.get("content-range"),
                            [h.status_code for h in r.history]]
            r = get_session().get(url, headers={{**build_hf_headers(token=None), "range": f"bytes=8-{{n + 7}}"}}, timeout=5)
            hf_raise_for_status(r)
            out["header"] = [r.status_code, r.content.decode(), r.headers.get("content-range")]
            cfg = get_session().get(hf_hub_url("org/model", "config.json", endpoint=constants.ENDPOINT),
                                    headers={{"range": "bytes=0-9"}}, timeout=5)
            out["git_file"] = [cfg.status_code, cfg.content.decode(), [h.status_code for h in cfg.history]]
            meta = HfApi().parse_safetensors_file_metadata("org/model", "model-00002-of-00002.safetensors")
            out["hf_parse"] = {{k: [v.dtype, v.shape] for k, v in meta.tensors.items()}}
            """,
            endpoint=hub,
            hf_home=tmp_path,
        )
        shard_reqs = hub.requests_for(shard) + hub.requests_for("model-00002-of-00002.safetensors")
    (n,) = struct.unpack("<Q", SHARD1[:8])
    assert out["first"] == [206, SHARD1[:8].hex(), f"bytes 0-7/{len(SHARD1)}", [302]]
    assert out["header"][0] == 206
    assert out["header"][1].encode() == SHARD1[8 : 8 + n]
    assert out["header"][2] == f"bytes 8-{n + 7}/{len(SHARD1)}"
    assert json.loads(out["header"][1]) == parse_safetensors_header(SHARD1)
    assert out["git_file"] == [206, CONFIG[:10].decode(), []]  # git files: 206 straight from the hub
    assert out["hf_parse"] == {
        "model.layers.1.mlp.up_proj.weight": ["F8_E4M3", [128, 64]],
        "model.layers.1.mlp.up_proj.weight_scale": ["F32", []],
    }
    # The log proves no shard was read whole: every request carried a Range, LFS files went hub 302 -> CDN 206.
    assert shard_reqs and all(r.range for r in shard_reqs)
    assert {(r.server, r.status) for r in shard_reqs} == {("hub", 302), ("cdn", 206)}
    assert all(r.sent <= 8 + n for r in hub.requests_for(shard, server="cdn"))
    assert sum(r.sent for r in shard_reqs if r.server == "cdn") < len(SHARD1) + len(SHARD2)


def test_range_semantics_in_process():
    files = {"f.bin": bytes(range(100)), "g.txt": b"0123456789"}
    with fake_hub({"a/b": {"main": files}}) as hub:

        def get(path, rng=None):
            req = urllib.request.Request(hub + path, headers={"Range": rng} if rng else {})
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    return r.status, r.headers.get("Content-Range"), r.read()
            except urllib.error.HTTPError as e:
                return e.code, e.headers.get("Content-Range"), e.read()

        assert get("/a/b/resolve/main/f.bin", "bytes=90-") == (206, "bytes 90-99/100", bytes(range(90, 100)))
        assert get("/a/b/resolve/main/f.bin", "bytes=-3") == (206, "bytes 97-99/100", bytes([97, 98, 99]))
        assert get("/a/b/resolve/main/f.bin", "bytes=95-1000") == (206, "bytes 95-99/100", bytes(range(95, 100)))
        assert get("/a/b/resolve/main/f.bin", "bytes=100-")[:2] == (416, "bytes */100")
        assert get("/a/b/resolve/main/g.txt", "bytes=2-4") == (206, "bytes 2-4/10", b"234")
        assert get("/a/b/resolve/main/g.txt") == (200, None, b"0123456789")


# --------------------------------------------------------------------------- errors


@needs_hf
def test_errors_become_huggingface_hub_exceptions(tmp_path):
    with fake_hub(REPOS, gated=["org/gated"], private=["org/private"], token=TOKEN) as hub:
        out = client(
            f"""
            from huggingface_hub import hf_hub_download, hf_hub_url, constants, get_session
            from huggingface_hub.errors import EntryNotFoundError, GatedRepoError, RepositoryNotFoundError
            from huggingface_hub.utils import build_hf_headers, hf_raise_for_status
            dl = lambda repo, fn="config.json", **kw: timed(hf_hub_download, repo, fn, **kw)
            out["gated"] = dl("org/gated")
            out["gated_wrong_token"] = dl("org/gated", token="hf_wrong")
            out["gated_token"] = dl("org/gated", token={TOKEN!r})
            out["private"] = dl("org/private")
            out["private_token"] = dl("org/private", token={TOKEN!r})
            out["missing_repo"] = dl("org/nope")
            out["missing_file"] = dl("org/model", "nope.json")
            out["bad_revision"] = dl("org/model", revision="v9")
            def ranged(repo, fn):
                r = get_session().get(hf_hub_url(repo, fn, endpoint=constants.ENDPOINT),
                                      headers={{**build_hf_headers(token=None), "range": "bytes=0-7"}}, timeout=5)
                hf_raise_for_status(r)
            out["ranged_gated"] = timed(ranged, "org/gated", "config.json")
            out["ranged_missing_file"] = timed(ranged, "org/model", "model-00009-of-00009.safetensors")
            try:
                hf_hub_download("org/model", "nope.json")
            except EntryNotFoundError:
                out["entry_is_entry_not_found"] = True
            """,
            endpoint=hub,
            hf_home=tmp_path,
        )
    assert (out["gated"]["error"], out["gated"]["status"]) == ("GatedRepoError", 401)
    assert "restricted" in out["gated"]["msg"]
    assert (out["gated_wrong_token"]["error"], out["gated_wrong_token"]["status"]) == ("GatedRepoError", 403)
    assert "RepositoryNotFoundError" in out["gated"]["mro"]  # catch GatedRepoError first
    assert out["gated_token"]["ok"].endswith("config.json")
    assert (out["private"]["error"], out["private"]["status"]) == ("RepositoryNotFoundError", 401)
    assert out["private_token"]["ok"].endswith("config.json")
    assert (out["missing_repo"]["error"], out["missing_repo"]["status"]) == ("RepositoryNotFoundError", 401)
    assert (out["missing_file"]["error"], out["missing_file"]["status"]) == ("RemoteEntryNotFoundError", 404)
    assert "EntryNotFoundError" in out["missing_file"]["mro"] and out["entry_is_entry_not_found"]
    assert (out["bad_revision"]["error"], out["bad_revision"]["status"]) == ("RevisionNotFoundError", 404)
    assert out["ranged_gated"]["error"] == "GatedRepoError"
    assert out["ranged_missing_file"]["error"] == "RemoteEntryNotFoundError"
    # A missing file's non-existence is cached against the commit the 404 carried (X-Repo-Commit).
    no_exist = tmp_path / "hub" / "models--org--model" / ".no_exist" / commit_sha("org/model") / "nope.json"
    assert no_exist.is_file()


@needs_hf
def test_api_endpoints(tmp_path):
    with fake_hub(REPOS, gated=["org/gated"]) as hub:
        out = client(
            """
            from huggingface_hub import HfApi
            api = HfApi()
            info = api.model_info("org/model")
            out["sha"], out["siblings"] = info.sha, sorted(s.rfilename for s in info.siblings)
            out["v1_sha"] = api.model_info("org/model", revision="v1").sha
            out["files"] = sorted(api.list_repo_files("org/model"))
            out["exists"] = [api.file_exists("org/model", "config.json"), api.file_exists("org/model", "x")]
            out["revs"] = [api.revision_exists("org/model", "v1"), api.revision_exists("org/model", "v9")]
            out["gated"] = api.model_info("org/gated").gated
            out["meta"] = api.get_safetensors_metadata("org/model").parameter_count
            """,
            endpoint=hub,
            hf_home=tmp_path,
        )
    assert out["sha"] == commit_sha("org/model") and out["v1_sha"] == commit_sha("org/model", "v1")
    assert out["siblings"] == out["files"] == sorted(MODEL)
    assert out["exists"] == [True, False] and out["revs"] == [True, False]
    assert out["gated"] == "manual"
    assert out["meta"] == {"BF16": 256 * 64 + 128 * 64, "F8_E4M3": 128 * 64, "F32": 1}


# --------------------------------------------------------------------------- time-outs


@needs_hf
def test_slow_repo_direct_calls_time_out_without_retry(tmp_path):
    warm_cache(tmp_path, "org/slow", {"config.json": CONFIG})
    with fake_hub(REPOS, slow=["org/slow"], delay_s=30) as hub:
        t0 = time.monotonic()
        out = client(
            """
            from huggingface_hub import constants, get_hf_file_metadata, get_session, hf_hub_download, hf_hub_url
            url = hf_hub_url("org/slow", "model-00001-of-00002.safetensors", endpoint=constants.ENDPOINT)
            out["range"] = timed(get_session().get, url, headers={"range": "bytes=0-7"},
                                 timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT)
            out["head"] = timed(get_hf_file_metadata, url)  # timeout defaults to HF_HUB_ETAG_TIMEOUT
            out["cached"] = timed(hf_hub_download, "org/slow", "config.json")  # HEAD times out -> cache
            """,
            endpoint=hub,
            hf_home=tmp_path,
            HF_HUB_ETAG_TIMEOUT="1",
            HF_HUB_DOWNLOAD_TIMEOUT="1",
        )
        slow_reqs = hub.requests_for(repo_id="org/slow")
    elapsed = time.monotonic() - t0
    assert out["range"]["error"] == "ReadTimeout" and 0.9 < out["range"]["s"] < 2.5
    assert out["head"]["error"] == "ReadTimeout" and 0.9 < out["head"]["s"] < 2.5
    assert out["cached"]["ok"].endswith("/config.json") and 0.9 < out["cached"]["s"] < 2.5
    assert [r.method for r in slow_reqs] == ["GET", "HEAD", "HEAD"]  # one attempt each, no retry
    assert all(r.status is None for r in slow_reqs)
    assert elapsed < 8, elapsed  # three 1 s time-outs plus interpreter start-up


@needs_hf
def test_hf_hub_download_retries_a_timed_out_head_with_a_60s_timeout(tmp_path):
    # Nothing cached: after the HEAD times out (HF_HUB_ETAG_TIMEOUT), hf_hub_download retries it with its
    # own 60 s timeout (and up to 5 back-off retries), so a HEAD that answers in 1.5 s still succeeds.
    with fake_hub(REPOS, slow=["org/slow"], slow_methods=["HEAD"], delay_s=1.5) as hub:
        out = client(
            """
            from huggingface_hub import hf_hub_download
            out["dl"] = timed(hf_hub_download, "org/slow", "config.json")
            """,
            endpoint=hub,
            hf_home=tmp_path,
            HF_HUB_ETAG_TIMEOUT="1",
            HF_HUB_DOWNLOAD_TIMEOUT="1",
        )
        reqs = [(r.method, r.status) for r in hub.requests]
    assert out["dl"]["ok"].endswith("/config.json")
    assert 2.4 < out["dl"]["s"] < 5  # 1 s timed-out HEAD + 1.5 s HEAD + GET
    assert reqs == [("HEAD", None), ("HEAD", 200), ("GET", 200)]


def test_shutdown_ends_a_sleeping_request():
    result = []
    with fake_hub({"a/b": {"main": {"c": b"x"}}}, slow=["a/b"], delay_s=60) as hub:

        def call():
            try:
                urllib.request.urlopen(hub + "/a/b/resolve/main/c", timeout=30)
                result.append("answered")
            except Exception as e:  # noqa: BLE001
                result.append(type(e).__name__)

        th = threading.Thread(target=call)
        th.start()
        time.sleep(0.3)
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 2.5
    th.join(5)
    assert result and result[0] != "answered"
    assert [r.status for r in hub.requests] == [None]
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(hub.rsplit(":", 1)[1])), timeout=1).close()


def test_max_lifetime_stops_the_server():
    with fake_hub({"a/b": {"main": {}}}, max_lifetime_s=0.2) as hub:
        time.sleep(0.6)
        with pytest.raises(OSError):
            urllib.request.urlopen(hub + "/api/models/a/b", timeout=1)


# --------------------------------------------------------------------------- warm_cache


@needs_hf
def test_warm_cache_resolves_offline_and_is_reused_online(tmp_path):
    files = {"config.json": CONFIG, "model.safetensors.index.json": INDEX, "sub/tokenizer.model": b"sp"}
    snap = warm_cache(tmp_path, "org/model", files)
    assert snap == tmp_path / "hub" / "models--org--model" / "snapshots" / commit_sha("org/model")
    warm_cache(tmp_path, "org/model", {"config.json": b'{"model_type": "gpt2"}'}, revision="v1", commit="a" * 40)
    out = client(
        """
        from huggingface_hub import hf_hub_download, try_to_load_from_cache, scan_cache_dir
        out["dl"] = [hf_hub_download("org/model", f) for f in ("config.json", "sub/tokenizer.model")]
        out["v1"] = hf_hub_download("org/model", "config.json", revision="v1")
        out["sha"] = hf_hub_download("org/model", "config.json", revision="a" * 40)
        out["try"] = try_to_load_from_cache("org/model", "model.safetensors.index.json")
        out["try_v1"] = try_to_load_from_cache("org/model", "config.json", revision="v1")
        out["try_none"] = try_to_load_from_cache("org/model", "nope.json")
        repo, = scan_cache_dir().repos
        out["scan"] = [repo.repo_id, repo.nb_files, sorted(repo.refs), repo.size_on_disk,
                       sorted(len(r.commit_hash) for r in repo.revisions)]
        """,
        endpoint="http://127.0.0.1:9",
        hf_home=tmp_path,
        HF_HUB_OFFLINE="1",
    )
    assert out["dl"] == [str(snap / "config.json"), str(snap / "sub" / "tokenizer.model")]
    assert out["v1"] == out["sha"] == out["try_v1"] == str(snap.parent / ("a" * 40) / "config.json")
    assert out["try"] == str(snap / "model.safetensors.index.json")
    assert out["try_none"] is None
    assert out["scan"] == ["org/model", 4, ["main", "v1"], len(CONFIG) + len(INDEX) + 2 + 22, [40, 40]]
    assert Path(out["dl"][0]).read_bytes() == CONFIG and os.path.islink(out["dl"][0])

    # Online, a new revision with the same content reuses the cached blobs: HEAD only, no GET.
    with fake_hub({"org/model": {"v2": files}}) as hub:
        online = client(
            """
            from huggingface_hub import hf_hub_download
            out["v2"] = [hf_hub_download("org/model", f, revision="v2") for f in ("config.json", "sub/tokenizer.model")]
            """,
            endpoint=hub,
            hf_home=tmp_path,
        )
        methods = [(r.method, r.status) for r in hub.requests]
    v2 = snap.parent / commit_sha("org/model", "v2")
    assert online["v2"] == [str(v2 / "config.json"), str(v2 / "sub" / "tokenizer.model")]
    assert methods == [("HEAD", 200), ("HEAD", 302)]  # tokenizer.model is an LFS file: HEAD stops at the 302
