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

{{/* --exception-namespaces, which every controller that reads exceptions gets. */}}
{{- define "charter.exceptionNamespaces" -}}
--exception-namespaces={{ .Values.features.policyExceptions.namespace | default "$(POD_NAMESPACE)" }}
{{- end }}
