"""What the fake model server was told, for tests that a resumed harness's model learned of
a cut-off tool call (wrappers/replay.py's texts)."""

from __future__ import annotations

import json


def told_may_have_run(server) -> bool:
    bodies = [json.dumps(e["body"]) for e in server.main_requests()]
    return any("may already have taken effect" in body for body in bodies)

