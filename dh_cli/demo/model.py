"""DEMO ONLY: the scripted model. An HTTP server on 127.0.0.1 in the dh process that answers
the demo harness with Pi-shaped assistant messages, streamed in a few chunks.

It is stateless like a real model: the reply is chosen by how many assistant messages the
request already holds, so a resumed harness that sends the logged history gets the next
reply, not the first one again. The first time STALL_AT is asked for, it sends the first
chunk, tells the demo (on_stall, with the harness's pid) and never finishes that reply: that
call is cut, not paid. It counts every reply it finished, so the demo can show what was
served once and what was asked again."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STALL_AT = 1  # the reply (0-based) that is cut by the kill, the first time it is asked for
NOTES = "- dh mirrors every record of the session into its log as it is written\n"
REPLIES = [
    {"content": [{"type": "text", "text": "I'll write the notes file first."},
                 {"type": "toolCall", "id": "call_demo_1", "name": "write",
                  "arguments": {"path": "notes.txt", "content": NOTES}}],
     "stopReason": "toolUse"},
    {"content": [{"type": "text", "text": "Done: notes.txt holds the note."}], "stopReason": "stop"},
]
CHUNKS = 3  # a reply arrives in this many pieces
CHUNK_GAP = 0.15  # seconds between pieces: long enough to see a call in flight


def reply_message(index: int) -> bytes:
    """The assistant message of reply `index`, in Pi's shape, as the harness stores it."""
    body = dict(REPLIES[index], role="assistant", api="dh-demo", provider="dh-demo",
                model="demo-model", responseId=f"demo_reply_{index + 1}",
                usage={"input": 40 + 20 * index, "output": 12, "cacheRead": 0, "cacheWrite": 0,
                       "totalTokens": 52 + 20 * index},
                timestamp=int(time.time() * 1000))
    return json.dumps(body, separators=(",", ":")).encode()


class DemoModel:
    def __init__(self, on_stall=None, on_request=None):
        self.on_stall = on_stall or (lambda index, pid: None)
        self.on_request = on_request or (lambda index: None)
        self.finished: dict[int, int] = {}  # reply index -> times sent in full
        self.cut: dict[int, int] = {}  # reply index -> times cut off mid-reply
        self.finished_before_cut: set[int] = set()
        self.stalled = False
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="dh-demo-model",
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> "DemoModel":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def choose(self, messages: list) -> int:
        done = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        return min(done, len(REPLIES) - 1)

    def _handler(self):
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # the demo narrates; no access log
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                model.serve(self, model.choose(request.get("messages") or []),
                            int(self.headers.get("X-Demo-Harness-Pid") or 0))

        return Handler

    def serve(self, handler, index: int, pid: int) -> None:
        data = reply_message(index)
        self.on_request(index)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        step = -(-len(data) // CHUNKS)
        for start in range(0, len(data), step):
            if start:
                time.sleep(CHUNK_GAP)
            handler.wfile.write(data[start:start + step])
            handler.wfile.flush()
            if start == 0 and self._stall_now(index):
                self.on_stall(index, pid)
                self.release.wait(30)  # the harness is gone: this reply is never finished
                with self.lock:
                    self.cut[index] = self.cut.get(index, 0) + 1
                return
        with self.lock:
            self.finished[index] = self.finished.get(index, 0) + 1

    def snapshot(self) -> None:
        """Remember which replies were finished before the kill (called by the demo just
        before it kills the harness, when the earlier replies' handlers are long done)."""
        with self.lock:
            self.finished_before_cut = set(self.finished)

    def _stall_now(self, index: int) -> bool:
        with self.lock:
            if index != STALL_AT or self.stalled:
                return False
            self.stalled = True
            return True
