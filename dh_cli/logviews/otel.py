"""A session as OpenTelemetry traces (`dh log trace`, `dh log export --format otlp`): the
spans of trace.py through the OpenTelemetry SDK, named and attributed per the GenAI semantic
conventions (gen_ai.*) and OpenInference's (llm.*, input.value, openinference.span.kind) the
way Arize Phoenix reads them: an LLM span's prompt count includes the cached tokens (their
reads and writes beside it), its input and output messages and the tool calls it asked for,
its provider and status. (Imported only by the commands that export traces; the exporters
that write or send the spans are in otel_export.py.)

One trace per session (its id derived from the session id, so a second export of the same
session lands in the same trace): the session span, under it each of dh's attempts and each
turn; a crash and a resume are spans of a moment inside the turn they happened in (and events
of it), so that a timeline shows them."""

from __future__ import annotations

import functools
import hashlib
import json
import random

from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator

from ..redact import mask
from ..tokens import Usage
from .trace import Span, attempt_spans, session_trace

# openinference.span.kind of each of trace.py's spans, and of the marks inside a turn
_KIND = {"turn": "AGENT", "model_call": "LLM", "tool_call": "TOOL", "attempt": "CHAIN",
         "crash": "CHAIN", "resume": "CHAIN"}


class _SessionIds(IdGenerator):
    """Trace id from the session id; span ids at random (an IdGenerator of the SDK)."""

    def is_trace_id_random(self) -> bool:
        return False

    def __init__(self, session_id: str):
        self.trace = int.from_bytes(hashlib.sha256(session_id.encode()).digest()[:16], "big") or 1

    def generate_trace_id(self) -> int:
        return self.trace

    def generate_span_id(self) -> int:
        return random.getrandbits(64) or 1


def _ns(ms: int | None, fallback: int) -> int:
    return (ms if ms is not None else fallback) * 1_000_000


def _clean(attrs: dict) -> dict:
    """Attributes OpenTelemetry can carry: no None, no nested values (JSON text instead), and
    anything that looks like a credential masked (a trace leaves the machine)."""
    out = {}
    for key, value in attrs.items():
        if value is None:
            continue
        plain = isinstance(value, (str, bool, int, float)) or (
            isinstance(value, list) and all(isinstance(v, str) for v in value))
        value = value if plain else json.dumps(value, ensure_ascii=False)
        out[key] = mask(value) if isinstance(value, str) else value
    return out


def token_counts(tokens: dict | None) -> dict:
    """One model call's tokens as OpenInference and the GenAI conventions count them, from the
    log's kinds (tokens.py): the prompt is every input token, cached ones included, with the
    cache reads and writes as its details; the completion includes the reasoning (beside it
    as a detail); the total is prompt plus completion."""
    u = Usage.of(tokens)
    write = u.cache_write + u.cache_write_1h
    return {"llm.token_count.prompt": u.prompt, "llm.token_count.completion": u.output,
            "llm.token_count.total": u.total,
            "llm.token_count.prompt_details.cache_read": u.cache_read,
            "llm.token_count.prompt_details.cache_write": write,
            "llm.token_count.completion_details.reasoning": u.reasoning or None,
            "gen_ai.usage.input_tokens": u.prompt, "gen_ai.usage.output_tokens": u.output,
            "gen_ai.usage.cache_read.input_tokens": u.cache_read,
            "gen_ai.usage.cache_creation.input_tokens": write}


@functools.lru_cache(maxsize=64)
def provider(model: str | None) -> str | None:
    """The model's provider as genai-prices names it (anthropic, openai, google...)."""
    if not model:
        return None
    from genai_prices import data_snapshot

    try:
        found, _ = data_snapshot.get_snapshot().find_provider_model(model, None, None, None)
    except LookupError:
        return None
    return found.id


def _messages(prefix: str, messages: list[dict]) -> dict:
    out = {}
    for n, message in enumerate(messages):
        key = f"{prefix}.{n}.message"
        out[f"{key}.role"], out[f"{key}.content"] = message["role"], message.get("content")
        out[f"{key}.tool_call_id"] = message.get("tool_call_id")
        for m, call in enumerate(message.get("tool_calls") or []):
            call_key = f"{key}.tool_calls.{m}.tool_call"
            out[f"{call_key}.id"], out[f"{call_key}.function.name"] = call["id"], call["name"]
            out[f"{call_key}.function.arguments"] = _json_text(call["arguments"])
    return out


