"""A session as OpenTelemetry traces (`dh log trace`, `dh log export --format otlp`): the
spans of trace.py through the OpenTelemetry SDK, named and attributed per the GenAI semantic
conventions (gen_ai.*), with OpenInference's span kinds so that Arize Phoenix draws them as
agent, LLM and tool spans. (Imported only by the commands that export traces.) One trace per session (its id derived from the session id, so a
second export of the same session lands in the same trace); the crash and the resume are
events of the turn span they happened in."""

from __future__ import annotations

import hashlib
import json
import random
import sys
from typing import Iterable

from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator

from ..errors import WorldError
from .trace import Span, session_trace

_KIND = {"turn": "AGENT", "model_call": "LLM", "tool_call": "TOOL"}  # openinference.span.kind


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
    """Attributes OpenTelemetry can carry: no None, and no nested values (JSON text instead)."""
    out = {}
    for key, value in attrs.items():
        if value is None:
            continue
        plain = isinstance(value, (str, bool, int, float)) or (
            isinstance(value, list) and all(isinstance(v, str) for v in value))
        out[key] = value if plain else json.dumps(value, ensure_ascii=False)
    return out


def _model_attrs(span: Span, harness: str) -> dict:
    a, tokens = span.attrs, span.attrs.get("tokens") or {}
    return {"gen_ai.operation.name": "chat", "gen_ai.request.model": a.get("model"),
            "gen_ai.response.model": a.get("model"), "gen_ai.response.id": a.get("msg_id"),
            "gen_ai.response.finish_reasons": [a["stop_reason"]] if a.get("stop_reason") else None,
            "gen_ai.usage.input_tokens": tokens.get("input"),
            "gen_ai.usage.output_tokens": tokens.get("output"),
            "gen_ai.usage.cache_read.input_tokens": tokens.get("cache_read"),
            "gen_ai.usage.cache_creation.input_tokens": tokens.get("cache_write"),
            "gen_ai.agent.name": harness, "dh.cost_usd": a.get("cost_usd"),
            "llm.model_name": a.get("model"), "output.value": a.get("output") or None,
            "llm.token_count.prompt": tokens.get("input"), "llm.token_count.completion": tokens.get("output")}


def _tool_attrs(span: Span) -> dict:
    a = span.attrs
    args = a.get("input")
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": a.get("tool"),
            "gen_ai.tool.call.id": a.get("call_id"), "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
            "gen_ai.tool.call.result": a.get("result"), "dh.tool.status": a.get("status"),
            "tool.name": a.get("tool"), "input.value": args if isinstance(args, str) else json.dumps(args),
            "output.value": a.get("result")}


def _turn_attrs(span: Span, session: dict) -> dict:
    return {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": session["harness"],
            "gen_ai.conversation.id": session["id"], "dh.turn": span.attrs.get("turn"),
            "input.value": span.attrs.get("prompt")}


class _Emitter:
    def __init__(self, tracer, session: dict, fallback_ms: int):
        self.tracer, self.session, self.fallback = tracer, session, fallback_ms

    def emit(self, span: Span, parent_context) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        attrs = (_turn_attrs(span, self.session) if span.kind == "turn" else
                 _model_attrs(span, self.session["harness"]) if span.kind == "model_call" else
                 _tool_attrs(span))
        attrs["openinference.span.kind"] = _KIND[span.kind]
        name = {"turn": f"invoke_agent {self.session['harness']} {span.name}",
                "model_call": f"chat {span.attrs.get('model') or ''}".strip(),
                "tool_call": f"execute_tool {span.attrs.get('tool') or ''}".strip()}[span.kind]
        start = _ns(span.start, self.fallback)
        otel = self.tracer.start_span(name, context=parent_context, start_time=start,
                                      attributes=_clean(attrs))
        for event in span.events:
            otel.add_event(f"dh.{event['name']}", _clean(event.get("attrs") or {}),
                           timestamp=_ns(event.get("at"), span.start or self.fallback))
        if span.kind == "tool_call" and span.attrs.get("status") in ("error", "dangling"):
            otel.set_status(Status(StatusCode.ERROR, f"tool call {span.attrs.get('status')}"))
        context = trace.set_span_in_context(otel)
        for child in span.children:
            self.emit(child, context)
        otel.end(end_time=max(start, _ns(span.end, span.start or self.fallback)))


