{{/* Names, labels and shared fragments. Every resource name is built here. */}}

{{- define "chain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "chain.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "<fullname>-<component>", e.g. include "chain.component" (dict "ctx" . "c" "node") */}}
{{- define "chain.component" -}}
{{- printf "%s-%s" (include "chain.fullname" .ctx) .c | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- define "chain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "chain.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .c }}
{{- end -}}

{{- define "chain.labels" -}}
{{ include "chain.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: chain
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The labels of a StatefulSet's pod template (nodes, etcd): without the chart and app versions, which change
with every release and would change the template (a new revision: every pod replaced) for nothing. */}}
{{- define "chain.podLabels" -}}
{{ include "chain.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: chain
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "chain.annotations" -}}
{{- with .Values.commonAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The chain image (node, gateway and operator share it). */}}
{{- define "chain.image" -}}
{{- $repo := printf "%s/%s" .Values.image.registry .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (include "chain.version" .) -}}
{{- end -}}
{{- end -}}

{{- define "chain.version" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{/* Every pod of the chart: global.imagePullSecrets and image.pullSecrets (_images.tpl). */}}
{{- define "chain.imagePullSecrets" -}}
{{- with include "chain.pullSecretNames" . | fromJsonArray }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "chain.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext -}}
{{- end -}}

{{- define "chain.containerSecurityContext" -}}
{{- toYaml .Values.containerSecurityContext -}}
{{- end -}}

{{- define "chain.adminSecretName" -}}
{{- default (include "chain.component" (dict "ctx" . "c" "admin")) .Values.adminToken.existingSecret -}}
{{- end -}}

{{/* TLS Secret names live in _tls.tpl: chain.tls.secret (one per component), chain.tls.edgeSecret (Envoy's public
listener: tls.crt, tls.key), chain.tls.caSecret (ca.crt: the cluster CA, what Envoy trusts when it dials the
nodes). Each Secret has tls.crt, tls.key and ca.crt and is mounted as files, never read into the environment. */}}

{{- define "chain.headlessService" -}}
{{- include "chain.component" (dict "ctx" . "c" "node-headless") -}}
{{- end -}}

{{/* Redis URL the gateways use: in-chart, external, or none (in-process fan-out). */}}
{{- define "chain.redisUrl" -}}
{{- if .Values.redis.enabled -}}
{{- printf "%s://%s:%d/0" (ternary "rediss" "redis" (.Values.tls.enabled | default false)) (include "chain.component" (dict "ctx" . "c" "redis")) (int .Values.redis.port) -}}
{{- else -}}
{{- .Values.redis.externalUrl -}}
{{- end -}}
{{- end -}}

{{/* The in-chart etcd's URL scheme: https with TLS on (client and peer listeners, client certificates required). */}}
{{- define "chain.etcdScheme" -}}
{{- ternary "https" "http" (.Values.tls.enabled | default false) -}}
{{- end -}}

{{/* The Secret of the Redis password (key redis.auth.secretKey). */}}
{{- define "chain.redisAuthSecret" -}}
{{- default (include "chain.component" (dict "ctx" . "c" "redis-auth")) .Values.redis.auth.existingSecret -}}
{{- end -}}

{{/* etcd client URLs for --etcd-endpoints. */}}
{{- define "chain.etcdEndpoints" -}}
{{- if .Values.etcd.enabled -}}
{{- $fullname := include "chain.component" (dict "ctx" . "c" "etcd") -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.etcd.replicaCount) -}}
{{- $urls = append $urls (printf "%s://%s-%d.%s-headless.%s.svc:%d" (include "chain.etcdScheme" $) $fullname $i $fullname $.Release.Namespace (int $.Values.etcd.ports.client)) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else -}}
{{- join "," .Values.etcd.externalEndpoints -}}
{{- end -}}
{{- end -}}

{{/* OpenTelemetry exporter settings shared by node and gateway. */}}
{{- define "chain.otelEnv" -}}
{{- if .Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.otel.endpoint | quote }}
{{- if hasPrefix "https://" .Values.otel.endpoint }}
{{- if and .Values.tls.enabled .Values.otel.trustClusterCA }}
- name: OTEL_EXPORTER_OTLP_CERTIFICATE  # the collector's certificate chains to the cluster CA
  value: {{ include "chain.tls.ca" . }}
{{- end }}
{{- else }}
- name: OTEL_EXPORTER_OTLP_INSECURE
  value: {{ .Values.otel.insecure | quote }}
{{- end }}
- name: OTEL_TRACES_SAMPLER
  value: {{ .Values.otel.tracesSampler | quote }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ .Values.otel.tracesSamplerArg | quote }}
{{- end }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ printf "k8s.namespace.name=%s,k8s.pod.name=$(POD_NAME),service.version=%s%s" .Release.Namespace (include "chain.version" .) (ternary (printf ",%s" .Values.otel.resourceAttributes) "" (ne .Values.otel.resourceAttributes "")) | quote }}
{{- end -}}

