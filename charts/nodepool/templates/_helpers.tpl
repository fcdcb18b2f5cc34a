{{/*
The labels helm adds to every object's metadata; selectors and pod
templates stay those of the release manifest (a Deployment's selector cannot
change), so an install of nodepool.yaml can move to the chart.
*/}}
{{- define "nodepool.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The image both Deployments run: the digest wins over the tag. */}}
{{- define "nodepool.image" -}}
{{- $i := .Values.image -}}
{{- if $i.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" $i.digest) -}}
{{- fail (printf "image.digest %q is not sha256:<64 hex digits>" $i.digest) -}}
{{- end -}}
{{ $i.repository }}@{{ $i.digest }}
{{- else -}}
{{ $i.repository }}:{{ $i.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{- define "nodepool.pullPolicy" -}}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end }}

{{/* The payload server Service's cluster DNS name. */}}
{{- define "nodepool.payloadServerHost" -}}
nodepool-payload-server.{{ .Release.Namespace }}.svc
{{- end }}

{{/* The URL machines fetch their payload from. */}}
{{- define "nodepool.payloadServerURL" -}}
{{- if .Values.payloadServer.url -}}
{{- if not (hasPrefix "https://" .Values.payloadServer.url) -}}
{{- fail (printf "payloadServer.url %q must be an https URL (machines fetch their payload over TLS)" .Values.payloadServer.url) -}}
{{- end -}}
{{ .Values.payloadServer.url }}
{{- else -}}
https://{{ include "nodepool.payloadServerHost" . }}:{{ .Values.payloadServer.service.port }}/ignition
{{- end -}}
{{- end }}

{{/* The serving certificate's DNS names, as a JSON list. */}}
{{- define "nodepool.dnsNames" -}}
{{- $host := include "nodepool.payloadServerHost" . -}}
{{- $names := list $host (printf "%s.cluster.local" $host) -}}
{{- $names = concat $names .Values.certManager.dnsNames -}}
{{- with .Values.payloadServer.url -}}
{{- $names = append $names (urlParse .).hostname -}}
{{- end -}}
{{- $names | uniq | toJson -}}
{{- end }}

{{/* The ServiceAccount user names the admission policies match. */}}
{{- define "nodepool.controllerUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:nodepool-controller
{{- end }}
{{- define "nodepool.payloadServerUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:nodepool-payload-server
{{- end }}

{{/*
The pod spec fields of a Deployment's scheduling values (.pod: the
controller's or the payload server's values, .root: the chart's context),
and the image pull Secrets of both: global.imagePullSecrets of an umbrella
chart (names or {name: ...}), then imagePullSecrets. Empty values add
nothing: the pod stays the release manifest's.
*/}}
{{- define "nodepool.podScheduling" -}}
{{- $pull := list -}}
{{- range concat (dig "imagePullSecrets" list (.root.Values.global | default dict)) .root.Values.imagePullSecrets -}}
{{- if kindIs "string" . -}}
{{- $pull = append $pull (dict "name" .) -}}
{{- else -}}
{{- $pull = append $pull (dict "name" .name) -}}
{{- end -}}
{{- end -}}
{{- with $pull }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .pod.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- range $k := list "nodeSelector" "tolerations" "affinity" "topologySpreadConstraints" }}
{{- with index $.pod $k }}
{{ $k }}:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- end }}

{{/* The labels of a monitoring object: its own, helm's and those of its values. */}}
{{- define "nodepool.monitoringLabels" -}}
app.kubernetes.io/name: nodepool
{{ include "nodepool.labels" .root }}
{{- with .labels }}
{{ toYaml . }}
{{- end }}
{{- end }}
