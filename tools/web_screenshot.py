"""The README's screenshot of `tcalc web`'s memory page (docs/img/web-memory.png): a `tcalc web
--port 0` process, Debian's headless Chromium driven by Playwright (the flags of
tests/test_web_browser.py), one page, one PNG.

    python tools/web_screenshot.py [URL-PATH] [OUT.png]
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = "/memory?model=llama-3-8b&S=4096&flash=true&dp=8&zero=3&gpu=h100"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main() -> None:
    from playwright.sync_api import sync_playwright

    path = sys.argv[1] if len(sys.argv) > 1 else PAGE
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else REPO / "docs" / "img" / "web-memory.png"
    server = subprocess.Popen([sys.executable, "-m", "transformer_calc", "web", "--port", "0"], cwd=REPO,
                              stderr=subprocess.PIPE, text=True)
    try:
        found = re.search(r"http://127\.0\.0\.1:\d+", server.stderr.readline() if server.stderr else "")
        if not found:
            raise SystemExit("tcalc web did not print its URL")
        with sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
            context = pw.chromium.launch_persistent_context(profile, executable_path="/usr/bin/chromium", headless=True,
                                                            args=FLAGS, viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.goto(found.group(0) + path)
            page.screenshot(path=str(out))
            context.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
    print(f"wrote {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")


if __name__ == "__main__":
    main()
