"""datasette, the tool people browse the log with (`pip install '.[test]'` brings it): a real
server on a log, on loopback and a port the OS picks, read through its JSON API."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from .processes import stop_group
from .wait import wait_until

DATASETTE = importlib.util.find_spec("datasette") is not None
_LISTENING = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")


@contextmanager
def serving(db: Path, folder: Path):
    """A datasette serving `db` as the README opens it (its URL), stopped on the way out."""
    log = folder / "datasette.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "datasette", "serve", str(db),
                                 "--host", "127.0.0.1", "--port", "0"],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def listening():
            assert proc.poll() is None, log.read_text()[-2000:]
            found = _LISTENING.search(log.read_text(errors="replace"))
            return found and found.group(1)

        yield wait_until(listening, "datasette to listen", timeout=120, step=0.1)
    finally:
        stop_group(proc)


def rows(url: str, database: str, table: str, **filters: str) -> list[dict]:
    """Every row of a table or view as datasette's JSON API hands it out (one page: _size=max;
    `table` may be "" with a `sql` filter). The API hands a BLOB of UTF-8 out as a string:
    only the HTML page shows it as <Binary>, and typeof() in SQL tells them apart."""
    query = urllib.parse.urlencode({"_shape": "array", "_size": "max", **filters})
    where = f"{database}/{table}" if table else database
    with urllib.request.urlopen(f"{url}/{where}.json?{query}", timeout=60) as answer:
        return json.loads(answer.read())


def page(url: str, path: str) -> str:
    """A page of datasette's as a person's browser gets it."""
    with urllib.request.urlopen(f"{url}/{path}", timeout=60) as answer:
        return answer.read().decode()
