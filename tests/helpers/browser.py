"""Opening dh's HTML in a real Chromium (headless, every connection refused), for the tests
that a page renders and fetches nothing; screenshots and pages kept under ARTIFACTS."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


# the browser ---------------------------------------------------------------------------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def open_in_chromium(page, tmp_path, name: str) -> tuple[str, list[dict]]:
    """Load a file:// page in headless chromium with every proxy connection refused; return
    the rendered DOM and the requests the page itself started (from chromium's net log)."""
    net_log, shot = tmp_path / f"{name}.netlog.json", tmp_path / f"{name}.png"
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--no-first-run",
            f"--user-data-dir={tmp_path / (name + '-profile')}", "--proxy-server=127.0.0.1:9",
            f"--log-net-log={net_log}", f"--screenshot={shot}", "--window-size=1000,1400",
            "--dump-dom", page.as_uri()]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    return done.stdout, page_requests(net_log)


def page_requests(net_log) -> list[dict]:
    """Requests chromium made on behalf of a page; its own background traffic (updates,
    dictionaries) has the initiator 'not an origin'."""
    data = json.loads(net_log.read_text())
    start = data["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    jobs = [e.get("params", {}) for e in data["events"] if e["type"] == start]
    return [p for p in jobs if p.get("url") and p.get("initiator") != "not an origin"]


ARTIFACTS = Path(os.environ.get("DH_TEST_ARTIFACTS", Path(tempfile.gettempdir()) / "dh-test-artifacts"))

