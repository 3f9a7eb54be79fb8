"""Where a session's OpenTelemetry spans (otel.py) go: OTLP/JSON lines on a stream (`dh log
export --format otlp`) or an OTLP/HTTP endpoint (`dh log trace`), a failed send one clear error.
(Imported only by the commands that export traces.)"""

from __future__ import annotations

import json
import sys
import threading
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


SEND_DEADLINE = 60.0  # seconds one batch of spans may take to be sent and answered
ANSWER_BYTES = 64 << 10  # what is read of an endpoint's answer: its status decides


def _bounded_session():
    """A requests session that sends to the endpoint named and nowhere else (a redirect is an
    answer, not followed) and reads at most ANSWER_BYTES of what it answers (a 3 GB answer
    was read whole into memory)."""
    import requests

    class Bounded(requests.Session):
        status: int | None = None  # of the last answer: the SDK takes any status under 400

        def request(self, method, url, **kwargs):
            kwargs.update(allow_redirects=False, stream=True)
            response = super().request(method, url, **kwargs)
            self.status = response.status_code
            try:
                response._content = response.raw.read(ANSWER_BYTES, decode_content=True) or b""
            finally:
                response.close()
            return response

    return Bounded()


class _Checked:
    """The SDK's OTLP/HTTP exporter, with a failed send raised as one clear error, each
    batch within SEND_DEADLINE (the SDK's timeout bounds each read, so an endpoint that
    answers one byte at a time held `dh log trace` for ever)."""

    def __init__(self, endpoint: str, headers: dict | None):
        import logging

        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        # its retries log to stderr; a failed send is one Error line, from export() below
        logging.getLogger("opentelemetry.exporter.otlp.proto.http").setLevel(logging.CRITICAL)

        self.endpoint = endpoint
        self.session = _bounded_session()
        self.inner = OTLPSpanExporter(endpoint=endpoint, headers=headers, timeout=10,
                                      session=self.session)
        self.sent = 0

    def export(self, spans):
        from opentelemetry.sdk.trace.export import SpanExportResult

        spans, done = list(spans), []
        sender = threading.Thread(target=lambda: done.append(self.inner.export(spans)),
                                  name="dh-otlp-send", daemon=True)
        sender.start()
        sender.join(SEND_DEADLINE)
        if not done:
            raise WorldError(f"the OTLP endpoint {self.endpoint} did not answer within"
                             f" {SEND_DEADLINE:g} s", hint="check that the collector runs and is not overloaded")
        result = done[0]
        if result is SpanExportResult.SUCCESS and not 200 <= (self.session.status or 200) < 300:
            raise WorldError(f"the OTLP endpoint {self.endpoint} answered {self.session.status}"
                             " (dh follows no redirect): the spans were not taken",
                             hint="give the collector's own URL")
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
