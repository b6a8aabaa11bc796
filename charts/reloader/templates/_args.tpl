{{/*
The command line of the controller, as a JSON list. Each value maps to exactly one flag of
the binary (docs/compatibility.md §1 and our additions); a value at its default renders nothing, so the
binary's own default applies.
*/}}
{{- define "reloader.args" -}}
{{- $r := .Values.reloader -}}
{{- $args := list -}}
{{- if $r.logFormat }}{{ $args = append $args (printf "--log-format=%s" $r.logFormat) }}{{ end -}}
{{- if $r.logLevel }}{{ $args = append $args (printf "--log-level=%s" $r.logLevel) }}{{ end -}}
{{- if $r.ignoreSecrets }}{{ $args = append $args "--resources-to-ignore=secrets" }}{{ end -}}
{{- if $r.ignoreConfigMaps }}{{ $args = append $args "--resources-to-ignore=configmaps" }}{{ end -}}
{{- $ignoredKinds := list -}}
{{- if $r.ignoreJobs }}{{ $ignoredKinds = append $ignoredKinds "jobs" }}{{ end -}}
{{- if $r.ignoreCronJobs }}{{ $ignoredKinds = append $ignoredKinds "cronjobs" }}{{ end -}}
{{- if $ignoredKinds }}{{ $args = append $args (printf "--ignored-workload-types=%s" (join "," $ignoredKinds)) }}{{ end -}}
{{- if $r.watchGlobally -}}
  {{- $ignored := include "reloader.csvList" $r.ignoreNamespaces | fromJsonArray -}}
  {{- if $ignored }}{{ $args = append $args (printf "--namespaces-to-ignore=%s" (join "," $ignored)) }}{{ end -}}
  {{- $namespaceSelector := include "reloader.csvList" $r.namespaceSelector | fromJsonArray -}}
  {{- if $namespaceSelector }}{{ $args = append $args (printf "--namespace-selector=%s" (join "," $namespaceSelector)) }}{{ end -}}
{{- else -}}
  {{- $namespaces := include "reloader.watchNamespaces" . | fromJsonArray -}}
  {{- if $namespaces }}{{ $args = append $args (printf "--namespaces=%s" (join "," $namespaces)) }}{{ end -}}
{{- end -}}
{{- $resourceSelector := include "reloader.csvList" $r.resourceLabelSelector | fromJsonArray -}}
{{- if $resourceSelector }}{{ $args = append $args (printf "--resource-label-selector=%s" (join "," $resourceSelector)) }}{{ end -}}
{{- if $r.isArgoRollouts }}{{ $args = append $args "--is-Argo-Rollouts=true" }}{{ end -}}
{{- /* Always explicit: auto-detection could watch DeploymentConfigs without the RBAC rule. */ -}}
{{- $args = append $args (printf "--is-openshift=%t" (eq $r.isOpenshift true)) -}}
{{- /* One flag per declared kind; the schema keeps commas and "=" out of the values. */ -}}
{{- range $workload := $r.customWorkloads | default list -}}
  {{- $fields := list -}}
  {{- range $key := list "group" "version" "kind" "resource" "template" "annotations" -}}
    {{- with get $workload $key }}{{ $fields = append $fields (printf "%s=%s" $key .) }}{{ end -}}
  {{- end -}}
  {{- $args = append $args (printf "--custom-workload=%s" (join "," $fields)) -}}
{{- end -}}
{{- if $r.reloadOnCreate }}{{ $args = append $args "--reload-on-create=true" }}{{ end -}}
{{- if $r.reloadOnDelete }}{{ $args = append $args "--reload-on-delete=true" }}{{ end -}}
{{- if $r.syncAfterRestart }}{{ $args = append $args "--sync-after-restart=true" }}{{ end -}}
{{- if and $r.reloadStrategy (ne $r.reloadStrategy "default") }}{{ $args = append $args (printf "--reload-strategy=%s" $r.reloadStrategy) }}{{ end -}}
{{- if $r.enableHA -}}
  {{- $args = append $args "--enable-ha=true" -}}
  {{- with $r.leaderElection -}}
    {{- with .leaseDuration }}{{ $args = append $args (printf "--leader-election-lease-duration=%s" .) }}{{ end -}}
    {{- with .renewDeadline }}{{ $args = append $args (printf "--leader-election-renew-deadline=%s" .) }}{{ end -}}
    {{- with .retryPeriod }}{{ $args = append $args (printf "--leader-election-retry-period=%s" .) }}{{ end -}}
    {{- with .id }}{{ $args = append $args (printf "--leader-election-id=%s" .) }}{{ end -}}
  {{- end -}}
{{- end -}}
{{- if $r.autoReloadAll }}{{ $args = append $args "--auto-reload-all=true" }}{{ end -}}
{{- if $r.enablePProf -}}
  {{- $args = append $args "--enable-pprof" -}}
  {{- if $r.pprofAddr }}{{ $args = append $args (printf "--pprof-addr=%s" $r.pprofAddr) }}{{ end -}}
{{- end -}}
{{- if $r.enableCSIIntegration }}{{ $args = append $args "--enable-csi-integration=true" }}{{ end -}}
{{- $annotationFlags := dict
    "configmap" "--configmap-annotation"
    "secret" "--secret-annotation"
    "auto" "--auto-annotation"
    "secret_auto" "--secret-auto-annotation"
    "configmap_auto" "--configmap-auto-annotation"
    "search" "--auto-search-annotation"
    "match" "--search-match-annotation"
    "ignore" "--ignore-annotation"
    "pausePeriod" "--pause-deployment-annotation"
    "pauseTime" "--pause-deployment-time-annotation" -}}
{{- $custom := $r.custom_annotations | default dict -}}
{{- range $key := list "configmap" "secret" "auto" "secret_auto" "configmap_auto" "search" "match" "ignore" "pausePeriod" "pauseTime" -}}
  {{- with get $custom $key }}{{ $args = append $args (printf "%s=%s" (get $annotationFlags $key) .) }}{{ end -}}
{{- end -}}
{{- /* fix: Stakater renders webhookUrl only when custom_annotations is non-empty. */ -}}
{{- if $r.webhookUrl }}{{ $args = append $args (printf "--webhook-url=%s" $r.webhookUrl) }}{{ end -}}
{{- if $r.coalescePeriod }}{{ $args = append $args (printf "--coalesce-period=%s" (toString $r.coalescePeriod)) }}{{ end -}}
{{- if $r.maintenanceWindow }}{{ $args = append $args (printf "--maintenance-window=%s" $r.maintenanceWindow) }}{{ end -}}
{{- if $r.loopGuard }}{{ $args = append $args (printf "--loop-guard=%s" (toString $r.loopGuard)) }}{{ end -}}
{{- if not (kindIs "invalid" $r.maxWritesPerSecond) }}{{ $args = append $args (printf "--max-writes-per-second=%v" $r.maxWritesPerSecond) }}{{ end -}}
{{- if $r.dryRun }}{{ $args = append $args "--dry-run" }}{{ end -}}
{{- if $r.restartByEviction }}{{ $args = append $args "--restart-by-eviction=true" }}{{ end -}}
{{- if $r.reloadPods }}{{ $args = append $args "--reload-pods=true" }}{{ end -}}
{{- if not (kindIs "invalid" $r.ignoredSecretTypes) -}}
  {{- $types := include "reloader.csvList" $r.ignoredSecretTypes | fromJsonArray -}}
  {{- $args = append $args (printf "--ignored-secret-types=%s" (join "," $types)) -}}
{{- end -}}
{{- if .Values.webhook.enabled }}{{ $args = append $args "--admission-webhook" }}{{ end -}}
{{- if include "reloader.jobFence" . }}{{ $args = append $args "--job-fence" }}{{ end -}}
{{- if include "reloader.admissionServed" . -}}
  {{- $args = concat $args (list "--webhook-tls-cert=/tls/tls.crt" "--webhook-tls-key=/tls/tls.key" (printf "--webhook-addr=:%v" .Values.webhook.port)) -}}
  {{- if include "reloader.webhookClientCAConfigMap" . -}}
    {{- $args = append $args (printf "--webhook-client-ca=/client-ca/%s" .Values.webhook.clientCA.key) -}}
  {{- end -}}
{{- end -}}
{{- $args | toJson -}}
{{- end -}}
