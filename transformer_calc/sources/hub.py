"""A Hugging Face Hub repo as a model source: its config.json and its safetensors headers.

huggingface_hub (the field's own client, imported only here and only when a repo id is given)
gives the settings, as it does for transformers: HF_TOKEN (or the saved token) for gated and
private repos, HF_HOME / HF_HUB_CACHE for the cache, HF_HUB_OFFLINE=1 for the cache alone,
HF_ENDPOINT for a mirror, HF_HUB_DOWNLOAD_TIMEOUT for one read. The bytes are fetched by tcalc's
own bounded reader (`_get`), because the Hub, or a mirror, is hostile input too:

- one total deadline per network operation (reading one repo: config.json, the index, every
  shard's header), TCALC_HUB_TIMEOUT or `--hub-timeout` seconds (default DEFAULT_TIMEOUT_S); it
  covers a body dripped a byte at a time, and a rate limit (429) is an error at once, never a
  sleep;
- every body is read up to a limit and the connection closed there: a shard's header read stops
  at the header whatever the server sends (a server that ignores `Range` is not read further);
- what is written (config.json and the index, into the cache as huggingface_hub lays it out:
  blobs/<etag>, snapshots/<commit>/<file>, refs/<revision>) is written only under names checked
  to be one safe path component each (the revision, the ETag, the commit) and only to paths
  inside HF_HUB_CACHE; an answer whose ETag or commit is not such a name is used, not cached.

Of each safetensors shard only its header is read (`bytes=0-...`, as
`HfApi.parse_safetensors_file_metadata` does), never the weights. A shard already in the cache is
read there. Offline, a shard that is not in the cache leaves the stored bytes unknown (said in
the result), never a guess.
"""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path
from typing import Any

from transformer_calc.model.checkpoint import Checkpoint
from transformer_calc.errors import TcalcError, clip
from transformer_calc.sources.safetensors import (
    INDEX_FILE,
    LENGTH_BYTES,
    SINGLE_FILE,
    header_length,
    parse_header,
    quant_info,
    read_local_header,
    shard_names,
    tensors,
)

REPO_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})(?:@(?P<rev>[A-Za-z0-9_./-]{1,200}))?$")
REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}(?:/[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}){0,4}")  # refs/pr/1, v1.0
SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")  # one path component: an ETag, a commit
COMMIT = re.compile(r"[0-9a-f]{40}")
FIRST_READ = 100_000  # bytes of a shard read first (most headers fit; HfApi reads the same)
MAX_WORKERS = 8  # shard headers read at once
SMALL_FILE_BYTES = 1 << 20  # config.json and the index: as files.MAX_FILE_BYTES
DEFAULT_TIMEOUT_S = 30.0  # one repo read, all requests together
TIMEOUT_ENV = "TCALC_HUB_TIMEOUT"
INSTALL = "pip install 'transformer-calc[hub]'"


def parse_repo_id(text: str) -> tuple[str, str | None] | None:
    """(repo_id, revision or None) when `text` is `org/name[@revision]`, else None."""
    match = REPO_ID.fullmatch(text)
    if match is None or ".." in text or text.endswith((".json", ".yaml", ".yml", ".gguf", ".safetensors")):
        return None
    return match.group("repo"), match.group("rev")


def check_revision(revision: str, where: str = "--revision") -> str:
    """A revision that names a branch, tag, commit or `refs/pr/N` and nothing else: it becomes a
    path in the cache (refs/<revision>), so `..`, absolute paths and odd characters are refused."""
    if not isinstance(revision, str) or not REVISION.fullmatch(revision) or ".." in revision or any(
        part == "." or part.endswith((".lock", ".")) for part in revision.split("/")
    ):
        raise TcalcError(
            f"{where} {clip(revision, 60)} is not a branch, tag or commit name (letters, digits, '_', '-', '.', and '/' "
            "between parts, no '..'); give one such as main, v1.0 or a commit hash"
        )
    return revision


def timeout_s(given: float | None = None) -> float:
    """The total deadline of one repo read: `--hub-timeout`, else TCALC_HUB_TIMEOUT, else the default."""
    if given is not None:
        return given
    text = os.environ.get(TIMEOUT_ENV)
    if text is None or not text.strip():
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= 86_400):
        raise TcalcError(f"{TIMEOUT_ENV} ({clip(text, 40)}) must be a number of seconds above 0 (e.g. 30); fix or unset it")
    return value


