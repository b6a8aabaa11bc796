{{/*
Names. The full name and the selector labels are those of Stakater's chart, so a release
switched from it keeps its Deployment (whose selector cannot change) and its object names.
*/}}
{{- define "reloader.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" | lower -}}
{{- end -}}

{{- define "reloader.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (default .Chart.Name .Values.nameOverride) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "reloader.namespace" -}}
{{- .Values.namespace | default .Release.Namespace -}}
{{- end -}}

{{- define "reloader.serviceAccountName" -}}
{{- if .Values.reloader.serviceAccount.create -}}
{{- default (include "reloader.fullname" .) .Values.reloader.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.reloader.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "reloader.selectorLabels" -}}
app: {{ include "reloader.fullname" . }}
release: {{ .Release.Name | quote }}
{{- with .Values.reloader.matchLabels }}
{{ tpl (toYaml .) $ }}
{{- end }}
{{- end -}}

{{- define "reloader.labels" -}}
{{ include "reloader.selectorLabels" . }}
app.kubernetes.io/name: {{ include "reloader.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | quote }}
{{- end -}}

{{/* labels plus the RBAC labels of reloader.rbac.labels */}}
{{- define "reloader.rbacLabels" -}}
{{ include "reloader.labels" . }}
{{- with .Values.reloader.rbac.labels }}
{{ tpl (toYaml .) $ }}
{{- end }}
{{- end -}}

{{/*
The image values in effect: `image`, with Stakater chart 1.x's reloader.deployment.image keys on
top where they are set (name was the repository, base the name under global.imageRegistry), so
a 1.x values file installs what it names. NOTES.txt lists the legacy keys it used.
*/}}
{{- define "reloader.imageValues" -}}
{{- $image := deepCopy .Values.image -}}
{{- $legacy := .Values.reloader.deployment.image | default dict -}}
{{- range $from, $to := dict "name" "repository" "base" "name" "tag" "tag" "digest" "digest" "pullPolicy" "pullPolicy" -}}
{{- with get $legacy $from }}{{ $_ := set $image $to (toString .) }}{{ end -}}
{{- end -}}
{{- $image | toJson -}}
{{- end -}}

{{/* The reloader.deployment.image keys (Stakater chart 1.x) that are set, as a JSON list. */}}
{{- define "reloader.legacyImageKeys" -}}
{{- $legacy := .Values.reloader.deployment.image | default dict -}}
{{- $set := list -}}
{{- range $key := list "name" "base" "tag" "digest" "pullPolicy" -}}
{{- if get $legacy $key }}{{ $set = append $set (printf "reloader.deployment.image.%s" $key) }}{{ end -}}
{{- end -}}
{{- $set | toJson -}}
{{- end -}}

{{- define "reloader.image" -}}
{{- $image := include "reloader.imageValues" . | fromJson -}}
{{- $tag := $image.tag | default .Chart.AppVersion | toString -}}
{{- $repository := $image.repository -}}
{{- if .Values.global.imageRegistry -}}
{{- $repository = printf "%s/%s" (trimSuffix "/" .Values.global.imageRegistry) $image.name -}}
{{- end -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Pull secrets given as names or as {name: ...} objects, as a YAML list. */}}
{{- define "reloader.imagePullSecrets" -}}
{{- range concat (.Values.global.imagePullSecrets | default list) (.Values.reloader.deployment.imagePullSecrets | default list) }}
{{- if kindIs "map" . }}
- name: {{ .name | quote }}
{{- else }}
- name: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
A value given either as a list or as a comma-separated string, as a JSON list of trimmed,
non-empty, unique strings (in the given order).
*/}}
{{- define "reloader.csvList" -}}
{{- $items := . -}}
{{- if kindIs "string" $items -}}
{{- $items = splitList "," $items -}}
{{- end -}}
{{- $clean := list -}}
{{- range ($items | default list) -}}
{{- $item := . | toString | trim -}}
{{- if and $item (not (has $item $clean)) -}}
{{- $clean = append $clean $item -}}
{{- end -}}
{{- end -}}
{{- $clean | toJson -}}
{{- end -}}

{{/*
The namespaces watched in scoped mode (watchGlobally=false with reloader.namespaces set), as a
JSON list: the release namespace (always, as in Stakater's chart, so workloads next to reloader
keep reloading) plus each of reloader.namespaces, unique and sorted. Empty when
reloader.namespaces is empty: then reloader watches its own namespace (KUBERNETES_NAMESPACE).
*/}}
{{- define "reloader.watchNamespaces" -}}
{{- $given := include "reloader.csvList" .Values.reloader.namespaces | fromJsonArray -}}
{{- if $given -}}
{{- concat (list (include "reloader.namespace" .)) $given | uniq | sortAlpha | toJson -}}
{{- else -}}
{{- list | toJson -}}
{{- end -}}
{{- end -}}

{{/*
The namespaces that get the workload Role in namespaced mode: those of reloader.watchNamespaces,
or the release namespace alone. Empty in global mode.
*/}}
{{- define "reloader.roleNamespaces" -}}
{{- if .Values.reloader.watchGlobally -}}
{{- list | toJson -}}
{{- else -}}
{{- $namespaces := include "reloader.watchNamespaces" . | fromJsonArray -}}
{{- if $namespaces -}}
{{- $namespaces | toJson -}}
{{- else -}}
{{- list (include "reloader.namespace" .) | toJson -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Replicas: honoured with enableHA, otherwise at most 1 (one writer without a lease). */}}
{{- define "reloader.replicas" -}}
{{- $replicas := 1 -}}
{{- if not (kindIs "invalid" .Values.reloader.deployment.replicas) -}}
{{- $replicas = int .Values.reloader.deployment.replicas -}}
{{- end -}}
{{- if .Values.reloader.enableHA -}}
{{- $replicas -}}
{{- else -}}
{{- min $replicas 1 -}}
{{- end -}}
{{- end -}}

{{/*
Invalid combinations that the schema cannot express with a clear message. Included by the
Deployment so that every render checks them.
*/}}
{{- define "reloader.validate" -}}
{{- $r := .Values.reloader -}}
{{- if and $r.ignoreSecrets $r.ignoreConfigMaps -}}
{{- fail "reloader.ignoreSecrets and reloader.ignoreConfigMaps are both true: reloader would watch nothing; set at most one of them" -}}
{{- end -}}
{{- if and $r.watchGlobally (include "reloader.csvList" $r.namespaces | fromJsonArray) -}}
{{- fail "reloader.namespaces is set but reloader.watchGlobally is true: set reloader.watchGlobally=false to watch only those namespaces" -}}
{{- end -}}
{{- /* The binary refuses a kind declared twice (same group, and same kind or resource). */ -}}
{{- $declared := dict -}}
{{- range $index, $workload := $r.customWorkloads | default list -}}
{{- range $name := list (printf "kind %s" $workload.kind) (printf "resource %s" $workload.resource) -}}
{{- $key := printf "%s in group %s" $name $workload.group -}}
{{- if hasKey $declared $key -}}
{{- fail (printf "reloader.customWorkloads[%d]: %s is already declared by reloader.customWorkloads[%v]; declare each kind once" $index $key (get $declared $key)) -}}
{{- end -}}
{{- $_ := set $declared $key $index -}}
{{- end -}}
{{- end -}}
{{- end -}}
