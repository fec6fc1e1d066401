#!/usr/bin/env python3
"""Opens a `crl report` page in headless Chromium and says what a reader's browser saw, as JSON.

    check_page.py DIR/index.html --screenshot shot.png [--browser /usr/bin/chromium] [--expect DIR/summary.json]

Talks to Chromium over its DevTools protocol on a pipe (--remote-debugging-pipe: NUL-separated JSON
on file descriptors 3 and 4, no port, no extra library). Prints {"tables": [...], "plots": [{name,
ok}], "console_errors": [...], "requests": [...], "screenshot": path}: the tables and plots in the DOM
(a plot is ok when its image decoded), every console error, uncaught exception or log error
(a blocked load included), and every request that left the page's own file and data: URLs.
With --expect, exits 1 unless every table and plot summary.json lists is there and ok, nothing
else is missing, and there are no console errors and no requests. Exit 2 when no browser runs.
"""
import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

DEADLINE_S = 90


def _above(fd: int, low: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, low)
    os.close(fd)
    return moved


class Browser:
    def __init__(self, executable: str, profile: str):
        # The browser's ends are moved above fd 20 so that putting them at 3 and 4 cannot clobber them.
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        to_browser_r, from_browser_w = (_above(fd, 20) for fd in (to_browser_r, from_browser_w))
        flags = ["--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                 "--disable-background-networking", "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars",
                 "--window-size=1280,1000", f"--user-data-dir={profile}", "--remote-debugging-pipe"]
        if os.geteuid() == 0:
            flags.append("--no-sandbox")  # Chromium refuses to run its sandbox as root (containers, CI)
        script = f'exec 3<&{to_browser_r} 4>&{from_browser_w} {to_browser_r}<&- {from_browser_w}>&-; exec "$@"'
        self.process = subprocess.Popen(["bash", "-c", script, "bash", executable, *flags],
                                        pass_fds=(to_browser_r, from_browser_w), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events = []
        self.deadline = time.monotonic() + DEADLINE_S

    def _read_message(self):
        while b"\0" not in self._buffer:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the browser did not answer in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise ConnectionError("the browser closed its pipe: " + self.stderr_tail())
                self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method, params=None, session=None):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method):
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            event = self._read_message()
            self.events.append(event)
            if event.get("method") == method:
                return event

    def stderr_tail(self):
        try:
            self.process.kill()
            return self.process.communicate(timeout=5)[1].decode(errors="replace")[-2000:]
        except Exception:  # noqa: BLE001 - only for a message
            return ""

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:  # noqa: BLE001 - it may be gone already
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


DOM_PROBE = """JSON.stringify({
  tables: [...document.querySelectorAll('table.crl-table')].map(t => t.dataset.name),
  plots: [...document.querySelectorAll('img.crl-plot')].map(i => ({name: i.dataset.name,
          ok: i.complete && i.naturalWidth > 0 && i.naturalHeight > 0})),
  title: document.title})"""


def check(page: str, screenshot: str, executable: str) -> dict:
    profile = tempfile.mkdtemp(prefix="crl-check-page-")
    browser = Browser(executable, profile)
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            browser.call(f"{domain}.enable", session=session)
        browser.call("Page.navigate", {"url": "file://" + os.path.abspath(page)}, session=session)
        browser.wait_for("Page.loadEventFired")
        found = json.loads(browser.call("Runtime.evaluate", {"expression": DOM_PROBE, "returnByValue": True},
                                        session=session)["result"]["value"])
        size = browser.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
        shot = browser.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 16000), "scale": 1}},
            session=session)
        with open(screenshot, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        errors, requests = [], []
        for event in browser.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                errors.append(params.get("exceptionDetails", {}).get("text", "exception"))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                errors.append(params["entry"].get("text", ""))
            elif method == "Network.requestWillBeSent":
                url = params.get("request", {}).get("url", "")
                if not url.startswith(("data:", "file://" + os.path.abspath(page))):
                    requests.append(url)
        found.update({"console_errors": errors, "requests": requests, "screenshot": screenshot})
        return found
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("page")
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--browser", default=shutil.which("chromium") or shutil.which("chromium-browser") or "")
    parser.add_argument("--expect", help="summary.json whose page.tables and page.plots must all be there")
    args = parser.parse_args()
    if not args.browser:
        print("no chromium on PATH (Debian: apt-get install chromium; tools/setup.sh does it)", file=sys.stderr)
        return 2
    try:
        found = check(args.page, args.screenshot, args.browser)
    except (OSError, ConnectionError, TimeoutError) as e:
        print(f"the browser did not run: {e}", file=sys.stderr)
        return 2
    print(json.dumps(found, indent=2))
    if args.expect:
        with open(args.expect, encoding="utf-8") as f:
            page = json.load(f)["page"]
        plots_ok = {p["name"] for p in found["plots"] if p["ok"]}
        missing = [t for t in page["tables"] if t not in found["tables"]] + \
                  [p for p in page["plots"] if p not in plots_ok]
        if missing or found["console_errors"] or found["requests"]:
            print(f"missing or broken: {missing}; console errors: {found['console_errors']}; "
                  f"requests: {found['requests']}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
