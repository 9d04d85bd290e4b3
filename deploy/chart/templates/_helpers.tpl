{{/* The labels Helm adds to every object the chart makes, beside those of deploy/. */}}
{{- define "ifo.labels" -}}
app.kubernetes.io/name: ifo-apiserver
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/*
The objects of one manifest of deploy/ or apiservice/ (files/ links to them: one source for the
kustomize install and the chart), as a JSON list, made the release's: the namespace ifo-system,
wherever it is named (objects, RBAC subjects, the Services the registrations point at), is the
release's namespace, and Helm's labels are added. Called with (dict "root" $ "file" PATH).
*/}}
{{- define "ifo.objects" -}}
{{- $root := .root -}}
{{- $ns := $root.Release.Namespace -}}
{{- $labels := include "ifo.labels" $root | fromYaml -}}
{{- $text := $root.Files.Get .file -}}
{{- if not $text }}{{ fail (printf "the chart has no file %s" .file) }}{{ end -}}
{{- $objects := list -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" $text -1 -}}
{{- $o := fromYaml $doc -}}
{{- if and $o $o.kind -}}
{{- if eq ($o.metadata.namespace | default "") "ifo-system" -}}
{{- $_ := set $o.metadata "namespace" $ns -}}
{{- end -}}
{{- $_ := set $o.metadata "labels" (merge (dict) $labels ($o.metadata.labels | default dict)) -}}
{{- range $o.subjects | default list -}}
{{- if eq (.namespace | default "") "ifo-system" }}{{ $_ := set . "namespace" $ns }}{{ end -}}
{{- end -}}
{{- if and $o.spec (kindIs "map" $o.spec) $o.spec.service -}}
{{- $_ := set $o.spec.service "namespace" $ns -}}
{{- end -}}
{{- range $o.webhooks | default list -}}
{{- $_ := set .clientConfig.service "namespace" $ns -}}
{{- end -}}
{{- $objects = append $objects $o -}}
{{- end -}}
{{- end -}}
{{- toJson $objects -}}
{{- end }}

{{/* The objects of a manifest (as "ifo.objects"), written out, but those of the kinds in "skip". */}}
{{- define "ifo.manifest" -}}
{{- $skip := .skip | default list -}}
{{- range $o := include "ifo.objects" . | fromJsonArray }}
{{- if not (has $o.kind $skip) }}
---
{{ toYaml $o }}
{{- end }}
{{- end }}
{{- end }}

{{/* The server's image. */}}
{{- define "ifo.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The Secret of the serving certificate: the user's own with certificates.source secret. */}}
{{- define "ifo.tlsSecret" -}}
{{- if eq .Values.certificates.source "secret" }}{{ .Values.certificates.secret.name }}{{ else }}ifo-apiserver-tls{{ end }}
{{- end }}

{{/* The DNS names of the Services the serving certificate is for (the guard's included). */}}
{{- define "ifo.dnsNames" -}}
{{- $ns := .Release.Namespace -}}
{{- $domain := .Values.clusterDomain -}}
{{- list (printf "ifo-apiserver.%s.svc" $ns) (printf "ifo-apiserver.%s.svc.%s" $ns $domain) (printf "ifo-guard.%s.svc" $ns) (printf "ifo-guard.%s.svc.%s" $ns $domain) | toJson -}}
{{- end }}
