"""A loopback fake of the Hugging Face Hub, a cache warmer and a safetensors builder, for offline tests.

Nothing here imports huggingface_hub: the client reads HF_ENDPOINT, HF_HOME, HF_HUB_OFFLINE and the
time-outs once, at import, so tests drive it in a subprocess (or set the environment before importing
it) and only use this module to stand the fake up and to build the bytes it serves.

    with fake_hub({"org/name": {"main": {"config.json": b"{}"}}}) as endpoint:
        ...  # HF_ENDPOINT=endpoint; endpoint.requests records what the client asked for

What the fake answers, modelled on what huggingface_hub 2.4.0 asks for:

* ``HEAD|GET /{repo_id}/resolve/{revision}/{filename}`` (revision URL-quoted with ``safe=""``, so
  ``refs%2Fpr%2F1``; a branch/tag name of ``repos`` or one of the fake commit shas). Small text files
  are served like git files: 200 with ``ETag: "<git blob sha1>"``, ``X-Repo-Commit``,
  ``Content-Length``, ``Accept-Ranges: bytes``. LFS files (``LFS_SUFFIXES``, or any file of 10 MiB or
  more) answer like the real Hub: 302 with ``Location`` on a second loopback server (the "CDN", another
  port and so another origin, which the client's HEAD does not follow and to which it sends no
  authorization), ``X-Linked-Etag: "<sha256>"``, ``X-Linked-Size``, ``X-Repo-Commit``. Both servers honour
  a single ``Range: bytes=a-b`` / ``a-`` / ``-n`` with 206 and ``Content-Range`` (416 when out of range).
* ``GET /api/models/{repo_id}[/revision/{revision}]`` (model_info / repo_info / revision_exists) and
  ``GET /api/models/{repo_id}/tree/{revision}[/{path}]`` (list_repo_files / list_repo_tree).
* Errors as the Hub sends them (``X-Error-Code`` and ``X-Error-Message`` headers, JSON ``{"error": ...}``
  body), which ``hf_raise_for_status`` turns into typed errors: missing or private repo -> 401 (404 when
  the request carried a token) ``RepoNotFound`` -> RepositoryNotFoundError; gated repo -> 401 (403 with a
  token that is not ``token``) ``GatedRepo`` -> GatedRepoError; unknown revision -> 404
  ``RevisionNotFound`` -> RevisionNotFoundError; missing file -> 404 ``EntryNotFound`` (with
  ``X-Repo-Commit``) -> RemoteEntryNotFoundError (an EntryNotFoundError). Gated repos' info and tree
  stay public, as on the Hub; their files do not.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import select
import shutil
import socket
import struct
import threading
import time
import uuid
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

__all__ = [
    "DTYPE_BITS",
    "LFS_SUFFIXES",
    "FakeHub",
    "RecordedRequest",
    "commit_sha",
    "fake_hub",
    "file_etag",
    "is_lfs",
    "parse_safetensors_header",
    "safetensors_bytes",
    "safetensors_index",
    "warm_cache",
]

# Files the Hub's default .gitattributes stores in LFS (and so serves through the CDN redirect).
LFS_SUFFIXES = (
    ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx",
    ".npy", ".npz", ".pkl", ".pickle", ".model", ".tflite", ".ot", ".zip", ".gz", ".tar",
)  # fmt: skip
LFS_MIN_SIZE = 10 * 1024 * 1024

CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by huggingface_hub.\n"
    "# For information about cache directory tags, see:\n"
    "#\thttps://bford.info/cachedir/\n"
)


# --------------------------------------------------------------------------- identities


def commit_sha(repo_id: str, revision: str = "main") -> str:
    """The fixed fake 40-hex commit of `revision` of `repo_id` (what the fake sends as X-Repo-Commit)."""
    return hashlib.sha1(f"hubfake-commit:{repo_id}@{revision}".encode()).hexdigest()


def is_lfs(filename: str, data: bytes) -> bool:
    return filename.lower().endswith(LFS_SUFFIXES) or len(data) >= LFS_MIN_SIZE


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def file_etag(filename: str, data: bytes) -> str:
    """The Hub's etag of a file, which is also its blob name in the cache: sha256 for LFS, git sha1 otherwise."""
    return hashlib.sha256(data).hexdigest() if is_lfs(filename, data) else _git_blob_sha1(data)


