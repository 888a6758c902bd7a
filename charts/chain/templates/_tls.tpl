{{/* TLS of every hop (docs/deploy.md "TLS"). Each component has one Secret with tls.crt, tls.key and ca.crt
(the cluster CA), mounted as files at chain.tls.dir; nothing of it reaches an environment variable. */}}

{{/* Where the certificates come from: off (tls.enabled=false), certManager (tls.certManager.issuerRef.name),
existing (gitOps without cert-manager: tls.existingSecrets), generated (a CA the chart makes once, kept). */}}
{{- define "chain.tls.source" -}}
{{- if not .Values.tls.enabled -}}off
{{- else if .Values.tls.certManager.issuerRef.name -}}certManager
{{- else if .Values.gitOps -}}existing
{{- else -}}generated
{{- end -}}
{{- end -}}

{{/* "true" when TLS is on (for `if`: an empty string is false). */}}
{{- define "chain.tls.on" -}}
{{- if .Values.tls.enabled -}}true{{- end -}}
{{- end -}}

{{/* The Secret of one component's certificate: include "chain.tls.secret" (dict "ctx" . "c" "node").
Components: node, gateway, operator, backup, envoy, etcd, etcdClient, redis. A name in tls.existingSecrets wins. */}}
{{- define "chain.tls.secret" -}}
{{- $existing := index .ctx.Values.tls.existingSecrets .c | default "" -}}
{{- if $existing -}}{{ $existing }}
{{- else -}}{{ include "chain.component" (dict "ctx" .ctx "c" (printf "%s-tls" (kebabcase .c))) }}
{{- end -}}
{{- end -}}

{{/* Envoy's public edge listener certificate (keys tls.crt, tls.key; ca.crt is the cluster CA unless
tls.edge.issuerRef names another issuer). */}}
{{- define "chain.tls.edgeSecret" -}}
{{- include "chain.tls.secret" (dict "ctx" . "c" "envoy") -}}
{{- end -}}

{{/* A Secret whose key ca.crt is the cluster CA: what Envoy trusts when it dials the nodes. Mount only that key
(items: [{key: ca.crt, path: ca.crt}]): under cert-manager it is by default the node Certificate's Secret. */}}
{{- define "chain.tls.caSecret" -}}
{{- $t := .Values.tls -}}
{{- if $t.existingSecrets.ca -}}{{ $t.existingSecrets.ca }}
{{- else if eq (include "chain.tls.source" .) "certManager" -}}
{{- default (include "chain.tls.secret" (dict "ctx" . "c" "node")) $t.certManager.caSecret -}}
{{- else -}}{{ include "chain.component" (dict "ctx" . "c" "ca") }}
{{- end -}}
{{- end -}}

{{/* The generated CA's key pair (generated mode only; mounted by no pod). */}}
{{- define "chain.tls.caKeySecret" -}}
{{- include "chain.component" (dict "ctx" . "c" "ca-key") -}}
{{- end -}}

{{/* Where a component's Secret is mounted, and its files. */}}
{{- define "chain.tls.dir" -}}/etc/chain/tls{{- end -}}
{{- define "chain.tls.cert" -}}{{ include "chain.tls.dir" . }}/tls.crt{{- end -}}
{{- define "chain.tls.key" -}}{{ include "chain.tls.dir" . }}/tls.key{{- end -}}
{{- define "chain.tls.ca" -}}{{ include "chain.tls.dir" . }}/ca.crt{{- end -}}
{{- define "chain.tls.etcdDir" -}}/etc/chain/etcd-tls{{- end -}}

{{/* A secret volume: include "chain.tls.volume" (dict "name" "tls" "secret" NAME). Group-readable (fsGroup). */}}
{{- define "chain.tls.volume" -}}
- name: {{ .name }}
  secret:
    secretName: {{ .secret }}
    defaultMode: 0440
{{- end -}}

{{/* "name.ns", "name.ns.svc", "name.ns.svc.<domain>" and the bare name of one Service. */}}
{{- define "chain.tls.serviceNames" -}}
{{- $ns := .ctx.Release.Namespace -}}
{{- $d := .ctx.Values.tls.clusterDomain -}}
{{- list .svc (printf "%s.%s" .svc $ns) (printf "%s.%s.svc" .svc $ns) (printf "%s.%s.svc.%s" .svc $ns $d) | toJson -}}
{{- end -}}

