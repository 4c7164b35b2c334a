"""A hostile Hugging Face mirror on loopback (HF_ENDPOINT), for tests: each file of one repo is
served by a behaviour that a real mirror or a man in the middle could show.

    with hostile_mirror({"config.json": Serve(body, etag="../../../x")}) as mirror:
        ...  # HF_ENDPOINT=mirror.url; mirror.sent[filename] counts the body bytes written

Behaviours (`Serve`): a plain answer with chosen ETag / X-Repo-Commit; `drip_s` (one byte per
`drip_s` seconds); `status` (an error status with `headers`, e.g. 429 and Retry-After);
`ignore_range` with `pad` (Range ignored: 200 and the whole file, padded with `pad` bytes of
zeros the server writes until the client hangs up). Threads only, nothing leaves 127.0.0.1."""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Serve:
    body: bytes = b""
    etag: str | None = None  # default: the body's sha1
    commit: str | None = "0123456789abcdef0123456789abcdef01234567"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    drip_s: float = 0.0
    ignore_range: bool = False
    pad: int = 0


class Mirror:
    def __init__(self, files: dict[str, Serve]) -> None:
        self.files = files
        self.sent: dict[str, int] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        self.stop = threading.Event()
        self.url = ""


def _handler(mirror: Mirror) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_HEAD(self) -> None:
            self._answer(head=True)

        def do_GET(self) -> None:
            self._answer(head=False)

        def _answer(self, *, head: bool) -> None:
            filename = self.path.split("?")[0].rsplit("/", 1)[-1]
            mirror.requests.append((self.command, filename, self.headers.get("range")))
            serve = mirror.files.get(filename)
            if serve is None:
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if serve.status != 200:
                self.send_response(serve.status)
                for k, v in serve.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = serve.body
            status, extra = 200, {}
            rng = self.headers.get("range")
            if rng and not serve.ignore_range and rng.startswith("bytes="):
                a, b = rng[6:].split("-")
                a, b = int(a), min(int(b), len(body) - 1)
                status, extra = 206, {"Content-Range": f"bytes {a}-{b}/{len(body)}"}
                body = body[a: b + 1]
            self.send_response(status)
            etag = serve.etag if serve.etag is not None else hashlib.sha1(serve.body).hexdigest()
            self.send_header("ETag", f'"{etag}"')
            if serve.commit is not None:
                self.send_header("X-Repo-Commit", serve.commit)
            for k, v in {**extra, **serve.headers}.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body) + (serve.pad if status == 200 else 0)))
            self.end_headers()
            if head:
                return
            try:
                if serve.drip_s:
                    for i in range(len(body)):
                        if mirror.stop.wait(serve.drip_s):
                            return
                        self.wfile.write(body[i: i + 1])
                        self.wfile.flush()
                        mirror.sent[filename] = mirror.sent.get(filename, 0) + 1
                    return
                self.wfile.write(body)
                mirror.sent[filename] = mirror.sent.get(filename, 0) + len(body)
                left, chunk = (serve.pad if status == 200 else 0), bytes(1 << 16)
                while left > 0 and not mirror.stop.is_set():
                    n = min(left, len(chunk))
                    self.wfile.write(chunk[:n])
                    mirror.sent[filename] += n
                    left -= n
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

    return Handler


@contextlib.contextmanager
def hostile_mirror(files: dict[str, Serve]) -> Iterator[Mirror]:
    mirror = Mirror(files)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(mirror))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    mirror.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield mirror
    finally:
        mirror.stop.set()
        server.shutdown()
        server.server_close()
        time.sleep(0)
