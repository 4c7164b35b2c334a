"""A Hugging Face Hub repo as a model source: its config.json and its safetensors headers.

Through `huggingface_hub` (the field's own client, imported only here and only when a repo id is
given), so its settings hold as they do for transformers: HF_TOKEN (or the saved token) for gated
and private repos, HF_HOME / HF_HUB_CACHE for the cache, HF_HUB_OFFLINE=1 for the cache alone,
HF_ENDPOINT for a mirror, HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT for the time-outs.

What is fetched: config.json and model.safetensors.index.json (small files, downloaded into the
Hugging Face cache by `hf_hub_download`, as transformers would), and of each safetensors shard
its header only: an HTTP range read of the first bytes (`bytes=0-...`, as
`HfApi.parse_safetensors_file_metadata` does), never the weights. A shard already in the cache is
read there. Offline, a shard that is not in the cache leaves the stored bytes unknown (said in
the result), never a guess. Nothing is written outside the cache huggingface_hub manages.
"""

from __future__ import annotations

import re
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
FIRST_READ = 100_000  # bytes of a shard read first (most headers fit; HfApi reads the same)
MAX_WORKERS = 8  # shard headers read at once
INSTALL = "pip install 'transformer-calc[hub]'"


def parse_repo_id(text: str) -> tuple[str, str | None] | None:
    """(repo_id, revision or None) when `text` is `org/name[@revision]`, else None."""
    match = REPO_ID.match(text)
    if match is None or ".." in text or text.endswith((".json", ".yaml", ".yml", ".gguf", ".safetensors")):
        return None
    return match.group("repo"), match.group("rev")


def _hub() -> Any:
    try:
        import huggingface_hub  # noqa: PLC0415 (only when a repo id is given)
        import huggingface_hub.constants  # noqa: PLC0415
        import huggingface_hub.errors  # noqa: PLC0415
        import huggingface_hub.utils  # noqa: PLC0415
    except ImportError:
        raise TcalcError(f"reading a Hugging Face repo id needs huggingface_hub: {INSTALL}") from None
    huggingface_hub.utils.logging.set_verbosity_error()  # no "Retrying in 1s" lines on tcalc's stderr
    huggingface_hub.utils.disable_progress_bars()
    return huggingface_hub


def _offline(hf: Any) -> bool:
    return bool(hf.constants.HF_HUB_OFFLINE)