# --------------------------------------------------------------------------- safetensors

# Bits per element, as the safetensors format defines them (sub-byte types must fill whole bytes).
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64,
}  # fmt: skip


def safetensors_bytes(
    tensors: Mapping[str, tuple[str, tuple[int, ...]]], metadata: Mapping[str, str] | None = None
) -> bytes:
    """A valid safetensors file: u64 LE header size, compact JSON header padded with spaces to a multiple
    of 8 bytes, then zero-filled tensor data laid out in the order given.

    `tensors` maps name -> (dtype, shape), e.g. {"w": ("BF16", (4096, 4096)), "w_scale": ("F32", ())}.
    """
    header: dict[str, object] = {}
    if metadata is not None:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("safetensors __metadata__ must map str -> str")
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, (dtype, shape) in tensors.items():
        if name == "__metadata__":
            raise ValueError("'__metadata__' is not a tensor name")
        if dtype not in DTYPE_BITS:
            raise ValueError(f"unknown safetensors dtype {dtype!r}; known: {sorted(DTYPE_BITS)}")
        shape = tuple(shape)
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ValueError(f"bad shape {shape!r} for {name!r}")
        bits = DTYPE_BITS[dtype]
        for d in shape:
            bits *= d
        if bits % 8:
            raise ValueError(f"{name!r}: {dtype}{list(shape)} is not a whole number of bytes")
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + bits // 8]}
        offset += bits // 8
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + bytes(offset)


def parse_safetensors_header(data: bytes) -> dict:
    """The JSON header of safetensors bytes (needs only the first 8 + header-size bytes)."""
    (n,) = struct.unpack("<Q", data[:8])
    if len(data) < 8 + n:
        raise ValueError(f"need {8 + n} bytes to parse the header, got {len(data)}")
    return json.loads(data[8 : 8 + n])


def safetensors_index(shards: Mapping[str, bytes], metadata: Mapping[str, object] | None = None) -> bytes:
    """model.safetensors.index.json for `shards` (filename -> safetensors bytes): weight_map and total_size
    (the sum of the shards' tensor data bytes, as transformers writes it)."""
    weight_map: dict[str, str] = {}
    total = 0
    for filename, data in shards.items():
        for name, info in parse_safetensors_header(data).items():
            if name != "__metadata__":
                weight_map[name] = filename
                total += info["data_offsets"][1] - info["data_offsets"][0]
    meta = {"total_size": total, **(metadata or {})}
    return json.dumps({"metadata": meta, "weight_map": dict(sorted(weight_map.items()))}, indent=2).encode()


# --------------------------------------------------------------------------- cache


def warm_cache(
    hf_home: Path | str,
    repo_id: str,
    files: Mapping[str, bytes],
    revision: str = "main",
    commit: str | None = None,
    *,
    repo_type: str = "model",
) -> Path:
    """Lay `files` out in the huggingface_hub cache under `hf_home`/hub (HF_HUB_CACHE = HF_HOME/hub) as
    hf_hub_download would have: blobs/<etag>, snapshots/<commit>/<filename> -> relative symlink to the
    blob (a copy where symlinks fail), refs/<revision> holding the commit. `commit` defaults to the
    fake hub's commit_sha(repo_id, revision), so a fake_hub serving the same files agrees with the
    cache. Returns the snapshot folder."""
    commit = commit or commit_sha(repo_id, revision)
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise ValueError(f"commit must be 40 lowercase hex digits, got {commit!r}")
    hub = Path(hf_home) / "hub"
    storage = hub / "--".join([f"{repo_type}s", *repo_id.split("/")])
    snapshot = storage / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    if revision != commit:
        ref = storage / "refs" / revision
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit)  # no trailing newline, as huggingface_hub writes it
    for filename, data in files.items():
        blob = storage / "blobs" / file_etag(filename, data)
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists():
            blob.write_bytes(data)
        pointer = snapshot.joinpath(*filename.split("/"))
        pointer.parent.mkdir(parents=True, exist_ok=True)
        if pointer.is_symlink() or pointer.exists():
            pointer.unlink()
        try:
            os.symlink(os.path.relpath(blob, pointer.parent), pointer)
        except OSError:
            shutil.copyfile(blob, pointer)
    tag = hub / "CACHEDIR.TAG"
    if not tag.exists():
        tag.write_text(CACHEDIR_TAG)
    return snapshot


