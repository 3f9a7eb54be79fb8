"""The README's pictures of `dh serve`, taken in the system Chromium over the tests' fixed log
(the real fixtures, a crash and a resume journaled): the list at 1400 px, one session's
trace at 1400 px, and the list at 400 px in the dark.

Run: python -m tests.helpers.screenshot [FOLDER]   (default: docs/, next to the README)"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from .serve import CHROMIUM, CHROMIUM_ARGS, ROOT, Served, fixed_log

SHOTS = {"serve-sessions.png": ("/", 1400, "light"), "serve-session.png": ("/s/{crashed}", 1400, "light"),
         "serve-sessions-narrow-dark.png": ("/", 400, "dark")}


def screenshots(folder: Path, tmp: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    dh_home = tmp / "dh-home"
    ids = fixed_log(dh_home, tmp)
    served = Served({**os.environ, "DH_HOME": str(dh_home), "XDG_CONFIG_HOME": str(tmp / "xdg")})
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            for name, (path, width, scheme) in SHOTS.items():
                page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=scheme)
                page.goto(served.url)  # logged in: the token becomes a cookie
                page.goto(served.base + path.format(**ids))
                page.wait_for_selector("body[data-live=open]")
                page.screenshot(path=str(folder / name))
                made.append(folder / name)
                page.close()
            browser.close()
    finally:
        served.stop()
    return made


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs"
    with tempfile.TemporaryDirectory(prefix="dh-screenshot-") as work:
        for made in screenshots(target, Path(work)):
            print(made)
