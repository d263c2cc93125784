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

{{/* The image: repository@digest when image.digest is set (the tag is then ignored), else repository:tag. */}}
{{- define "svm.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The placeholder repository values.yaml ships: NOTES.txt warns while it is in use. */}}
{{- define "svm.placeholderImage" -}}
ghcr.io/example/svm
{{- end -}}

{{/* helm.sh/chart: <name>-<version>, as `helm create` spells it. */}}
{{- define "svm.chart" -}}
{{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/*
The labels of every object: the Kubernetes recommended labels and helm.sh/chart.
Context: (dict "root" $ "component" "worker").
*/}}
{{- define "svm.labels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Values.image.tag | default .root.Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/component: {{ .component }}
helm.sh/chart: {{ include "svm.chart" .root }}
{{- end -}}

{{/*
The labels a selector matches: the worker's Pods by name and component. Kept as the first chart (and deploy/)
had them, without app.kubernetes.io/instance: a Deployment's selector is immutable, so adding a label to it would
make `helm upgrade` from an earlier release fail. (One release per namespace: the worker's leader Lease is
per namespace anyway.) Context: (dict "root" $ "component" "worker").
*/}}
{{- define "svm.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The entries of a Pod's imagePullSecrets (values.yaml imagePullSecrets: names, or {name: ...} objects). */}}
{{- define "svm.imagePullSecretList" -}}
{{- range .Values.imagePullSecrets }}
- name: {{ if kindIs "string" . }}{{ . }}{{ else }}{{ .name }}{{ end }}
{{- end }}
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
{{- $files := dict }}
{{- if .Values.temporal.credentialsVolume }}
{{- $files = .Values.temporal.credentialsFiles | default dict }}
{{- if and $files.clientCert .Values.temporal.tls.clientCertSecret }}
{{- fail "temporal.credentialsVolume (credentialsFiles.clientCert) and temporal.tls.clientCertSecret both give a client certificate: give one (credentialsFiles.clientCert empty leaves the Secret's)" }}
{{- end }}
{{- if and $files.profile .Values.temporal.apiKeySecret.name }}
{{- fail "temporal.credentialsVolume (credentialsFiles.profile) and temporal.apiKeySecret both give a credential: give one" }}
{{- end }}
{{- end }}
{{- if or .Values.temporal.tls.enabled .Values.temporal.tls.clientCertSecret .Values.temporal.tls.caSecret $files.clientCert $files.ca }}
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
{{- if and $files.clientCert $files.clientKey }}
- name: TEMPORAL_TLS_CLIENT_CERT_PATH
  value: /etc/svm/temporal-credentials/{{ $files.clientCert }}
- name: TEMPORAL_TLS_CLIENT_KEY_PATH
  value: /etc/svm/temporal-credentials/{{ $files.clientKey }}
{{- end }}
{{- with $files.ca }}
- name: TEMPORAL_TLS_SERVER_CA_CERT_PATH
  value: /etc/svm/temporal-credentials/{{ . }}
{{- end }}
{{- with $files.profile }}
- name: TEMPORAL_CONFIG_FILE
  value: /etc/svm/temporal-credentials/{{ . }}
{{- end }}
{{- if .Values.temporal.apiKeySecret.name }}
- name: TEMPORAL_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.temporal.apiKeySecret.name }}
      key: {{ .Values.temporal.apiKeySecret.key }}
{{- end }}
{{- end -}}

{{/* The Secrets that hold the worker's Temporal credential, as SVM_TEMPORAL_CREDENTIAL_SECRETS reads them (the worker
says when its own token can read them). A CA is no credential. */}}
{{- define "svm.credentialSecrets" -}}
{{- $s := list }}
{{- with .Values.temporal.apiKeySecret.name }}{{ $s = append $s (printf "%s/%s" $.Release.Namespace .) }}{{ end }}
{{- with .Values.temporal.tls.clientCertSecret }}{{ $s = append $s (printf "%s/%s" $.Release.Namespace .) }}{{ end }}
{{- join "," $s }}
{{- end -}}

{{/* The volume of temporal.credentialsVolume and its mount (context: the root). */}}
{{- define "svm.credentialsMount" -}}
{{- if .Values.temporal.credentialsVolume }}
- name: temporal-credentials
  mountPath: /etc/svm/temporal-credentials
  readOnly: true
{{- end }}
{{- end -}}
{{- define "svm.credentialsVolume" -}}
{{- with .Values.temporal.credentialsVolume }}
# The Temporal credential as files no Kubernetes read returns (values.yaml temporal.credentialsVolume).
- name: temporal-credentials
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