# --------------------------------------------------------------------------- the fake hub


@dataclass
class RecordedRequest:
    """One request either server saw. `range` is the raw Range header; `sent` the body bytes written."""

    server: str  # "hub" or "cdn"
    method: str
    path: str
    range: str | None
    authorization: bool
    repo_id: str | None = None
    revision: str | None = None
    filename: str | None = None
    status: int | None = None  # None: not answered (the client hung up during a slow wait, or shutdown)
    sent: int = 0


class FakeHub(str):
    """The endpoint URL (a str, e.g. "http://127.0.0.1:PORT") with the fake's state attached."""

    url: str
    cdn_url: str
    requests: list[RecordedRequest]
    _state: _State

    def commit(self, repo_id: str, revision: str = "main") -> str:
        return commit_sha(repo_id, revision)

    def requests_for(
        self,
        filename: str | None = None,
        *,
        repo_id: str | None = None,
        method: str | None = None,
        server: str | None = None,
    ) -> list[RecordedRequest]:
        with self._state.lock:
            return [
                r
                for r in self.requests
                if (filename is None or r.filename == filename)
                and (repo_id is None or r.repo_id == repo_id)
                and (method is None or r.method == method)
                and (server is None or r.server == server)
            ]

    def clear(self) -> None:
        with self._state.lock:
            self.requests.clear()


@dataclass
class _Blob:
    repo_id: str
    filename: str
    data: bytes


@dataclass
class _State:
    repos: dict[str, dict[str, dict[str, bytes]]]
    gated: frozenset[str]
    private: frozenset[str]
    slow: frozenset[str]
    slow_methods: frozenset[str]
    delay_s: float
    token: str | None
    cdn: bool
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    log: list[RecordedRequest] = field(default_factory=list)
    blobs: dict[str, _Blob] = field(default_factory=dict)  # sha256 -> blob, for the CDN
    hub_url: str = ""
    cdn_url: str = ""


