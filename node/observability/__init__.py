"""Observability for the node and the gateway: traces, metrics and structured logs.

- `tracing.Tracing`: the process's OpenTelemetry tracer provider and the maintained instrumentations
  (grpc.aio client and server, aiohttp server, redis); off unless OTEL_EXPORTER_OTLP_ENDPOINT is set
  (or a test hands it an exporter). Off means no provider, nothing instrumented, no exporter thread.
- `metrics.MetricsEndpoint`: an OpenTelemetry meter provider whose Prometheus reader has its own registry,
  served over HTTP (`--metrics-addr`, '' disables).
- `node_metrics.NodeMetrics`, `rpc.RpcMetricsInterceptor`: the node's instruments.
- `spans.NodeTelemetry`: the node's own spans (submit, verify, validate, mempool, block) and the per-message
  admission records that link a block to the submissions it commits.
- `logs.configure_logging`: readable lines by default, JSON with `--log-format json`, trace ids in both.

See docs/observability.md.
"""
