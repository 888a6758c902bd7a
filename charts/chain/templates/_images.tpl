{{/* Images and pulling them: every image of the chart is named here, and every pod takes the same pull Secrets. */}}

{{/* One image reference from an image value ({registry, repository, tag, digest}): "registry/repository@digest"
when digest is set (the tag is then left out: the digest decides), else "registry/repository:tag".
include "chain.imageRef" (dict "image" .Values.redis.image) */}}
{{- define "chain.imageRef" -}}
{{- $i := .image -}}
{{- $repo := $i.repository -}}
{{- if $i.registry -}}{{- $repo = printf "%s/%s" $i.registry $i.repository -}}{{- end -}}
{{- if $i.digest -}}
{{- printf "%s@%s" $repo $i.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (toString (default $i.tag .tag)) -}}
{{- end -}}
{{- end -}}

{{- define "chain.envoyImage" -}}{{ include "chain.imageRef" (dict "image" .Values.envoy.image) }}{{- end -}}
{{- define "chain.redisImage" -}}{{ include "chain.imageRef" (dict "image" .Values.redis.image) }}{{- end -}}
{{- define "chain.etcdImage" -}}{{ include "chain.imageRef" (dict "image" .Values.etcd.image) }}{{- end -}}

{{/* The pull Secrets of every pod: global.imagePullSecrets (names, or {name: ...} as parent charts give them)
then image.pullSecrets, each name once (JSON list). */}}
{{- define "chain.pullSecretNames" -}}
{{- $names := list -}}
{{- $global := (.Values.global | default dict).imagePullSecrets | default list -}}
{{- range concat $global (.Values.image.pullSecrets | default list) -}}
{{- $name := "" -}}
{{- if kindIs "map" . -}}{{- $name = .name -}}{{- else -}}{{- $name = toString . -}}{{- end -}}
{{- if and $name (not (has $name $names)) -}}{{- $names = append $names $name -}}{{- end -}}
{{- end -}}
{{- $names | toJson -}}
{{- end -}}
