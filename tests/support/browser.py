"""A headless Chromium driven over the DevTools protocol, for the page tests. No package:
Chromium's ``--remote-debugging-pipe`` speaks JSON messages ended by a NUL byte on file
descriptors 3 (to Chromium) and 4 (from it).

``chromium_path()`` finds Debian's ``chromium`` (``apt-get install -y chromium``), or
returns None; ``Browser(path)`` starts one with a fresh profile and the flags this
sandbox needs; ``open(url)`` loads a page in a new tab and returns a :class:`Tab` with
``eval``, ``click``, ``type_text``, ``key`` and ``screenshot``.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
         "--remote-debugging-pipe"]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, path: str, width: int = 1400, height: int = 900):
        self.profile = tempfile.mkdtemp(prefix="pcg-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire():  # in the child: the pipes on fds 3 and 4
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            [path, *FLAGS, f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            pass_fds=(3, 4), preexec_fn=wire, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._next = 0
        self._events: list = []
        self.size = (width, height)

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60.0) -> dict:
        self._next += 1
        msg = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if ready:
                chunk = os.read(self._from_chrome, 1 << 20)
                if not chunk:
                    raise EOFError("Chromium closed the DevTools pipe")
                self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def open(self, url: str, timeout: float = 60.0) -> "Tab":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        tab = Tab(self, session, target)
        w, h = self.size
        tab.send("Emulation.setDeviceMetricsOverride",
                 {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": False})
        tab.send("Page.enable")
        tab.send("Page.navigate", {"url": url})
        tab.wait_for("document.body && document.body.getAttribute('data-ready') === '1'", timeout)
        return tab

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - it may be gone already
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)


class Tab:
    def __init__(self, browser: Browser, session: str, target: str):
        self.browser = browser
        self.session = session
        self.target = target

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})

    def send(self, method: str, params: dict | None = None, timeout: float = 60.0) -> dict:
        return self.browser.send(method, params, self.session, timeout)

    def eval(self, expression: str, timeout: float = 60.0):
        out = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True}, timeout)
        if "exceptionDetails" in out:
            raise RuntimeError(f"page raised: {out['exceptionDetails']}")
        return out["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.eval(f"!!({expression})"):
                    return
            except RuntimeError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"the page never satisfied {expression!r}")

    def click(self, x: float, y: float) -> None:
        """A real mouse click at page coordinates (press and release)."""
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y,
                                                   "button": "left", "clickCount": 1})

    def click_on(self, selector: str) -> None:
        """A real click on the middle of the first element ``selector`` finds."""
        x, y = self.eval(f"(function(){{var r=document.querySelector({selector!r})"
                         ".getBoundingClientRect(); return [r.left + r.width / 2, "
                         "r.top + r.height / 2];})()")
        self.click(x, y)

    def type_text(self, text: str) -> None:
        self.send("Input.insertText", {"text": text})

    def key(self, key: str, code: str, keycode: int) -> None:
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": code,
                                                 "windowsVirtualKeyCode": keycode})

    def screenshot(self, path=None, scale: float = 1.0) -> bytes:
        """A PNG of the window (``scale`` < 1: smaller), written to ``path`` if given."""
        w, h = self.browser.size
        params = {"format": "png"}
        if scale != 1.0:
            params["clip"] = {"x": 0, "y": 0, "width": w, "height": h, "scale": scale}
        data = base64.b64decode(self.send("Page.captureScreenshot", params)["data"])
        if path is not None:
            with open(path, "wb") as f:
                f.write(data)
        return data
