"""An OpenTelemetry collector's trace receiver for the tests, on 127.0.0.1: OTLP over HTTP
(`POST /v1/traces`, protobuf) or gRPC (`TraceService/Export`), decoding each request with
the official `opentelemetry-proto` messages and keeping the spans. `Blackhole` is a
collector that is away: it accepts connections and never answers.

    with OtlpHttpCollector() as collector:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.endpoint
        ...
        collector.spans   # [ReceivedSpan(name, trace_id, span_id, parent_id, attributes)]
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    links: tuple[str, ...] = ()
    service: str = ""
    error: bool = False


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind is not None else None


def decode(request: trace_service_pb2.ExportTraceServiceRequest) -> Iterator[ReceivedSpan]:
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope in resource_spans.scope_spans:
            for span in scope.spans:
                yield ReceivedSpan(
                    name=span.name,
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_id=span.parent_span_id.hex(),
                    attributes={a.key: _value(a.value) for a in span.attributes},
                    links=tuple(link.span_id.hex() for link in span.links),
                    service=str(resource.get("service.name", "")),
                    error=span.status.code == span.status.STATUS_CODE_ERROR,
                )


@dataclass
class _Received:
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0
    changed: threading.Condition = field(default_factory=threading.Condition)

    def add(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self.changed:
            self.spans.extend(decode(request))
            self.requests += 1
            self.changed.notify_all()


class OtlpHttpCollector:
    """OTLP/HTTP protobuf receiver on a free port (a thread)."""

    def __init__(self) -> None:
        received = self.received = _Received()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                received.add(request)
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        return list(self.received.spans)

    def __enter__(self) -> OtlpHttpCollector:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class OtlpGrpcCollector(trace_service_pb2_grpc.TraceServiceServicer):
    """OTLP/gRPC receiver on a free port."""

    def __init__(self) -> None:
        import grpc

        self.received = _Received()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        add_servicer = trace_service_pb2_grpc.add_TraceServiceServicer_to_server
        add_servicer(self, self.server)  # type: ignore[no-untyped-call]
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.received.add(request)
        return trace_service_pb2.ExportTraceServiceResponse()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        return list(self.received.spans)

    def __enter__(self) -> OtlpGrpcCollector:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop(grace=None)


class Blackhole:
    """A collector that is away: connections are accepted and never answered."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.socket.getsockname()[1]}"

    def __enter__(self) -> Blackhole:
        return self

    def __exit__(self, *exc: object) -> None:
        self.socket.close()