{{/* Pod DNS names under a headless Service: each pod of a StatefulSet of `n` replicas, and the wildcard. */}}
{{- define "chain.tls.podNames" -}}
{{- $ns := .ctx.Release.Namespace -}}
{{- $d := .ctx.Values.tls.clusterDomain -}}
{{- $out := list (printf "*.%s.%s.svc" .headless $ns) (printf "*.%s.%s.svc.%s" .headless $ns $d) -}}
{{- range $i := until (int .n) -}}
{{- $out = append $out (printf "%s-%d.%s.%s.svc" $.sts $i $.headless $ns) -}}
{{- $out = append $out (printf "%s-%d.%s.%s.svc.%s" $.sts $i $.headless $ns $d) -}}
{{- end -}}
{{- $out | toJson -}}
{{- end -}}

{{/* Every certificate this release needs (JSON list): component, common name, DNS names, IPs, usages.
The generated and the cert-manager templates both render from it. */}}
{{- define "chain.tls.leaves" -}}
{{- $v := .Values -}}
{{- $full := include "chain.fullname" . -}}
{{- $server := list "digital signature" "key encipherment" "server auth" -}}
{{- $client := list "digital signature" "key encipherment" "client auth" -}}
{{- $both := list "digital signature" "key encipherment" "server auth" "client auth" -}}
{{- $local := list "localhost" -}}
{{- $loopback := list "127.0.0.1" "::1" -}}
{{- $leaves := list -}}
{{- /* node members: pods under the headless Service, the client Services, localhost (probes, sidecars) */ -}}
{{- $node := include "chain.component" (dict "ctx" . "c" "node") -}}
{{- $headless := include "chain.headlessService" . -}}
{{- $dns := include "chain.tls.podNames" (dict "ctx" . "sts" $node "headless" $headless "n" $v.node.replicaCount) | fromJsonArray -}}
{{- $services := list $node $headless (include "chain.component" (dict "ctx" . "c" "gateway-nodes")) -}}
{{- if $v.readReplicas.enabled -}}{{- /* the read replicas serve with the nodes' certificate */ -}}
{{- $services = append $services (include "chain.component" (dict "ctx" . "c" "replica")) -}}
{{- end -}}
{{- range $svc := $services -}}
{{- $dns = concat $dns (include "chain.tls.serviceNames" (dict "ctx" $ "svc" $svc) | fromJsonArray) -}}
{{- end -}}
{{- $leaves = append $leaves (dict "c" "node" "cn" $node "dns" (concat $dns $local) "ips" $loopback "usages" $both) -}}
{{- if $v.gateway.enabled -}}
{{- /* its HTTP listener, and the client certificate for the nodes' internal listener */ -}}
{{- $gw := include "chain.component" (dict "ctx" . "c" "gateway") -}}
{{- $dns := concat (include "chain.tls.serviceNames" (dict "ctx" . "svc" $gw) | fromJsonArray) $local -}}
{{- $leaves = append $leaves (dict "c" "gateway" "cn" $gw "dns" $dns "ips" $loopback "usages" $both) -}}
{{- end -}}
{{- if $v.operator.enabled -}}
{{- $leaves = append $leaves (dict "c" "operator" "cn" (printf "%s-operator" $full) "dns" list "ips" list "usages" $client) -}}
{{- end -}}
{{- if $v.backup.enabled -}}
{{- $leaves = append $leaves (dict "c" "backup" "cn" (printf "%s-backup" $full) "dns" list "ips" list "usages" $client) -}}
{{- end -}}
{{- if $v.envoy.enabled -}}
{{- $envoy := include "chain.component" (dict "ctx" . "c" "envoy") -}}
{{- $dns := concat (include "chain.tls.serviceNames" (dict "ctx" . "svc" $envoy) | fromJsonArray) $v.tls.edge.dnsNames $local -}}
{{- $leaves = append $leaves (dict "c" "envoy" "cn" $envoy "dns" $dns "ips" $loopback "usages" $server "edge" true) -}}
{{- end -}}
{{- if eq $v.node.orderer "etcd" -}}
{{- if $v.etcd.enabled -}}
{{- $etcd := include "chain.component" (dict "ctx" . "c" "etcd") -}}
{{- $eh := printf "%s-headless" $etcd -}}
{{- $dns := include "chain.tls.podNames" (dict "ctx" . "sts" $etcd "headless" $eh "n" $v.etcd.replicaCount) | fromJsonArray -}}
{{- $dns = concat $dns (include "chain.tls.serviceNames" (dict "ctx" . "svc" $eh) | fromJsonArray) $local -}}
{{- $leaves = append $leaves (dict "c" "etcd" "cn" $etcd "dns" $dns "ips" $loopback "usages" $both) -}}
{{- end -}}
{{- if or $v.etcd.enabled $v.tls.existingSecrets.etcdClient -}}
{{- $leaves = append $leaves (dict "c" "etcdClient" "cn" (printf "%s-etcd-client" $full) "dns" list "ips" list "usages" $client) -}}
{{- end -}}
{{- end -}}
{{- if $v.redis.enabled -}}
{{- $redis := include "chain.component" (dict "ctx" . "c" "redis") -}}
{{- $dns := concat (include "chain.tls.serviceNames" (dict "ctx" . "svc" $redis) | fromJsonArray) $local -}}
{{- $leaves = append $leaves (dict "c" "redis" "cn" $redis "dns" $dns "ips" $loopback "usages" $server) -}}
{{- end -}}
{{- $leaves | toJson -}}
{{- end -}}

