{{/* The worker's ServiceAccount name (also of its ClusterRole and bindings). */}}
{{- define "svm.migrator" -}}
{{ .Values.namePrefix }}-migrator
{{- end -}}

{{/* The user name the API server gives the worker: admission policies and FlowSchemas match it. */}}
{{- define "svm.migratorUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "svm.migrator" . }}
{{- end -}}

{{/* The identity the managedFields rewrite writes as (templates/managed-fields.yaml), as the API server names it. */}}
{{- define "svm.managedFieldsUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ .Values.namePrefix }}-managed-fields
{{- end -}}

{{- define "svm.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The Temporal settings, shared by the worker and the pre-upgrade Job (env entries). */}}
{{- define "svm.temporalEnv" -}}
- name: TEMPORAL_ADDRESS
  value: {{ required "temporal.address (host:port of the Temporal frontend) is required" .Values.temporal.address }}
- name: TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace }}
- name: TEMPORAL_TASK_QUEUE
  value: {{ .Values.temporal.taskQueue }}
- name: SVM_CLUSTER
  value: {{ .Values.cluster | quote }}
{{- if or .Values.temporal.tls.enabled .Values.temporal.tls.clientCertSecret .Values.temporal.tls.caSecret }}
- name: TEMPORAL_TLS
  value: "true"
{{- end }}
{{- if .Values.temporal.tls.clientCertSecret }}
- name: TEMPORAL_TLS_CLIENT_CERT_PATH
  value: /etc/svm/temporal-tls/tls.crt
- name: TEMPORAL_TLS_CLIENT_KEY_PATH
  value: /etc/svm/temporal-tls/tls.key
{{- end }}
{{- if .Values.temporal.tls.caSecret }}
- name: TEMPORAL_TLS_SERVER_CA_CERT_PATH
  value: /etc/svm/temporal-ca/ca.crt
{{- end }}
{{- with .Values.temporal.tls.serverName }}
- name: TEMPORAL_TLS_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- if .Values.temporal.apiKeySecret.name }}
- name: TEMPORAL_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.temporal.apiKeySecret.name }}
      key: {{ .Values.temporal.apiKeySecret.key }}
{{- end }}
{{- end -}}