class Deadline:
    """The end of one network operation (monotonic seconds)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self, repo: str, what: str) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise TcalcError(
                f"reading {repo} from the Hub took more than {self.seconds:g} s ({what}, a slow or stalled answer); try "
                f"again, raise --hub-timeout / {TIMEOUT_ENV}, or set HF_HUB_OFFLINE=1 to use the cache"
            )
        return left


def _check_environment() -> None:
    """The variables huggingface_hub reads at import, checked first: its own messages for a bad one
    are a bare `int()` error, or a network error for a cache that cannot be a folder."""
    for name in ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT"):
        text = os.environ.get(name)
        if text is not None and text.strip():
            try:
                ok = int(text) > 0
            except ValueError:
                ok = False
            if not ok:
                raise TcalcError(f"{name} ({clip(text, 40)}) must be a whole number of seconds above 0 (e.g. 10); fix or unset it")
    token = os.environ.get("HF_TOKEN")
    if token is not None:
        _check_token(token.strip(), "HF_TOKEN")  # huggingface_hub strips the ends as well
    endpoint = os.environ.get("HF_ENDPOINT")
    if endpoint is not None and endpoint.strip() and not re.match(r"https?://[^\s/]+", endpoint.strip()):
        raise TcalcError(f"HF_ENDPOINT ({clip(endpoint, 60)}) must be an http:// or https:// URL; fix or unset it")
    for name in ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        text = os.environ.get(name)
        if text and (path := Path(os.path.expanduser(os.path.expandvars(text)))).exists() and not path.is_dir():
            raise TcalcError(f"{name} ({clip(text, 60)}) is not a folder; point it at a folder for the Hugging Face cache, or unset it")


def _check_token(token: str, where: str) -> None:
    bad = next((i for i, ch in enumerate(token) if not (32 < ord(ch) < 127)), None)
    if bad is not None:
        raise TcalcError(
            f"{where} holds a character that is not printable ASCII (at position {bad + 1}); a Hub token is ASCII "
            "(hf_...): copy it again from https://huggingface.co/settings/tokens"
        )


def _hub() -> Any:
    _check_environment()
    try:
        import huggingface_hub  # noqa: PLC0415 (only when a repo id is given)
        import huggingface_hub.constants  # noqa: PLC0415
        import huggingface_hub.errors  # noqa: PLC0415
        import huggingface_hub.utils  # noqa: PLC0415
    except ImportError:
        raise TcalcError(f"reading a Hugging Face repo id needs huggingface_hub: {INSTALL}") from None
    except ValueError as exc:  # a setting huggingface_hub refuses at import
        raise TcalcError(f"huggingface_hub refused a setting: {clip(str(exc), 80)}; check the HF_* variables") from None
    huggingface_hub.utils.logging.set_verbosity_error()  # no "Retrying in 1s" lines on tcalc's stderr
    huggingface_hub.utils.disable_progress_bars()
    return huggingface_hub


def _offline(hf: Any) -> bool:
    return bool(hf.constants.HF_HUB_OFFLINE)


def _endpoint(hf: Any) -> str:
    return clip(str(hf.constants.ENDPOINT), 60).strip("'")


def _error(exc: BaseException, repo: str, revision: str | None, what: str) -> TcalcError:
    """One line for anything the network or the client raised."""
    hf = _hub()
    if isinstance(exc, TcalcError):
        return exc
    if isinstance(exc, hf.errors.OfflineModeIsEnabled):
        return TcalcError(
            f"{repo}@{revision or 'main'}: {what} is not in the Hugging Face cache and HF_HUB_OFFLINE is set; run once "
            "online or unset HF_HUB_OFFLINE"
        )
    name = type(exc).__name__
    if "Timeout" in name or isinstance(exc, TimeoutError):
        return TcalcError(
            f"the Hub at {_endpoint(hf)} did not answer in time for {repo} ({what}); try again, raise "
            f"--hub-timeout / HF_HUB_DOWNLOAD_TIMEOUT, or set HF_HUB_OFFLINE=1 to use the cache"
        )
    if isinstance(exc, UnicodeError):
        return TcalcError("the Hugging Face token or a header holds non-ASCII characters; set HF_TOKEN again (hf_...)")
    if isinstance(exc, (OSError, ConnectionError)) or any(k in name for k in ("Connect", "Network", "Transport", "Protocol")):
        return TcalcError(
            f"cannot reach the Hub at {_endpoint(hf)} for {repo} ({clip(str(exc), 60)}); check the network, "
            "or set HF_HUB_OFFLINE=1 to use the cache"
        )
    return TcalcError(f"reading {what} of {repo} from the Hub failed: {name}: {clip(str(exc), 60)}")


def _status_error(status: int, headers: Any, repo: str, revision: str | None, what: str) -> TcalcError:
    """One line for an HTTP error answer (the Hub's X-Error-Code, as huggingface_hub reads it)."""
    code = headers.get("x-error-code")
    rev = revision or "main"
    if code == "GatedRepo":
        return TcalcError(f"{repo} is a gated repo: accept its licence on its Hub page, then set HF_TOKEN (or `hf auth login`)")
    if code == "RepoNotFound" or (status == 401 and code is None):
        return TcalcError(f"Hub repo {clip(repo)} not found, or private: check the name, or set HF_TOKEN for a private repo")
    if code == "RevisionNotFound":
        return TcalcError(f"revision {clip(rev)} not found in {repo}; give a branch, tag or commit that exists (--revision)")
    if code == "EntryNotFound" or status == 404:
        return TcalcError(f"{repo}@{rev} has no {what}; is it a transformers model repo?")
    if status in (401, 403):
        return TcalcError(f"{repo}: access refused ({status}); set HF_TOKEN to a token that can read it")
    if status == 429:
        wait = headers.get("retry-after") or headers.get("ratelimit-reset") or headers.get("x-ratelimit-reset")
        asks = f", it asks to wait {clip(wait, 20)} s" if wait else ""
        return TcalcError(f"the Hub limits the rate of requests (429{asks}) for {repo} ({what}); try again later")
    return TcalcError(f"{repo}: the Hub answered {status} for {what}; try again later")


def _request_headers(hf: Any) -> dict[str, str]:
    headers = dict(hf.utils.build_hf_headers())
    auth = headers.get("authorization") or headers.get("Authorization")
    if auth is not None:
        _check_token(auth.removeprefix("Bearer "), "the Hugging Face token (HF_TOKEN or the saved one)")
    return headers | {"accept-encoding": "identity"}


def _get(
    url: str, deadline: Deadline, repo: str, revision: str | None, what: str, *, limit: int, first: int = 0, last: int | None = None
) -> tuple[int, Any, bytes]:
    """(status, headers, body) of a GET of `url`: at most `limit` body bytes are read, then the
    connection is closed, whatever the server sends; the whole exchange within the deadline. With
    `last`, a range read of bytes first..last (the server may ignore it: status 200, the body from 0)."""
    hf = _hub()
    import httpx2 as httpx  # noqa: PLC0415 (huggingface_hub's HTTP client)

    headers = _request_headers(hf)
    if last is not None:
        headers["range"] = f"bytes={first}-{last}"
    per_read = float(hf.constants.HF_HUB_DOWNLOAD_TIMEOUT)
    left = deadline.left(repo, what)
    timeout = httpx.Timeout(min(per_read, left))
    try:
        with hf.get_session().stream("GET", url, headers=headers, timeout=timeout) as response:
            if response.status_code >= 400:
                raise _status_error(response.status_code, response.headers, repo, revision, what)
            encoding = response.headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                raise TcalcError(f"{repo}: the Hub sent {what} {clip(encoding, 20)}-encoded after tcalc asked for it plain; "
                                 "check HF_ENDPOINT")
            body = bytearray()
            for chunk in response.iter_raw():  # as the bytes arrive (a chunk_size would wait to fill it)
                body += chunk[: limit - len(body)]
                if len(body) >= limit:
                    break
                deadline.left(repo, what)
            return response.status_code, response.headers, bytes(body)
    except TcalcError:
        raise
    except Exception as exc:  # noqa: BLE001 (every client error becomes one line)
        if time.monotonic() >= deadline.end:
            deadline.left(repo, what)
        raise _error(exc, repo, revision, what) from None


def _url(hf: Any, repo: str, filename: str, revision: str | None) -> str:
    return hf.hf_hub_url(repo, filename, revision=revision, endpoint=hf.constants.ENDPOINT)


def download(repo: str, filename: str, revision: str | None, deadline: Deadline | None = None) -> bytes:
    """A small file of the repo (config.json, the index): fetched by the bounded reader and kept
    in the Hugging Face cache (`_store`), or, offline or when the Hub cannot be reached, read from
    that cache."""
    hf = _hub()
    deadline = deadline or Deadline(timeout_s())
    if _offline(hf):
        return _read_cached(hf, repo, filename, revision)
    try:
        status, headers, body = _get(_url(hf, repo, filename, revision), deadline, repo, revision, filename,
                                     limit=SMALL_FILE_BYTES + 1)
    except TcalcError as exc:
        reached = any(k in str(exc) for k in ("cannot reach", "did not answer"))
        cached = _cached(repo, filename, revision) if reached else None
        if cached is None:
            raise
        return _read_file(cached, f"{repo}/{filename}")
    if len(body) > SMALL_FILE_BYTES:
        raise TcalcError(f"{repo}/{filename}: the Hub sent over {SMALL_FILE_BYTES:,} bytes; a {filename} that large is refused")
    _store(hf, repo, filename, revision, body, headers)
    return body


def _read_cached(hf: Any, repo: str, filename: str, revision: str | None) -> bytes:
    cached = _cached(repo, filename, revision)
    if cached is None:
        raise TcalcError(
            f"{repo}@{revision or 'main'}: {filename} is not in the Hugging Face cache and HF_HUB_OFFLINE is set; run once "
            "online or unset HF_HUB_OFFLINE"
        )
    return _read_file(cached, f"{repo}/{filename}")


def _read_file(path: Path, where: str) -> bytes:
    from transformer_calc.sources.files import read_user_file  # noqa: PLC0415

    return read_user_file(path, where).encode()


def _inside(path: Path, root: Path) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(root) + os.sep)


