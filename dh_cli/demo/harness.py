"""DEMO ONLY: the scripted harness `dh demo` runs under dh (stdlib only; not a test fake).

It takes Pi's headless flags (`-p [--session FILE] PROMPT…`) and keeps its session the way
Pi does: one JSONL file, a `session` header, then `message` entries chained by parentId. It
sends the whole conversation to the demo model (DH_DEMO_MODEL_URL), runs the one tool it
knows (`write`, which appends to a file in its cwd), and stops at the model's final answer.
Unlike Pi it writes a reply into its session file while the reply streams in, so a harness
killed mid-call leaves half a line there, which dh's repair drops on resume."""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
import urllib.request
import uuid
from pathlib import Path


def say(text: str) -> None:
    os.write(1, f"  harness | {text}\n".encode())


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"


def parse(argv: list[str]) -> tuple[Path, str]:
    if "-p" not in argv or "--session" not in argv:
        sys.exit("dh-demo-harness: needs -p and --session FILE (it runs only inside `dh demo`)")
    rest = [w for w in argv if w not in ("-p", "--")]
    at = rest.index("--session")
    session = rest[at + 1]
    del rest[at:at + 2]
    return Path(session), "\n\n".join(rest)


class Session:
    def __init__(self, path: Path):
        self.path, self.entries = path, []
        if path.exists():
            self.entries = [json.loads(l) for l in path.read_bytes().splitlines() if l.strip()]
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._write(json.dumps({"type": "session", "version": 3, "id": str(uuid.uuid4()),
                                    "timestamp": now_iso(), "cwd": os.getcwd()},
                                   separators=(",", ":")).encode() + b"\n")
            self.entries.append({"type": "session", "id": None})

    def _write(self, data: bytes) -> None:
        with open(self.path, "ab", buffering=0) as handle:
            handle.write(data)

    def messages(self) -> list[dict]:
        return [e["message"] for e in self.entries if e.get("type") == "message"]

    def head(self) -> bytes:
        """The start of a new message entry, up to where the message object goes."""
        parent = self.entries[-1].get("id")
        entry_id = secrets.token_hex(4)
        self.entries.append({"type": "message", "id": entry_id})
        head = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": now_iso()}
        return json.dumps(head, separators=(",", ":")).encode()[:-1] + b',"message":'

    def add(self, message: dict) -> None:
        data = json.dumps(message, separators=(",", ":")).encode()
        self._write(self.head() + data + b"}\n")
        self.entries[-1]["message"] = message


def ask_model(session: Session) -> dict:
    """One model call; the reply is written into the session file as it arrives."""
    body = json.dumps({"messages": session.messages()}).encode()
    request = urllib.request.Request(os.environ["DH_DEMO_MODEL_URL"] + "/v1/messages", body,
                                     {"Content-Type": "application/json",
                                      "X-Demo-Harness-Pid": str(os.getpid())})
    with urllib.request.urlopen(request, timeout=60) as response:
        session._write(session.head())
        data = b""
        while chunk := response.read1(65536):
            session._write(chunk)
            data += chunk
    session._write(b"}\n")
    message = json.loads(data)
    session.entries[-1]["message"] = message
    return message


def run_tool(call: dict) -> dict:
    args = call.get("arguments") or {}
    target = Path(os.getcwd(), Path(args.get("path", "notes.txt")).name)  # only in its cwd
    with open(target, "a") as handle:
        handle.write(args.get("content", ""))
    say(f"tool {call['name']}: appended to {target.name}")
    return {"role": "toolResult", "toolCallId": call["id"], "toolName": call["name"],
            "content": [{"type": "text", "text": f"Appended to {target.name}"}], "isError": False,
            "timestamp": int(time.time() * 1000)}


def main(argv: list[str] | None = None) -> int:
    path, prompt = parse(sys.argv[1:] if argv is None else argv)
    session = Session(path)
    session.add({"role": "user", "content": [{"type": "text", "text": prompt}],
                 "timestamp": int(time.time() * 1000)})
    say(f"prompt: {prompt}")
    for _ in range(10):
        number = 1 + sum(m.get("role") == "assistant" for m in session.messages())
        say(f"model call {number}: waiting for the reply…")
        message = ask_model(session)
        calls = [b for b in message["content"] if b.get("type") == "toolCall"]
        text = " ".join(b["text"] for b in message["content"] if b.get("type") == "text")
        say(f"model: {text}")
        for call in calls:
            session.add(run_tool(call))
        if message.get("stopReason") == "stop":
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
