"""The screenshots of `tcalc web` in docs/img: a `tcalc web --port 0` process, Debian's headless
Chromium driven by Playwright (the flags of tests/test_web_browser.py), each page at 1280 and at
390 pixels wide (a laptop and a phone), the first screen of each (1280 x 800, 390 x 844).

    python tools/web_screenshot.py                 # every page in PAGES, both widths
    python tools/web_screenshot.py URL-PATH OUT.png [WIDTH]   # one page

docs/img/web-memory.png, the README's picture, is the memory page at 1280.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMG = REPO / "docs" / "img"
PAGES = {  # name: the page's URL path and query
    "memory": "/memory?model=llama-3-8b&S=4096&flash=true&dp=8&zero=3&gpu=h100",
    "inference": "/inference?model=llama-3.1-8b&S=8192&gpu=rtx-4090&weight_dtype=q4_k_m",
    "serve": "/serve?model=llama-3.1-70b&gpu=h100&gpus=8&prompt_len=2000&output_len=500&ttft=1&tpot=0.05",
    "train": "/train?model=llama-3.1-8b&gpus=8&gpu=h100&S=4096&global_batch=64&zero=2&tokens=1e12",
}
SCREENS = {1280: 800, 390: 844}  # width: height of the first screen
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def shots() -> list[tuple[str, Path, int]]:
    if len(sys.argv) > 2:
        return [(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1280)]
    out = [(path, IMG / f"web-{name}-{width}.png", width) for name, path in PAGES.items() for width in SCREENS]
    return [(PAGES["memory"], IMG / "web-memory.png", 1280), *out]


def main() -> None:
    from playwright.sync_api import sync_playwright

    server = subprocess.Popen([sys.executable, "-m", "transformer_calc", "web", "--port", "0"], cwd=REPO,
                              stderr=subprocess.PIPE, text=True)
    try:
        found = re.search(r"http://127\.0\.0\.1:\d+", server.stderr.readline() if server.stderr else "")
        if not found:
            raise SystemExit("tcalc web did not print its URL")
        with sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
            context = pw.chromium.launch_persistent_context(profile, executable_path="/usr/bin/chromium", headless=True,
                                                            args=FLAGS, viewport={"width": 1280, "height": 800})
            page = context.new_page()
            for path, out, width in shots():
                page.set_viewport_size({"width": width, "height": SCREENS.get(width, 800)})
                page.goto(found.group(0) + path)
                page.screenshot(path=str(out))
                print(f"wrote {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")
            context.close()
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