def _store(hf: Any, repo: str, filename: str, revision: str | None, body: bytes, headers: Any) -> None:
    """Keep a small file in the Hugging Face cache as hf_hub_download lays it out, when every name
    that becomes a path is safe (the ETag, the commit, the revision) and every path stays inside
    HF_HUB_CACHE; else it is not cached (the answer is the same)."""
    etag = (headers.get("x-linked-etag") or headers.get("etag") or "").strip().removeprefix("W/").strip('"')
    commit = (headers.get("x-repo-commit") or "").strip()
    if not SAFE_NAME.fullmatch(etag) or not COMMIT.fullmatch(commit) or "/" in filename or filename in (".", ".."):
        return
    cache = Path(hf.constants.HF_HUB_CACHE)
    storage = cache / ("models--" + repo.replace("/", "--"))
    blob = storage / "blobs" / etag
    pointer = storage / "snapshots" / commit / filename
    ref_name = revision or "main"
    ref = None if ref_name == commit else storage / "refs" / ref_name
    paths = [p for p in (blob, pointer, ref) if p is not None]
    try:
        cache.mkdir(parents=True, exist_ok=True)
        if not all(_inside(p, cache) for p in paths):
            return
        for p in paths:
            p.parent.mkdir(parents=True, exist_ok=True)
        if not all(_inside(p.parent, cache) for p in paths):  # a symlink planted in the cache
            return
        _write_atomic(blob, body)
        if pointer.is_symlink() or pointer.exists():
            pointer.unlink()
        try:
            os.symlink(os.path.relpath(blob, pointer.parent), pointer)
        except OSError:
            _write_atomic(pointer, body)
        if ref is not None:
            _write_atomic(ref, commit.encode())
    except OSError as exc:
        home = os.environ.get("HF_HUB_CACHE") and "HF_HUB_CACHE" or "HF_HOME"
        raise TcalcError(
            f"cannot write the Hugging Face cache at {clip(str(cache), 60)} ({exc.strerror or exc}); set {home} to a "
            "writable folder"
        ) from None


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tcalc-tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _cached(repo: str, filename: str, revision: str | None) -> Path | None:
    hf = _hub()
    try:
        found = hf.try_to_load_from_cache(repo, filename, revision=revision)
    except Exception:  # noqa: BLE001 (a bad cache entry is a cache miss)
        return None
    if not isinstance(found, str) or not _inside(Path(found), Path(hf.constants.HF_HUB_CACHE)):
        return None
    return Path(found)