class _HttpError(Exception):
    def __init__(self, status: int, code: str | None, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


class _Hangup(Exception):
    """Close the connection without an answer."""


_RANGE = re.compile(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", re.IGNORECASE)
_MAX_REQUESTS_PER_CONNECTION = 1000


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """(start, end inclusive) for a satisfiable single range, None to send the whole file, "416" if not
    satisfiable. Multi-range and malformed headers are ignored (whole file), as many servers do."""
    if not header:
        return None
    m = _RANGE.fullmatch(header)
    if not m or (not m[1] and not m[2]):
        return None
    if not m[1]:  # suffix range: the last n bytes
        n = int(m[2])
        return (max(size - n, 0), size - 1) if n and size else "416"
    start = int(m[1])
    end = int(m[2]) if m[2] else size - 1
    if m[2] and end < start:
        return None
    if start >= size:
        return "416"
    return start, min(end, size - 1)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, role: str, state: _State):
        self.role, self.state = role, state
        self._conns: set[socket.socket] = set()
        self._conn_threads: set[threading.Thread] = set()
        self._track = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request, client_address):  # noqa: ANN001
        t = threading.Thread(
            target=self._run, args=(request, client_address), daemon=True, name=f"hubfake-{self.role}"
        )
        with self._track:
            self._conns.add(request)
            self._conn_threads.add(t)
        t.start()

    def _run(self, request, client_address):  # noqa: ANN001
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._track:
                self._conns.discard(request)
                self._conn_threads.discard(threading.current_thread())

    def handle_error(self, request, client_address):  # noqa: ANN001
        pass  # clients that time out and hang up are expected here; nothing to report

    def close_all(self, join_s: float = 2.0) -> None:
        with self._track:
            conns, threads = list(self._conns), list(self._conn_threads)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + join_s
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hubfake/1"
    timeout = 10  # idle keep-alive connections close after this
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def handle(self) -> None:
        self.close_connection = True
        self.handle_one_request()
        n = 1
        while not self.close_connection and n < _MAX_REQUESTS_PER_CONNECTION and not self.server.state.stop.is_set():
            self.handle_one_request()
            n += 1

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def _not_allowed(self) -> None:
        self._dispatch(head=False, allowed=False)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed

    # -- plumbing

    def _dispatch(self, *, head: bool, allowed: bool = True) -> None:
        state = self.server.state
        rec = RecordedRequest(
            server=self.server.role,
            method=self.command,
            path=self.path,
            range=self.headers.get("Range"),
            authorization=self.headers.get("Authorization") is not None,
        )
        with state.lock:
            state.log.append(rec)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(min(length, 1 << 20))
        self._rec, self._head = rec, head
        try:
            if not allowed:
                raise _HttpError(405, None, f"{self.command} is not supported by hubfake")
            if self.server.role == "cdn":
                self._serve_cdn()
            else:
                self._serve_hub()
        except _Hangup:
            self.close_connection = True
        except _HttpError as e:
            body = json.dumps({"error": e.message}).encode()
            headers = {"Content-Type": "application/json; charset=utf-8", **e.headers}
            if e.code:
                headers["X-Error-Code"] = e.code
            headers["X-Error-Message"] = e.message
            self._send(e.status, headers, body)

    def _send(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.send_response(status)
        trace = self.headers.get("X-Amzn-Trace-Id")
        self.send_header("X-Request-Id", trace or str(uuid.uuid4()))
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self._rec.status = status
        if not self._head and body:
            self.wfile.write(body)
            self._rec.sent = len(body)
        self.wfile.flush()

    def _send_content(self, data: bytes, headers: dict[str, str]) -> None:
        headers = {"Accept-Ranges": "bytes", **headers}
        rng = _byte_range(self.headers.get("Range"), len(data))
        if rng == "416":
            raise _HttpError(416, None, "Requested Range Not Satisfiable", {"Content-Range": f"bytes */{len(data)}"})
        if rng is None:
            self._send(200, headers, data)
        else:
            start, end = rng
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            self._send(206, headers, data[start : end + 1])

    def _maybe_sleep(self, repo_id: str) -> None:
        state = self.server.state
        if repo_id in state.slow and self.command in state.slow_methods:
            if state.stop.wait(state.delay_s) or self._client_gone():
                # Shut down mid-sleep, or the client timed out and hung up: close without answering.
                self.close_connection = True
                raise _Hangup

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _authorized(self) -> bool:
        token = self.server.state.token
        return token is not None and self.headers.get("Authorization") == f"Bearer {token}"

    def _check_repo(self, repo_id: str, *, files: bool) -> dict[str, dict[str, bytes]]:
        state = self.server.state
        authed = self.headers.get("Authorization") is not None
        if repo_id not in state.repos or (repo_id in state.private and not self._authorized()):
            raise _HttpError(404 if authed else 401, "RepoNotFound", "Repository not found")
        if files and repo_id in state.gated and not self._authorized():
            if authed:
                msg = (
                    f"Access to model {repo_id} is restricted and you are not in the authorized list. "
                    f"Visit https://huggingface.co/{repo_id} to ask for access."
                )
            else:
                msg = (
                    f"Access to model {repo_id} is restricted. You must have access to it and be "
                    "authenticated to access it. Please log in."
                )
            raise _HttpError(403 if authed else 401, "GatedRepo", msg)
        return state.repos[repo_id]

    @staticmethod
    def _resolve_revision(repo_id: str, revisions: Mapping[str, dict[str, bytes]], revision: str) -> tuple[str, str]:
        """(revision name in `repos`, commit sha) for a branch/tag name or a commit sha."""
        if revision in revisions:
            return revision, commit_sha(repo_id, revision)
        for name in revisions:
            if commit_sha(repo_id, name) == revision:
                return name, revision
        raise _HttpError(404, "RevisionNotFound", f"Invalid rev id: {revision}")

    # -- the hub

    def _serve_hub(self) -> None:
        split = urlsplit(self.path)
        segs = split.path.lstrip("/").split("/")
        if segs[:2] == ["api", "models"] and len(segs) >= 3:
            return self._serve_api(segs[2:], parse_qs(split.query))
        if "resolve" in segs[1:] and self.command in ("GET", "HEAD"):
            i = segs.index("resolve", 1)
            return self._serve_resolve(unquote("/".join(segs[:i])), segs[i + 1 :])
        raise _HttpError(404, None, "Sorry, we can't find the page you are looking for.")

    def _serve_resolve(self, repo_id: str, rest: list[str]) -> None:
        state, rec = self.server.state, self._rec
        rec.repo_id = repo_id
        self._maybe_sleep(repo_id)
        revisions = self._check_repo(repo_id, files=True)
        if not rest:
            raise _HttpError(404, "RevisionNotFound", "Invalid rev id: ")
        rec.revision = unquote(rest[0])
        name, commit = self._resolve_revision(repo_id, revisions, rec.revision)
        filename = rec.filename = unquote("/".join(rest[1:]))
        files = revisions[name]
        if filename not in files:
            raise _HttpError(404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": commit})
        data = files[filename]
        if state.cdn and is_lfs(filename, data):
            sha256 = hashlib.sha256(data).hexdigest()
            location = f"{state.cdn_url}/repos/{sha256[:2]}/{sha256}?download=true&x-hubfake-repo={quote(repo_id, safe='')}"
            body = f"Found. Redirecting to {location}".encode()
            pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n"
            return self._send(
                302,
                {
                    "Location": location,
                    "Content-Type": "text/plain; charset=utf-8",
                    "ETag": f'"{_git_blob_sha1(pointer.encode())}"',
                    "X-Linked-Etag": f'"{sha256}"',
                    "X-Linked-Size": str(len(data)),
                    "X-Repo-Commit": commit,
                },
                body,
            )
        ctype = "application/json; charset=utf-8" if filename.endswith(".json") else "application/octet-stream"
        self._send_content(
            data, {"Content-Type": ctype, "ETag": f'"{file_etag(filename, data)}"', "X-Repo-Commit": commit}
        )

    def _serve_api(self, segs: list[str], query: dict[str, list[str]]) -> None:
        if self.command != "GET":
            raise _HttpError(405, None, f"{self.command} is not supported by hubfake")
        kind, at = "info", len(segs)
        for i, s in enumerate(segs[:3]):
            if i and s in ("revision", "tree"):
                kind, at = s, i
                break
        repo_id = unquote("/".join(segs[:at]))
        self._rec.repo_id = repo_id
        self._maybe_sleep(repo_id)
        revisions = self._check_repo(repo_id, files=False)
        revision = unquote(segs[at + 1]) if kind != "info" and len(segs) > at + 1 else "main"
        self._rec.revision = revision
        name, commit = self._resolve_revision(repo_id, revisions, revision)
        files = revisions[name]
        state = self.server.state
        if kind == "tree":
            prefix = unquote("/".join(segs[at + 2 :])).strip("/")
            recursive = (query.get("recursive") or ["false"])[0].lower() == "true"
            body = json.dumps(self._tree(files, prefix, recursive)).encode()
        else:
            siblings = []
            for fn, data in files.items():
                s: dict[str, object] = {"rfilename": fn, "size": len(data), "blobId": _git_blob_sha1(data)}
                if is_lfs(fn, data):
                    s["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
                siblings.append(s)
            body = json.dumps(
                {
                    "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
                    "id": repo_id,
                    "modelId": repo_id,
                    "author": repo_id.split("/")[0] if "/" in repo_id else None,
                    "sha": commit,
                    "private": repo_id in state.private,
                    "gated": "manual" if repo_id in state.gated else False,
                    "disabled": False,
                    "tags": [],
                    "siblings": siblings,
                }
            ).encode()
        self._send(200, {"Content-Type": "application/json; charset=utf-8", "X-Repo-Commit": commit}, body)

    @staticmethod
    def _tree(files: Mapping[str, bytes], prefix: str, recursive: bool) -> list[dict[str, object]]:
        base = f"{prefix}/" if prefix else ""
        out: list[dict[str, object]] = []
        dirs: set[str] = set()
        for fn in sorted(files):
            if not fn.startswith(base):
                continue
            rel = fn[len(base) :].split("/")
            for depth in range(1, len(rel)):  # the folders on the way
                if recursive or depth == 1:
                    d = base + "/".join(rel[:depth])
                    if d not in dirs:
                        dirs.add(d)
                        out.append({"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "path": d})
            if recursive or len(rel) == 1:
                data = files[fn]
                entry: dict[str, object] = {"type": "file", "oid": _git_blob_sha1(data), "size": len(data), "path": fn}
                if is_lfs(fn, data):
                    entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                out.append(entry)
        return out

    # -- the CDN

    def _serve_cdn(self) -> None:
        if self.command not in ("GET", "HEAD"):
            raise _HttpError(405, None, f"{self.command} is not supported by hubfake")
        sha256 = urlsplit(self.path).path.rstrip("/").rsplit("/", 1)[-1]
        blob = self.server.state.blobs.get(sha256)
        if blob is None:
            raise _HttpError(404, None, "NoSuchKey")
        self._rec.repo_id, self._rec.filename = blob.repo_id, blob.filename
        self._send_content(blob.data, {"Content-Type": "application/octet-stream", "ETag": f'"{sha256}"'})


@contextlib.contextmanager
def fake_hub(
    repos: Mapping[str, Mapping[str, Mapping[str, bytes]]],
    *,
    gated: Collection[str] = (),
    private: Collection[str] = (),
    slow: Collection[str] = (),
    delay_s: float = 30.0,
    slow_methods: Collection[str] = ("GET", "HEAD"),
    token: str | None = None,
    cdn: bool = True,
    max_lifetime_s: float = 300.0,
) -> Iterator[FakeHub]:
    """Serve `repos` ({"org/name": {revision: {filename: bytes}}}) on 127.0.0.1 and yield the endpoint.

    gated / private: repo ids whose files (gated) or everything (private) need `Authorization: Bearer
    <token>`. slow: repo ids whose requests (of `slow_methods`) wait `delay_s` before any answer; the wait
    ends, unanswered, when the fake shuts down. cdn=False serves LFS files directly instead of through
    the 302 to the second server. The servers shut themselves down after `max_lifetime_s` in any case.
    """
    state = _State(
        repos={r: {rev: dict(files) for rev, files in revs.items()} for r, revs in repos.items()},
        gated=frozenset(gated),
        private=frozenset(private),
        slow=frozenset(slow),
        slow_methods=frozenset(m.upper() for m in slow_methods),
        delay_s=float(delay_s),
        token=token,
        cdn=cdn,
    )
    for name in (*state.gated, *state.private):
        if name not in state.repos:
            raise ValueError(f"gated/private repo {name!r} is not in repos")
    for repo_id, revs in state.repos.items():
        for files in revs.values():
            for fn, data in files.items():
                if not isinstance(data, (bytes, bytearray)):
                    raise TypeError(f"{repo_id}/{fn}: file contents must be bytes")
                state.blobs.setdefault(hashlib.sha256(data).hexdigest(), _Blob(repo_id, fn, bytes(data)))

    servers = [_Server("hub", state)]
    if cdn:
        servers.append(_Server("cdn", state))
    state.hub_url = f"http://127.0.0.1:{servers[0].server_address[1]}"
    state.cdn_url = f"http://127.0.0.1:{servers[-1].server_address[1]}" if cdn else state.hub_url
    loops = [
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name=f"hubfake-{s.role}-loop")
        for s in servers
    ]
    for t in loops:
        t.start()

    stopped = threading.Lock()

    def stop() -> None:
        if not stopped.acquire(blocking=False):
            return
        state.stop.set()  # wakes every sleeping slow request
        for s in servers:
            s.shutdown()
        for s in servers:
            s.close_all()
            s.server_close()
        for t in loops:
            t.join(2.0)

    watchdog = threading.Timer(max_lifetime_s, stop)
    watchdog.daemon = True
    watchdog.start()

    endpoint = FakeHub(state.hub_url)
    endpoint.url, endpoint.cdn_url, endpoint.requests, endpoint._state = state.hub_url, state.cdn_url, state.log, state
    try:
        yield endpoint
    finally:
        watchdog.cancel()
        stop()
