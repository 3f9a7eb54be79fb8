"""Where a session's OpenTelemetry spans (otel.py) go: OTLP/JSON lines on a stream (`dh log
export --format otlp`) or an OTLP/HTTP endpoint (`dh log trace`), a failed send one clear error.
(Imported only by the commands that export traces.)"""

from __future__ import annotations

import json
import sys
from typing import Iterable

from ..errors import WorldError
from .otel import emit_session


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