def _remote_header(repo: str, filename: str, revision: str | None, deadline: Deadline) -> dict[str, tuple[str, tuple[int, ...], int, int]]:
    """One shard's header by bounded range reads (first FIRST_READ bytes, then the rest if needed):
    never more than the header's bytes are read, whatever the server sends."""
    hf = _hub()
    where = f"{repo}/{filename}"
    url = _url(hf, repo, filename, revision)
    limit = LENGTH_BYTES + FIRST_READ
    status, headers, first = _get(url, deadline, repo, revision, filename, limit=limit, last=limit - 1)
    file_size = _content_range_total(headers.get("content-range")) if status == 206 else _length(headers)
    n = header_length(first, where, file_size)
    if LENGTH_BYTES + n <= len(first):
        raw = first[LENGTH_BYTES: LENGTH_BYTES + n]
    else:
        end = LENGTH_BYTES + n
        status, headers, body = _get(url, deadline, repo, revision, filename, limit=end, first=LENGTH_BYTES, last=end - 1)
        raw = body[:n] if status == 206 else body[LENGTH_BYTES:end]
        if len(raw) < n:
            raise TcalcError(f"{where}: the Hub sent {len(raw):,} of the header's {n:,} bytes")
    data_size = file_size - LENGTH_BYTES - n if file_size is not None else None
    return parse_header(raw, where, data_size)


