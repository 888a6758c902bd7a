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
