{{/* Where the stateful pods (nodes, read replicas, etcd members) run and how much they weigh when the cluster is
full: include "chain.placement" (dict "ctx" . "c" "node" "values" .Values.node)

- priorityClassName: the component's value ("" = the cluster's default priority);
- affinity: the component's affinity value when set; else anti-affinity over hosts, `antiAffinity: soft`
  (preferred: a small cluster still schedules every pod) or `hard` (required: two members never share a host,
  so a host lost never takes two of them; a pod that finds no free host stays Pending);
- topologySpreadConstraints: the component's value when set; else a spread over zones (maxSkew 1,
  ScheduleAnyway: a single-zone cluster still schedules). */}}
{{- define "chain.placement" -}}
{{- $v := .values -}}
{{- $match := dict "matchLabels" (include "chain.selectorLabels" (dict "ctx" .ctx "c" .c) | fromYaml) -}}
{{- with $v.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
affinity:
{{- if $v.affinity }}
  {{- toYaml $v.affinity | nindent 2 }}
{{- else if eq ($v.antiAffinity | default "soft") "hard" }}
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      {{- toYaml (list (dict "topologyKey" "kubernetes.io/hostname" "labelSelector" $match)) | nindent 6 }}
{{- else }}
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      {{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" $match }}
      {{- toYaml (list (dict "weight" 100 "podAffinityTerm" $term)) | nindent 6 }}
{{- end }}
topologySpreadConstraints:
{{- if $v.topologySpreadConstraints }}
  {{- toYaml $v.topologySpreadConstraints | nindent 2 }}
{{- else }}
  {{- toYaml (list (dict "maxSkew" 1 "topologyKey" "topology.kubernetes.io/zone" "whenUnsatisfiable" "ScheduleAnyway" "labelSelector" $match)) | nindent 2 }}
{{- end }}
{{- end -}}