def _json_text(value) -> str | None:
    return value if value is None or isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _model_attrs(span: Span, harness: str) -> dict:
    a = span.attrs
    given = a.get("input_messages") or []
    answer = {"role": "assistant", "content": a.get("output") or None, "tool_calls": a.get("tool_calls")}
    return {"gen_ai.operation.name": "chat", "gen_ai.request.model": a.get("model"),
            "gen_ai.response.model": a.get("model"), "gen_ai.response.id": a.get("msg_id"),
            "gen_ai.response.finish_reasons": [a["stop_reason"]] if a.get("stop_reason") else None,
            "gen_ai.provider.name": provider(a.get("model")), "gen_ai.agent.name": harness,
            "llm.model_name": a.get("model"), "llm.provider": provider(a.get("model")),
            "llm.system": provider(a.get("model")), "dh.cost_usd": a.get("cost_usd"),
            "input.value": given[-1]["content"] if given else None,
            "output.value": a.get("output") or None,
            **token_counts(a.get("tokens")),
            **_messages("llm.input_messages", given), **_messages("llm.output_messages", [answer])}


def _tool_attrs(span: Span) -> dict:
    a = span.attrs
    args = _json_text(a.get("input"))
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": a.get("tool"),
            "gen_ai.tool.call.id": a.get("call_id"), "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": args, "gen_ai.tool.call.result": a.get("result"),
            "dh.tool.status": a.get("status"), "tool.name": a.get("tool"), "input.value": args,
            "output.value": a.get("result")}


def _turn_attrs(span: Span, session: dict) -> dict:
    answers = [c.attrs["output"] for c in span.children if c.kind == "model_call" and c.attrs.get("output")]
    return {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": session["harness"],
            "gen_ai.conversation.id": session["id"], "dh.turn": span.attrs.get("turn"),
            "input.value": span.attrs.get("prompt"), "output.value": answers[-1] if answers else None}


def _attempt_attrs(span: Span) -> dict:
    return {"dh.attempt": span.attrs["attempt"], "dh.exit": span.attrs.get("exit"),
            "dh.outcome": span.attrs.get("outcome")}


def _status(span: Span):
    """ERROR for a tool call that failed or never finished, an attempt that crashed or hung,
    and a crash; OK for the rest."""
    from opentelemetry.trace import Status, StatusCode

    a = span.attrs
    if span.kind == "tool_call" and a.get("status") in ("error", "dangling"):
        return Status(StatusCode.ERROR, f"tool call {a.get('status')}")
    if span.kind == "attempt" and a.get("outcome") in ("crashed", "hung"):
        return Status(StatusCode.ERROR, f"{span.name} {a['outcome']}: {a.get('exit') or ''}".strip())
    if span.kind == "crash":
        return Status(StatusCode.ERROR, a.get("label") or "crash")
    return Status(StatusCode.OK)


def _marks(span: Span) -> list[Span]:
    """The crash and the resume inside a turn as spans of a moment (start = end)."""
    return [Span(e["name"], e["attrs"].get("label") or e["name"], e.get("at"), e.get("at"),
                 dict(e.get("attrs") or {}))
            for e in span.events if e["name"] in ("crash", "resume")]


class _Emitter:
    def __init__(self, tracer, session: dict, fallback_ms: int):
        self.tracer, self.session, self.fallback = tracer, session, fallback_ms
        self.name = {"turn": lambda s: f"invoke_agent {session['harness']} {s.name}",
                     "model_call": lambda s: f"chat {s.attrs.get('model') or ''}".strip(),
                     "tool_call": lambda s: f"execute_tool {s.attrs.get('tool') or ''}".strip()}

    def _attrs(self, span: Span) -> dict:
        if span.kind == "turn":
            attrs = _turn_attrs(span, self.session)
        elif span.kind == "model_call":
            attrs = _model_attrs(span, self.session["harness"])
        elif span.kind == "tool_call":
            attrs = _tool_attrs(span)
        elif span.kind == "attempt":
            attrs = _attempt_attrs(span)
        else:  # a crash or resume mark
            attrs = {f"dh.{key}": value for key, value in span.attrs.items()}
        return {**attrs, **_mime_types(attrs), "openinference.span.kind": _KIND[span.kind]}

    def emit(self, span: Span, parent_context) -> None:
        from opentelemetry import trace

        name = self.name.get(span.kind, lambda s: f"dh {s.name}")(span)
        start = _ns(span.start, self.fallback)
        otel = self.tracer.start_span(name, context=parent_context, start_time=start,
                                      attributes=_clean(self._attrs(span)))
        for event in span.events:
            otel.add_event(f"dh.{event['name']}", _clean(event.get("attrs") or {}),
                           timestamp=_ns(event.get("at"), span.start or self.fallback))
        otel.set_status(_status(span))
        context = trace.set_span_in_context(otel)
        for child in span.children + _marks(span):
            self.emit(child, context)
        otel.end(end_time=max(start, _ns(span.end, span.start or self.fallback)))