{{/* Validation of value combinations the schema cannot express. */}}
{{- define "chain.validate" -}}
{{- if and (gt (int .Values.node.replicaCount) 1) (ne .Values.node.orderer "etcd") -}}
{{- fail "node.replicaCount > 1 needs node.orderer=etcd (solo nodes would be independent chains)" -}}
{{- end -}}
{{- if and (eq .Values.node.orderer "etcd") (not .Values.etcd.enabled) (empty .Values.etcd.externalEndpoints) -}}
{{- fail "node.orderer=etcd needs etcd.enabled=true or etcd.externalEndpoints" -}}
{{- end -}}
{{- if and (ne .Values.node.network "devnet") (empty .Values.node.genesis) -}}
{{- fail (printf "node.network=%s needs node.genesis" .Values.node.network) -}}
{{- end -}}
{{- if and .Values.gitOps (not .Values.adminToken.existingSecret) -}}
{{- fail "gitOps=true needs adminToken.existingSecret (a Secret you manage, e.g. sealed or external): without it every render generates a new admin token" -}}
{{- end -}}
{{- include "chain.tls.validate" . -}}
{{- if .Values.envoy.enabled -}}
{{- $hc := .Values.envoy.healthCheck -}}
{{- $window := addf (mulf (int $hc.unhealthyThreshold) (include "chain.seconds" $hc.interval | float64)) (include "chain.seconds" $hc.timeout | float64) -}}
{{- if le (float64 .Values.node.drainSeconds) $window -}}
{{- fail (printf "node.drainSeconds (%v) must exceed Envoy's ejection window of %vs (envoy.healthCheck: unhealthyThreshold x interval + timeout): a draining node would close before Envoy stops sending to it" .Values.node.drainSeconds $window) -}}
{{- end -}}
{{- $e := .Values.envoy -}}
{{- if le (int $e.terminationGracePeriodSeconds) (add (int $e.drain.ejectSeconds) (int $e.drain.seconds)) -}}
{{- fail (printf "envoy.terminationGracePeriodSeconds (%v) must exceed envoy.drain.ejectSeconds + envoy.drain.seconds (%v): the kubelet would kill Envoy inside its preStop drain" $e.terminationGracePeriodSeconds (add (int $e.drain.ejectSeconds) (int $e.drain.seconds))) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The node container image: the chart's. Helm and a GitOps tool may change it (or anything else of the pod
template): the StatefulSet holds every pod (chain.nodeRollingUpdate) until the operator releases it. */}}
{{- define "chain.nodeImage" -}}
{{- include "chain.image" . -}}
{{- end -}}

{{/* The node StatefulSet's rollingUpdate. With the operator: partition = replicas, in every render (helm upgrade,
helm template under gitOps, a first install), so no pod moves when the template changes until the operator lowers
the partition, one ordinal at a time after its gates pass (docs/deploy.md "Upgrades"). A render applied during a
rollout raises the partition back to replicas: that holds every pod again, and the operator lowers it to where it
was (the pods above are already at the new revision, so nothing is replaced by that) and carries on. Without the
operator: partition 0, the StatefulSet controller's own rolling update. */}}
{{- define "chain.nodeRollingUpdate" -}}
{{- printf "{partition: %d}" (ternary (int .Values.node.replicaCount) 0 .Values.operator.enabled) -}}
{{- end -}}

{{/* The read-replica StatefulSet's rollingUpdate: held the same way (partition = readReplicas.replicaCount with the
operator), released by the operator one replica at a time after the nodes (docs/deploy.md "Read replicas"). */}}
{{- define "chain.replicaRollingUpdate" -}}
{{- printf "{partition: %d}" (ternary (int .Values.readReplicas.replicaCount) 0 .Values.operator.enabled) -}}
{{- end -}}

{{/* NetworkPolicy peer: pods of one component of this release. */}}
{{- define "chain.peer" -}}
- podSelector:
    matchLabels:
      {{- include "chain.selectorLabels" . | nindent 6 }}
{{- end -}}

