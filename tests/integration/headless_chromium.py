"""Headless Chromium driven through the DevTools protocol on a pipe (--remote-debugging-pipe:
JSON messages ending in NUL, commands on the browser's fd 3, replies and events on its fd 4),
so the tests need nothing but the browser: no driver package, no network port."""
from __future__ import annotations

import base64
import json
import os
import pathlib
import select
import shutil
import subprocess
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--remote-debugging-pipe"]


def executable() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    """One browser with one page. Use as a context manager."""

    def __init__(self, profile: pathlib.Path, width: int = 1280, height: int = 900,
                 timeout: float = 600):
        exe = executable()
        if not exe:
            raise FileNotFoundError("chromium not found (Debian: apt-get install chromium)")
        self.timeout, self.width, self.height = timeout, width, height
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds():  # the protocol's fixed descriptors in the browser
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}"], pass_fds=(3, 4),
                                     preexec_fn=fds, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer, self._events, self._id, self.session = b"", [], 0, None

    # --- the protocol -----------------------------------------------------------------

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("no answer from chromium")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise ConnectionError(f"chromium exited (rc {self.proc.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict | None = None, session: bool = True) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def wait_for(self, event: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, e in enumerate(self._events):
                if e.get("method") == event:
                    return self._events.pop(i)
            self._events.append(self._read(deadline))

    # --- what the tests do --------------------------------------------------------------

    def __enter__(self):
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        self.session = self.send("Target.attachToTarget", {"targetId": target["targetId"],
                                                           "flatten": True}, session=False)["sessionId"]
        self.send("Page.enable")
        self.send("Network.enable")
        self.send("Network.setCacheDisabled", {"cacheDisabled": True})  # a reload re-reads files
        self.send("Emulation.setDeviceMetricsOverride", {
            "width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        return self

    def __exit__(self, *exc):
        try:
            self.send("Browser.close", session=False)
        except (ConnectionError, TimeoutError, RuntimeError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)

    def open(self, url: str) -> None:
        """Load a page and wait for its load event (every image loaded or failed)."""
        self._events = [e for e in self._events if e.get("method") != "Page.loadEventFired"]
        self.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: pathlib.Path) -> tuple[int, int]:
        """The whole page as a PNG; returns its size in CSS pixels."""
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        width, height = int(size["width"]), int(size["height"])
        self.send("Emulation.setDeviceMetricsOverride", {
            "width": max(width, self.width), "height": height, "deviceScaleFactor": 1,
            "mobile": False})
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path.write_bytes(base64.b64decode(data["data"]))
        self.send("Emulation.setDeviceMetricsOverride", {
            "width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        return width, height