def _mime_types(attrs: dict) -> dict:
    """input.mime_type / output.mime_type for the values a span has: JSON when it parses as
    an object or a list (a tool's arguments), plain text otherwise (Phoenix guesses JSON)."""
    out = {}
    for side in ("input", "output"):
        value = attrs.get(f"{side}.value")
        if value is not None:
            out[f"{side}.mime_type"] = "application/json" if _is_json(value) else "text/plain"
    return out


def _is_json(text: str) -> bool:
    if not text.lstrip().startswith(("{", "[")):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def emit_session(world, session, exporter) -> int:
    """Send the session's spans to `exporter` (an SDK SpanExporter), a turn at a time; returns
    the number of turns. The root span is the session; each attempt and each turn a child of it."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    view, turns = session_trace(world, session)
    s = view.session
    provider_ = TracerProvider(resource=Resource.create({"service.name": "dh", "dh.harness": s["harness"]}),
                               id_generator=_SessionIds(s["id"]))
    provider_.add_span_processor(_Batches(exporter))
    tracer = provider_.get_tracer("dh")
    first_ms, last_ms = world.ts_range(s["id"])
    attempts = attempt_spans(view.events)
    times = [t for t in [first_ms, last_ms] + [a.start for a in attempts] + [a.end for a in attempts]
             if t is not None]
    start_ms = min(times) if times else _iso_ms(s["created_at"])
    root = tracer.start_span(f"dh session {s['id']}", start_time=start_ms * 1_000_000, attributes=_clean({
        "gen_ai.conversation.id": s["id"], "gen_ai.agent.name": s["harness"],
        "dh.harness_session_id": s["harness_session_id"], "dh.cwd": s["cwd"],
        "dh.state": s["state"], "dh.attempts": s["attempts"], "openinference.span.kind": "CHAIN"}))
    emitter, count, ends = _Emitter(tracer, s, start_ms), 0, _Ends()
    context = trace.set_span_in_context(root)
    for attempt in attempts:
        emitter.emit(attempt, context)
    for turn in turns:
        emitter.emit(turn, context)
        ends.add(turn)
        count += 1
    root.set_attributes(_clean(_session_attrs(view, ends)))
    root.set_status(_status(Span("session", "")))
    root.end(end_time=_ns(max(times + [start_ms]), start_ms))
    provider_.shutdown()
    return count


class _Ends:
    """The session's first prompt and latest answer, kept as the turns go by."""

    def __init__(self):
        self.first: str | None = None
        self.last: str | None = None

    def add(self, turn: Span) -> None:
        self.first = self.first or turn.attrs.get("prompt")
        answers = [c.attrs["output"] for c in turn.children
                   if c.kind == "model_call" and c.attrs.get("output")]
        self.last = answers[-1] if answers else self.last


def _session_attrs(view, ends: _Ends) -> dict:
    cost, totals = view.totals.get("cost") or {}, view.totals
    counts = token_counts(totals)
    attrs = {"dh.cost_usd": cost.get("usd"), "dh.saved_usd": cost.get("saved_usd"),
             "input.value": ends.first, "output.value": ends.last,
             "gen_ai.usage.input_tokens": counts["gen_ai.usage.input_tokens"],
             "gen_ai.usage.output_tokens": counts["gen_ai.usage.output_tokens"],
             "dh.token_count.total": counts["llm.token_count.total"]}
    return {**attrs, **_mime_types(attrs)}


def _iso_ms(text: str) -> int:
    import datetime as _dt

    try:
        return int(_dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except (ValueError, AttributeError):
        return 0


class _Batches(SpanProcessor):
    """A span processor that hands ended spans to the exporter 512 at a time, in this thread
    (the SDK's BatchSpanProcessor drops spans when its queue is full: none may be lost)."""

    SIZE = 512

    def __init__(self, exporter):
        self.exporter, self.spans = exporter, []

    def on_start(self, span, parent_context=None) -> None:
        pass

    def on_end(self, span) -> None:
        self.spans.append(span)
        if len(self.spans) >= self.SIZE:
            self.force_flush()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        if self.spans:
            spans, self.spans = self.spans, []
            self.exporter.export(spans)
        return True

    def shutdown(self) -> None:
        self.force_flush()
        self.exporter.shutdown()
