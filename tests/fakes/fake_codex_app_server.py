"""Fake `codex app-server` on stdio (Codex CLI 0.171.0), the part `dh restore` uses; run by
fake_codex.py for `codex app-server`. Behaves like the real one where dh can see it:

* one JSON-RPC message a line each way; at the end of its input the server exits without
  answering what is still pending (seen with 0.171.0);
* `initialize` answers `{userAgent, codexHome, platformFamily, platformOs}`, then a
  `remoteControl/status/changed` notification comes unasked;
* `thread/list {sourceKinds, modelProviders, useStateDbOnly, limit, cursor}`: unless
  `useStateDbOnly`, every rollout under `sessions/` whose thread has no `threads` row gets
  one, from its `session_meta` (0.171.0 rebuilds rows so); then the rows the filters keep,
  newest first, `limit` a page, `nextCursor` to the next. No `sourceKinds`: the interactive
  kinds only (`cli`, `vscode`); an empty `modelProviders`: every provider.
* an unknown method gets a JSON-RPC error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

INTERACTIVE = ["cli", "vscode"]


def serve(fake) -> int:
    """fake: the fake_codex module (its home, state database and version)."""
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "id" not in message:
            continue  # a notification (`initialized`)
        answer = handle(fake, message.get("method"), message.get("params") or {})
        print(json.dumps({"id": message["id"], **answer}), flush=True)
        if message.get("method") == "initialize":
            print(json.dumps({"method": "remoteControl/status/changed",
                              "params": {"status": "disabled"}}), flush=True)
    return 0


def handle(fake, method: str, params: dict) -> dict:
    if method == "initialize":
        name = (params.get("clientInfo") or {}).get("name", "client")
        return {"result": {"userAgent": f"{name}/{fake.VERSION}", "codexHome": str(fake.codex_home()),
                           "platformFamily": "unix", "platformOs": "linux"}}
    if method == "thread/list":
        if not params.get("useStateDbOnly"):
            rescan(fake)
        return {"result": thread_page(fake, params)}
    return {"error": {"code": -32601, "message": f"unknown method {method}"}}


def rescan(fake) -> None:
    with fake.state_db() as db:
        known = {row[0] for row in db.execute("SELECT id FROM threads")}
        for rollout in sorted((fake.codex_home() / "sessions").glob("*/*/*/rollout-*.jsonl")):
            meta, title = session_meta(rollout)
            if meta.get("id") and meta["id"] not in known:
                db.execute("""INSERT INTO threads (id, rollout_path, created_at, updated_at,
                    source, model_provider, cwd, title, sandbox_policy, approval_mode,
                    cli_version, first_user_message) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)""",
                           (meta["id"], str(rollout), 0, int(rollout.stat().st_mtime),
                            meta.get("source", "cli"), meta.get("model_provider", ""),
                            meta.get("cwd", ""), title[:100], '{"type":"disabled"}', "never",
                            meta.get("cli_version", ""), title))
    db.close()


def session_meta(rollout: Path) -> tuple[dict, str]:
    """The rollout's session_meta payload and its first user text."""
    meta, title = {}, ""
    for line in rollout.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        payload = record.get("payload") or {}
        if record.get("type") == "session_meta" and not meta:
            meta = payload
        if not title and payload.get("type") == "message" and payload.get("role") == "user":
            texts = [c.get("text", "") for c in payload.get("content") or []]
            title = next((t for t in texts if t and not t.startswith("<")), "")
    return meta, title


def thread_page(fake, params: dict) -> dict:
    kinds = params.get("sourceKinds") or INTERACTIVE
    providers = params.get("modelProviders") or []
    db = fake.state_db()
    rows = db.execute("SELECT id, title, source, model_provider, rollout_path FROM threads "
                      "WHERE archived = 0 ORDER BY updated_at DESC, id DESC").fetchall()
    db.close()
    rows = [r for r in rows if r[2] in kinds and (not providers or r[3] in providers)]
    start = int(params.get("cursor") or 0)
    end = start + int(params.get("limit") or 25)
    data = [{"id": r[0], "preview": r[1], "modelProvider": r[3], "path": r[4]} for r in rows[start:end]]
    return {"data": data, "nextCursor": str(end) if end < len(rows) else None}