{{/* Pod spreading of a stateless component (envoy, gateway): the component's topologySpreadConstraints
value, or by default a soft spread over hosts and zones (ScheduleAnyway: a small cluster still schedules). */}}
{{- define "chain.topologySpread" -}}
{{- $values := index .ctx.Values .c -}}
{{- $constraints := $values.topologySpreadConstraints -}}
{{- if not $constraints -}}
{{- range $key := list "kubernetes.io/hostname" "topology.kubernetes.io/zone" -}}
{{- $constraints = append $constraints (dict "maxSkew" 1 "topologyKey" $key "whenUnsatisfiable" "ScheduleAnyway" "labelSelector" (dict "matchLabels" (include "chain.selectorLabels" $ | fromYaml))) -}}
{{- end -}}
{{- end -}}
topologySpreadConstraints:
{{- toYaml $constraints | nindent 2 }}
{{- end -}}

{{/* An Envoy duration ("5s", "500ms", "1m") in seconds. */}}
{{- define "chain.seconds" -}}
{{- $d := toString . -}}
{{- if hasSuffix "ms" $d -}}{{- divf (trimSuffix "ms" $d | float64) 1000 -}}
{{- else if hasSuffix "s" $d -}}{{- trimSuffix "s" $d | float64 -}}
{{- else if hasSuffix "m" $d -}}{{- mulf (trimSuffix "m" $d | float64) 60 -}}
{{- else if hasSuffix "h" $d -}}{{- mulf (trimSuffix "h" $d | float64) 3600 -}}
{{- else -}}{{- fail (printf "%s is no duration" $d) -}}
{{- end -}}
{{- end -}}

{{/* The object store of the backup CronJob's steps (chain-node backup reads CHAIN_BACKUP_*; the credentials
come from backup.existingSecret as AWS_* variables, never from values). */}}
{{- define "chain.backupEnv" -}}
{{- $b := .Values.backup -}}
- {name: CHAIN_BACKUP_URL, value: {{ printf "s3://%s" (trimSuffix "/" (printf "%s/%s" $b.bucket (trimAll "/" $b.prefix))) | quote }}}
- {name: CHAIN_BACKUP_S3_ENDPOINT, value: {{ $b.endpoint | quote }}}
- {name: CHAIN_BACKUP_S3_REGION, value: {{ $b.region | quote }}}
{{- end -}}

{{/* A Kubernetes quantity ("2Gi", "512Mi", "1G", "1500000") in bytes; 0 when empty. */}}
{{- define "chain.bytes" -}}
{{- $q := toString . -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 -}}
{{- $out := 0 -}}
{{- if $q -}}
{{- $out = $q | float64 -}}
{{- range $suffix, $factor := $units -}}
{{- if hasSuffix $suffix $q -}}{{- $out = mulf (trimSuffix $suffix $q | float64) $factor -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- $out | int64 -}}
{{- end -}}

{{/* Server streams a node holds open at once (--max-streams): node.streams.max, or the share of the node's
memory limit set aside for streams divided by what one stream may hold (docs/deploy.md "Stream caps"). */}}
{{- define "chain.node.maxStreams" -}}
{{- $s := .Values.node.streams -}}
{{- $limit := include "chain.bytes" ((.Values.node.resources.limits | default dict).memory | default "") | int64 -}}
{{- if $s.max -}}{{ $s.max }}
{{- else if not $limit -}}4096
{{- else -}}{{ max 1 (divf (mulf $limit $s.memoryShare) $s.bytesPerStream | floor | int64) }}
{{- end -}}
{{- end -}}

{{/* Open HTTP connections a gateway process accepts (--max-connections): gateway.sse.maxConnections, or the share
of its memory limit for SSE clients divided by what one client may hold: its buffer (--sse-max-buffer-bytes) and
the connection's own overhead (docs/deploy.md "Stream caps"). */}}
{{- define "chain.gateway.maxConnections" -}}
{{- $s := .Values.gateway.sse -}}
{{- $limit := include "chain.bytes" ((.Values.gateway.resources.limits | default dict).memory | default "") | int64 -}}
{{- if $s.maxConnections -}}{{ $s.maxConnections }}
{{- else if not $limit -}}1024
{{- else -}}{{ max 1 (divf (mulf $limit $s.memoryShare) (add $s.maxBufferBytes $s.overheadBytes) | floor | int64) }}
{{- end -}}
{{- end -}}