def _error(exc: BaseException, repo: str, revision: str | None, what: str) -> TcalcError:
    """One line for anything huggingface_hub or the network raised."""
    hf = _hub()
    errors = hf.errors
    rev = revision or "main"
    if isinstance(exc, TcalcError):
        return exc
    if isinstance(exc, errors.GatedRepoError):
        return TcalcError(f"{repo} is a gated repo: accept its licence on its Hub page, then set HF_TOKEN (or `hf auth login`)")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return TcalcError(f"Hub repo {clip(repo)} not found, or private: check the name, or set HF_TOKEN for a private repo")
    if isinstance(exc, errors.RevisionNotFoundError):
        return TcalcError(f"revision {clip(rev)} not found in {repo}; give a branch, tag or commit that exists (--revision)")
    if isinstance(exc, errors.OfflineModeIsEnabled) or isinstance(exc, errors.LocalEntryNotFoundError) and _offline(hf):
        return TcalcError(
            f"{repo}@{rev}: {what} is not in the Hugging Face cache and HF_HUB_OFFLINE is set; run once online or unset HF_HUB_OFFLINE"
        )
    if isinstance(exc, errors.LocalEntryNotFoundError):  # the client could not connect, nothing cached
        cause = exc.__cause__ or exc.__context__
        if cause is not None and cause is not exc:
            return _error(cause, repo, revision, what)
        return TcalcError(
            f"cannot reach the Hub at {hf.constants.ENDPOINT} for {repo}; check the network, or set HF_HUB_OFFLINE=1 to use the cache"
        )
    if isinstance(exc, errors.EntryNotFoundError):
        return TcalcError(f"{repo}@{rev} has no {what}; is it a transformers model repo?")
    if isinstance(exc, errors.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            return TcalcError(f"{repo}: access refused ({status}); set HF_TOKEN to a token that can read it")
        return TcalcError(f"{repo}: the Hub answered {status} for {what}; try again later")
    name = type(exc).__name__
    if "Timeout" in name or isinstance(exc, TimeoutError):
        return TcalcError(
            f"the Hub at {hf.constants.ENDPOINT} did not answer in time for {repo} ({what}); try again, raise "
            "HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT, or set HF_HUB_OFFLINE=1 to use the cache"
        )
    if isinstance(exc, (OSError, ConnectionError)) or "Connect" in name or "Network" in name or "Transport" in name:
        return TcalcError(
            f"cannot reach the Hub at {hf.constants.ENDPOINT} for {repo} ({clip(str(exc), 60)}); check the network, "
            "or set HF_HUB_OFFLINE=1 to use the cache"
        )
    return TcalcError(f"reading {what} of {repo} from the Hub failed: {name}: {clip(str(exc), 60)}")


def download(repo: str, filename: str, revision: str | None) -> Path:
    """A small file of the repo (config.json, the index) through the Hugging Face cache.

    Online, one HEAD request without retries comes first (`get_hf_file_metadata`, bounded by
    HF_HUB_ETAG_TIMEOUT): hf_hub_download retries a failed HEAD up to five times with a 60 s
    time-out each (huggingface_hub 2.x `_ETAG_RETRY_TIMEOUT`), minutes of waiting on a Hub that
    does not answer; tcalc says so at once instead. A file already cached is used as it is when
    the Hub cannot be reached, as hf_hub_download does."""
    hf = _hub()
    try:
        if not _offline(hf):
            try:
                hf.get_hf_file_metadata(hf.hf_hub_url(repo, filename, revision=revision))
            except Exception as exc:  # noqa: BLE001
                if _is_http_error(hf, exc) or (cached := _cached(repo, filename, revision)) is None:
                    raise
                return cached
        return Path(hf.hf_hub_download(repo, filename, revision=revision))
    except Exception as exc:  # noqa: BLE001 (every client error becomes one line)
        raise _error(exc, repo, revision, filename) from None


def _is_http_error(hf: Any, exc: BaseException) -> bool:
    """An answer from the Hub (404, 401, gated, ...), as opposed to no answer."""
    return isinstance(exc, hf.errors.HfHubHTTPError)


def _cached(repo: str, filename: str, revision: str | None) -> Path | None:
    hf = _hub()
    try:
        found = hf.try_to_load_from_cache(repo, filename, revision=revision)
    except Exception:  # noqa: BLE001 (a bad cache entry is a cache miss)
        return None
    return Path(found) if isinstance(found, str) else None


def _remote_header(repo: str, filename: str, revision: str | None) -> dict[str, tuple[str, tuple[int, ...], int, int]]:
    """One shard's header by HTTP range reads (first FIRST_READ bytes, then the rest if needed)."""
    hf = _hub()
    where = f"{repo}/{filename}"
    url = hf.hf_hub_url(repo, filename, revision=revision, endpoint=hf.constants.ENDPOINT)
    headers = hf.utils.build_hf_headers()
    timeout = hf.constants.HF_HUB_DOWNLOAD_TIMEOUT
    session = hf.get_session()
    try:
        response = session.get(url, headers={**headers, "range": f"bytes=0-{LENGTH_BYTES + FIRST_READ - 1}"},
                               timeout=timeout)
        hf.utils.hf_raise_for_status(response)
        first = response.content[: LENGTH_BYTES + FIRST_READ]
        file_size = _content_range_total(response.headers.get("content-range"))
        if response.status_code == 200 and file_size is None:  # the server ignored the range
            raise TcalcError(f"{where}: the Hub sent the whole file for a header read; refusing to read the weights")
        n = header_length(first, where, file_size)
        if LENGTH_BYTES + n <= len(first):
            raw = first[LENGTH_BYTES: LENGTH_BYTES + n]
        else:
            response = session.get(url, headers={**headers, "range": f"bytes={LENGTH_BYTES}-{LENGTH_BYTES + n - 1}"},
                                   timeout=timeout)
            hf.utils.hf_raise_for_status(response)
            raw = response.content[:n]
            if len(raw) < n:
                raise TcalcError(f"{where}: the Hub sent {len(raw):,} of the header's {n:,} bytes")
    except TcalcError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise _error(exc, repo, revision, filename) from None
    data_size = file_size - LENGTH_BYTES - n if file_size is not None else None
    return parse_header(raw, where, data_size)


def _content_range_total(value: str | None) -> int | None:
    match = re.fullmatch(r"bytes \d+-\d+/(\d+)", (value or "").strip())
    return int(match.group(1)) if match else None


def repo_checkpoint(repo: str, revision: str | None, config: dict[str, Any], n_layers: int | None) -> tuple[Checkpoint | None, str | None]:
    """(the repo's safetensors checkpoint from its headers, None) or (None, why it is unknown)."""
    hf = _hub()
    offline = _offline(hf)
    rev = revision or "main"
    try:
        index_path = download(repo, INDEX_FILE, revision)
    except TcalcError as exc:
        if "has no" not in str(exc) and "not in the Hugging Face cache" not in str(exc):
            raise
        index_path = None
    if index_path is not None:
        from transformer_calc.sources.files import parse_json, read_user_file  # noqa: PLC0415

        index = parse_json(read_user_file(index_path, "safetensors index"), f"{repo}/{INDEX_FILE}")
        files = shard_names(index, f"{repo}/{INDEX_FILE}")
    else:
        files = [SINGLE_FILE]
    cached = {f: _cached(repo, f, revision) for f in files}
    missing = [f for f, path in cached.items() if path is None]
    if offline and missing:
        if index_path is None and cached[SINGLE_FILE] is None:
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
                for f, header in zip(missing, pool.map(lambda name: _remote_header(repo, name, revision), missing)):
                    headers[f] = header
        except TcalcError as exc:
            if index_path is None and "has no" in str(exc):
                return None, f"{repo}@{rev} has no safetensors weights (no {INDEX_FILE} or {SINGLE_FILE})"
            raise
    method, bits = quant_info(config)
    ckpt = Checkpoint(
        format="safetensors", source=f"{repo}@{rev}", files=len(files),
        tensors=tensors([headers[f] for f in files], bits=bits, n_layers=n_layers), file_bytes=None, quantization=method,
    )
    return ckpt, None