def emit_session(world, session, exporter) -> int:
    """Send the session's spans to `exporter` (an SDK SpanExporter), a turn at a time; returns
    the number of turns. The root span is the session; each turn a child of it."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    view, turns = session_trace(world, session)
    s = view.session
    provider = TracerProvider(resource=Resource.create({"service.name": "dh", "dh.harness": s["harness"]}),
                              id_generator=_SessionIds(s["id"]))
    provider.add_span_processor(_Batches(exporter))
    tracer = provider.get_tracer("dh")
    first_ms, last_ms = world.ts_range(s["id"])
    start_ms = first_ms if first_ms is not None else _iso_ms(s["created_at"])
    root = tracer.start_span(f"dh session {s['id']}", start_time=start_ms * 1_000_000, attributes=_clean({
        "gen_ai.conversation.id": s["id"], "gen_ai.agent.name": s["harness"],
        "dh.harness_session_id": s["harness_session_id"], "dh.cwd": s["cwd"],
        "dh.state": s["state"], "dh.attempts": s["attempts"], "openinference.span.kind": "CHAIN"}))
    emitter, count = _Emitter(tracer, s, start_ms), 0
    context = trace.set_span_in_context(root)
    for turn in turns:
        emitter.emit(turn, context)
        count += 1
    cost = view.totals.get("cost") or {}
    root.set_attributes(_clean({"dh.cost_usd": cost.get("usd"), "dh.saved_usd": cost.get("saved_usd"),
                                "gen_ai.usage.input_tokens": view.totals.get("input"),
                                "gen_ai.usage.output_tokens": view.totals.get("output")}))
    root.end(end_time=_ns(max(last_ms or start_ms, start_ms), start_ms))
    provider.shutdown()
    return count


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


class JsonLinesExporter:
    """An SDK SpanExporter that writes OTLP/JSON, one ExportTraceServiceRequest a line (the
    format of the OpenTelemetry Collector's file exporter and otlpjsonfile receiver)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout

    def export(self, spans: Iterable):
        from google.protobuf.json_format import MessageToJson
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.trace.export import SpanExportResult

        request = json.loads(MessageToJson(encode_spans(list(spans)), indent=None))
        for resource in request.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    _hex_ids(span)
        self.stream.write(json.dumps(request, ensure_ascii=False) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.stream.flush()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _hex_ids(span: dict) -> None:
    """OTLP/JSON writes trace and span ids as hex, where protobuf's JSON mapping uses base64."""
    import base64

    for key in ("traceId", "spanId", "parentSpanId"):
        if span.get(key):
            span[key] = base64.b64decode(span[key]).hex()


class _Checked:
    """The SDK's OTLP/HTTP exporter, with a failed send raised as one clear error."""

    def __init__(self, endpoint: str, headers: dict | None):
        import logging

        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        # its retries log to stderr; a failed send is one Error line, from export() below
        logging.getLogger("opentelemetry.exporter.otlp.proto.http").setLevel(logging.CRITICAL)

        self.endpoint, self.inner = endpoint, OTLPSpanExporter(endpoint=endpoint, headers=headers, timeout=10)
        self.sent = 0

    def export(self, spans):
        from opentelemetry.sdk.trace.export import SpanExportResult

        spans = list(spans)
        result = self.inner.export(spans)
        if result is not SpanExportResult.SUCCESS:
            raise WorldError(f"the OTLP endpoint {self.endpoint} did not take the spans",
                             hint="check the URL (e.g. http://127.0.0.1:6006/v1/traces) and that the collector runs")
        self.sent += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def send_session(world, session, endpoint: str, headers: dict | None = None) -> tuple[int, int]:
    """(turns, spans) sent to an OTLP/HTTP endpoint."""
    exporter = _Checked(endpoint, headers)
    turns = emit_session(world, session, exporter)
    return turns, exporter.sent