def _length(headers: Any) -> int | None:
    text = (headers.get("content-length") or "").strip()
    return int(text) if text.isdigit() and len(text) < 20 else None


def _content_range_total(value: str | None) -> int | None:
    match = re.fullmatch(r"bytes \d+-\d+/(\d{1,19})", (value or "").strip())
    return int(match.group(1)) if match else None


def repo_checkpoint(
    repo: str, revision: str | None, config: dict[str, Any], n_layers: int | None, deadline: Deadline | None = None
) -> tuple[Checkpoint | None, str | None]:
    """(the repo's safetensors checkpoint from its headers, None) or (None, why it is unknown)."""
    hf = _hub()
    deadline = deadline or Deadline(timeout_s())
    offline = _offline(hf)
    rev = revision or "main"
    try:
        index_raw: bytes | None = download(repo, INDEX_FILE, revision, deadline)
    except TcalcError as exc:
        if "has no" not in str(exc) and "not in the Hugging Face cache" not in str(exc):
            raise
        index_raw = None
    if index_raw is not None:
        from transformer_calc.sources.files import parse_json  # noqa: PLC0415

        where = f"{repo}/{INDEX_FILE}"
        try:
            text = index_raw.decode("utf-8")
        except UnicodeDecodeError:
            raise TcalcError(f"{where} is not UTF-8 text") from None
        files = shard_names(parse_json(text, where), where)
    else:
        files = [SINGLE_FILE]
    cached = {f: _cached(repo, f, revision) for f in files}
    missing = [f for f, path in cached.items() if path is None]
    if offline and missing:
        if index_raw is None and cached[SINGLE_FILE] is None:
            return None, f"offline: no safetensors index or {SINGLE_FILE} of {repo}@{rev} in the cache"
        return None, f"offline: {len(missing)} of {len(files)} shards of {repo}@{rev} are not in the cache, so their headers cannot be read"
    headers: dict[str, dict[str, tuple[str, tuple[int, ...], int, int]]] = {}
    for f, path in cached.items():
        if path is not None:
            headers[f] = read_local_header(path)[0]
    if missing:
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

        try:
            with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(missing))) as pool:
                for f, header in zip(missing, pool.map(lambda name: _remote_header(repo, name, revision, deadline), missing)):
                    headers[f] = header
        except TcalcError as exc:
            if index_raw is None and "has no" in str(exc):
                return None, f"{repo}@{rev} has no safetensors weights (no {INDEX_FILE} or {SINGLE_FILE})"
            raise
    method, bits = quant_info(config)
    ckpt = Checkpoint(
        format="safetensors", source=f"{repo}@{rev}", files=len(files),
        tensors=tensors([headers[f] for f in files], bits=bits, n_layers=n_layers), file_bytes=None, quantization=method,
    )
    return ckpt, None
