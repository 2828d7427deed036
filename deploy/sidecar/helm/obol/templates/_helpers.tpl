{{/*
obol.fullname is the name every object is made from: fullnameOverride, or
the release's name. The Deployment and the PodDisruptionBudget are called
it, the Service NAME-obol, the ConfigMap NAME-obol-config, the Secret
NAME-obol-gossip.
*/}}
{{- define "obol.fullname" -}}
{{- $name := default .Release.Name .Values.fullnameOverride -}}
{{- if gt (len $name) 58 -}}
{{- fail (printf "fullnameOverride or the release's name %q is longer than 58 characters: the Service %s-obol would not fit in 63" $name $name) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{/* obol.service is the headless Service's name, the agents' --join. */}}
{{- define "obol.service" -}}
{{- include "obol.fullname" . }}-obol
{{- end -}}

{{/* obol.configMap is the name of the ConfigMap holding config.yaml. */}}
{{- define "obol.configMap" -}}
{{- include "obol.fullname" . }}-obol-config
{{- end -}}

{{/* obol.secret is the name of the Secret holding gossip.key. */}}
{{- define "obol.secret" -}}
{{- default (printf "%s-obol-gossip" (include "obol.fullname" .)) .Values.gossip.secretName -}}
{{- end -}}

{{/*
obol.selectorLabels select the pods: the Deployment's, the Service's and
the PodDisruptionBudget's selectors. They cannot change once installed.
*/}}
{{- define "obol.selectorLabels" -}}
app.kubernetes.io/name: {{ include "obol.fullname" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* obol.labels are every object's labels. */}}
{{- define "obol.labels" -}}
{{ include "obol.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* obol.stateVolume is true when the state file has a volume of its own. */}}
{{- define "obol.stateVolume" -}}
{{- if and .Values.stateFile.enabled .Values.stateFile.volume }}true{{ end -}}
{{- end -}}

{{/*
obol.stateFile is the agent's --state-file: obol.state in the state
volume, or in the socket's emptyDir.
*/}}
{{- define "obol.stateFile" -}}
{{- if include "obol.stateVolume" . -}}
{{- trimSuffix "/" .Values.stateFile.mountPath }}/obol.state
{{- else -}}
/run/obol/obol.state
{{- end -}}
{{- end -}}

{{/*
obol.validate fails the render on values that would make a broken
deployment, saying which and why.
*/}}
{{- define "obol.validate" -}}
{{- if eq .Values.app.name "obol" -}}
{{- fail "app.name obol: the agent's container is called obol; give the app another name" -}}
{{- end -}}
{{- if include "obol.stateVolume" . -}}
{{- $v := .Values.stateFile.volume -}}
{{- if and (gt (int .Values.replicas) 1) (not (or (hasKey $v "emptyDir") (hasKey $v "ephemeral"))) -}}
{{- fail (printf "stateFile.volume with replicas %v: every agent would write the same file; a volume that outlives the pod serves one replica (replicas: 1)" .Values.replicas) -}}
{{- end -}}
{{- if has (clean .Values.stateFile.mountPath) (list "/run/obol" "/etc/obol" "/etc/obol-gossip") -}}
{{- fail (printf "stateFile.mountPath %s: the agent's own volumes are mounted there; pick another directory, e.g. /var/lib/obol" .Values.stateFile.mountPath) -}}
{{- end -}}
{{- end -}}
{{- end -}}
