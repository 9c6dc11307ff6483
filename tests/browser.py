"""What the browser tests share: headless Chromium through Playwright, a static server, screenshots.

The browser is Debian's ``chromium`` (``.ci/run`` installs it with ``fonts-noto-cjk``); Playwright's own
browser download is not used. Where no Chromium is found the browser tests are skipped with the command
that installs it. Every check saves a screenshot under ``tests/screenshots/`` (git ignores it), so that a
failure can be seen.
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
INSTALL = "sudo apt-get install chromium fonts-noto-cjk   (Debian/Ubuntu; .ci/run does it)"
# As root in a container Chromium needs --no-sandbox; the rest keep a closed network quiet (no update checks,
# no sync, no QUIC probes), so that what fails to load is the page's own doing.
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


@functools.cache
def chromium() -> str | None:
    """The Chromium to drive: ``$BOG_CHROMIUM``, else ``chromium`` or ``chromium-browser`` on the PATH."""
    for name in (os.environ.get("BOG_CHROMIUM"), "chromium", "chromium-browser"):
        if name and (found := shutil.which(name)):
            return found
    return None


def needs_browser():
    """A skip mark naming the fix, where there is no Chromium or no Playwright."""
    try:
        import playwright  # noqa: F401
        have_playwright = True
    except ImportError:
        have_playwright = False
    return pytest.mark.skipif(chromium() is None or not have_playwright,
                              reason=f"no Chromium or Playwright here: {INSTALL}; pip install playwright")


@contextlib.contextmanager
def browser():
    """A headless Chromium (Playwright's ``Browser``), closed afterwards."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium(), args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


class Problems:
    """What went wrong on a page while it loaded: console errors, uncaught exceptions, failed requests."""

    def __init__(self, page):
        self.seen: list[str] = []
        page.on("console", lambda m: self.seen.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.seen.append(f"uncaught: {e}"))
        # net::ERR_ABORTED: a request the browser dropped because the test moved on to the next page (a favicon,
        # say); a file that is missing answers 404, which the response handler below reports
        page.on("requestfailed", lambda r: None if "ERR_ABORTED" in (r.failure or "") else
                self.seen.append(f"failed to load {r.url}: {r.failure}"))
        page.on("response", lambda r: self.seen.append(f"HTTP {r.status} for {r.url}") if r.status >= 400 else None)

    def take(self) -> list[str]:
        seen, self.seen = self.seen, []
        return seen


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):   # a line per request would bury the test's own output
        pass


@contextlib.contextmanager
def serve(folder: Path):
    """Serve ``folder`` over HTTP on a free loopback port; yields the base address."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def screenshot(page, name: str, **kw) -> Path:
    """Save what ``page`` shows as ``tests/screenshots/<name>.png``; return the path."""
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), **kw)
    return path