{{/* TLS settings the schema cannot check. */}}
{{- define "chain.tls.validate" -}}
{{- if eq (include "chain.tls.source" .) "existing" -}}
{{- $missing := list -}}
{{- range $leaf := include "chain.tls.leaves" . | fromJsonArray -}}
{{- if not (index $.Values.tls.existingSecrets $leaf.c) -}}{{- $missing = append $missing $leaf.c -}}{{- end -}}
{{- end -}}
{{- if and .Values.envoy.enabled (not .Values.tls.existingSecrets.ca) -}}{{- $missing = append $missing "ca" -}}{{- end -}}
{{- if $missing -}}
{{- fail (printf "gitOps=true with tls.enabled and no tls.certManager.issuerRef needs Secrets you manage (keys tls.crt, tls.key, ca.crt): set tls.existingSecrets.%s (docs/deploy.md \"TLS\")" (join ", tls.existingSecrets." $missing)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" when the nodes talk to etcd over TLS: the in-chart etcd with TLS on, or an external etcd with
tls.existingSecrets.etcdClient. */}}
{{- define "chain.etcdTLS" -}}
{{- if and .Values.tls.enabled (eq .Values.node.orderer "etcd") (or .Values.etcd.enabled .Values.tls.existingSecrets.etcdClient) -}}true{{- end -}}
{{- end -}}

{{/* The node's TLS flags (paths only: the files come from the mounted Secrets). */}}
{{- define "chain.node.tlsEnv" -}}
{{- if .Values.tls.enabled -}}
- {name: CHAIN_NODE_TLS_CERT, value: {{ include "chain.tls.cert" . }}}
- {name: CHAIN_NODE_TLS_KEY, value: {{ include "chain.tls.key" . }}}
- {name: CHAIN_NODE_TLS_CLIENT_CA, value: {{ include "chain.tls.ca" . }}}
{{- if include "chain.etcdTLS" . }}
- {name: CHAIN_NODE_ETCD_CA_FILE, value: {{ include "chain.tls.etcdDir" . }}/ca.crt}
- {name: CHAIN_NODE_ETCD_CERT, value: {{ include "chain.tls.etcdDir" . }}/tls.crt}
- {name: CHAIN_NODE_ETCD_KEY, value: {{ include "chain.tls.etcdDir" . }}/tls.key}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "chain.node.tlsMounts" -}}
{{- if .Values.tls.enabled -}}
- {name: tls, mountPath: {{ include "chain.tls.dir" . }}, readOnly: true}
{{- if include "chain.etcdTLS" . }}
- {name: etcd-tls, mountPath: {{ include "chain.tls.etcdDir" . }}, readOnly: true}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A node probe. The kubelet's grpc probe speaks no TLS, so with TLS on the probe runs files/grpc-health-probe.py
in the container (the image's Python and grpcio): a health check on localhost over TLS, trusting the cluster CA. */}}
{{- define "chain.node.probe" -}}
{{- $v := .ctx.Values -}}
{{- if $v.tls.enabled -}}
exec:
  command: ["python", "/etc/chain/probe/grpc-health-probe.py", "localhost:{{ $v.node.ports.grpc }}", {{ .service | quote }}, {{ include "chain.tls.ca" .ctx | quote }}]
{{- else -}}
grpc: {port: {{ $v.node.ports.grpc }}, service: {{ .service }}}
{{- end -}}
{{- end -}}

{{/* etcdctl's TLS flags (the etcd-client certificate mounted at .dir); nothing with TLS off. */}}
{{- define "chain.etcdctlTLS" -}}
{{- if .ctx.Values.tls.enabled -}}
- --cacert={{ .dir }}/ca.crt
- --cert={{ .dir }}/tls.crt
- --key={{ .dir }}/tls.key
{{- end -}}
{{- end -}}
