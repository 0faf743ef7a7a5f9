{{/*
The controllers, each its Deployment's component and ServiceAccount
(charter-<name>), with the key of its values.
*/}}
{{- define "charter.controllers" -}}
admission: admissionController
reports: reportsController
background: backgroundController
cleanup: cleanupController
gitsync: gitsyncController
{{- end }}

{{/* Labels of every object: config/manager's, and Helm's own. */}}
{{- define "charter.labels" -}}
app.kubernetes.io/name: charter
{{ include "charter.helmLabels" . }}
{{- end }}

{{/* The labels Helm's install adds to what config/ declares. */}}
{{- define "charter.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The labels selecting a controller's Pods. */}}
{{- define "charter.selectorLabels" -}}
app.kubernetes.io/name: charter
app.kubernetes.io/component: {{ . }}
{{- end }}

{{- define "charter.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The egress guard's flags (features.celHTTP, features.egress), which
every controller gets; nothing for the defaults. */}}
{{- define "charter.celHTTPArgs" -}}
{{- $h := .Values.features.celHTTP }}
{{- $args := list }}
{{- if kindIs "slice" $h.blocklist }}
{{- $args = append $args (printf "--cel-http-blocklist=%s" (join "," $h.blocklist)) }}
{{- end }}
{{- with $h.allowlist }}
{{- $args = append $args (printf "--cel-http-allowlist=%s" (join "," .)) }}
{{- end }}
{{- if $h.allowInNamespacedPolicies }}
{{- $args = append $args "--allow-http-in-namespaced-policies" }}
{{- end }}
{{- $e := .Values.features.egress }}
{{- with $e.allow }}
{{- $args = append $args (printf "--egress-allow=%s" (join "," .)) }}
{{- end }}
{{- with $e.maxResponseBytes }}
{{- $args = append $args (printf "--egress-max-response-bytes=%v" (int64 .)) }}
{{- end }}
{{- toYaml $args }}
{{- end }}

{{/* --exception-namespaces, which every controller that reads exceptions gets. */}}
{{- define "charter.exceptionNamespaces" -}}
--exception-namespaces={{ .Values.features.policyExceptions.namespace | default "$(POD_NAMESPACE)" }}
{{- end }}
