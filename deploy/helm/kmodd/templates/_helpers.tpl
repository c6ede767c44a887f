{{/* Labels on every object; the component is passed as the argument. */}}
{{- define "kmodd.labels" -}}
app.kubernetes.io/name: kmodd
app.kubernetes.io/component: {{ . }}
{{- end }}

{{/* An image reference: repository@digest, or repository:tag without a digest. */}}
{{- define "kmodd.image" -}}
{{- if .digest -}}
{{ .repository }}@{{ .digest }}
{{- else -}}
{{ .repository }}:{{ required "an image needs a digest or a tag" .tag }}
{{- end -}}
{{- end }}
