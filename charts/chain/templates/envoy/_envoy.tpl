{{/* Envoy's route to the nodes (every public route; envoy/envoy.yaml's &node_route). No overall deadline: unary
calls carry grpc-timeout, streams are open-ended. */}}
{{- define "chain.envoy.nodeRoute" -}}
cluster: chain_node
timeout: 0s
idle_timeout: 3600s
max_stream_duration:
  grpc_timeout_header_max: {{ .Values.envoy.maxGrpcTimeout }}
retry_policy:
  retry_on: connect-failure,refused-stream,unavailable
  num_retries: 2
{{- end -}}
