{{/* Where the etcd backup CronJob puts its snapshots: "s3" (the chain's backup bucket) or "volume". */}}
{{- define "chain.etcdBackupTo" -}}
{{- $to := .Values.etcd.backup.to | default "" -}}
{{- if eq $to "" -}}
{{- ternary "s3" "volume" (and .Values.backup.enabled (ne .Values.backup.bucket "")) -}}
{{- else if eq $to "s3" -}}
{{- if not .Values.backup.bucket -}}
{{- fail "etcd.backup.to=s3 needs backup.bucket (the chain's backup bucket; its endpoint, region and existingSecret are used too)" -}}
{{- end -}}
s3
{{- else -}}
{{- $to -}}
{{- end -}}
{{- end -}}

{{/* "true" when the operator runs the in-chart etcd's membership (etcd_cluster.py): members take their initial
cluster and state from the ConfigMap it keeps, and it scales the StatefulSet. */}}
{{- define "chain.etcdByOperator" -}}
{{- if and .Values.etcd.enabled (eq .Values.node.orderer "etcd") .Values.operator.enabled -}}true{{- end -}}
{{- end -}}

{{/* The ConfigMap a starting etcd member reads its initial cluster and state from. */}}
{{- define "chain.etcdMembers" -}}
{{- include "chain.component" (dict "ctx" . "c" "etcd-members") -}}
{{- end -}}
