{{- define "reloader.webhookServiceName" -}}
{{- printf "%s-webhook" (include "reloader.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "reloader.webhookSecretName" -}}
{{- if and (not .Values.webhook.certManager.enabled) .Values.webhook.tls.existingSecret -}}
{{- .Values.webhook.tls.existingSecret -}}
{{- else -}}
{{- printf "%s-webhook-tls" (include "reloader.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The DNS names the API server may use to reach the webhook Service. */}}
{{- define "reloader.webhookDNSNames" -}}
{{- $service := include "reloader.webhookServiceName" . -}}
{{- $namespace := include "reloader.namespace" . -}}
{{- list $service (printf "%s.%s" $service $namespace) (printf "%s.%s.svc" $service $namespace) (printf "%s.%s.svc.cluster.local" $service $namespace) | toJson -}}
{{- end -}}

{{/*
The namespaces whose workloads are never sent to the webhook: kube-system, the release
namespace (unless excludeReleaseNamespace is false) and webhook.excludeNamespaces.
*/}}
{{- define "reloader.webhookExcludedNamespaces" -}}
{{- $excluded := list "kube-system" -}}
{{- if .Values.webhook.excludeReleaseNamespace -}}
{{- $excluded = append $excluded (include "reloader.namespace" .) -}}
{{- end -}}
{{- $excluded = concat $excluded (.Values.webhook.excludeNamespaces | default list) | uniq -}}
{{- $excluded | toJson -}}
{{- end -}}

{{/*
The workload kinds the webhook intercepts: those the controller reloads with these values.
*/}}
{{- define "reloader.webhookRules" -}}
{{- $r := .Values.reloader -}}
- apiGroups: ["apps"]
  apiVersions: ["v1"]
  resources: ["deployments", "daemonsets", "statefulsets"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
{{- $batch := list -}}
{{- if not $r.ignoreCronJobs }}{{ $batch = append $batch "cronjobs" }}{{ end -}}
{{- if not $r.ignoreJobs }}{{ $batch = append $batch "jobs" }}{{ end -}}
{{- if $batch }}
- apiGroups: ["batch"]
  apiVersions: ["v1"]
  resources: {{ $batch | toJson }}
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
{{- end }}
{{- if $r.isArgoRollouts }}
- apiGroups: ["argoproj.io"]
  apiVersions: ["v1alpha1"]
  resources: ["rollouts"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
{{- end }}
{{- if $r.isOpenshift }}
- apiGroups: ["apps.openshift.io"]
  apiVersions: ["v1"]
  resources: ["deploymentconfigs"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
{{- end }}
{{- /* An annotations map is no pod template: the webhook leaves those kinds alone. */}}
{{- range $workload := $r.customWorkloads | default list }}
{{- if $workload.template }}
- apiGroups: [{{ $workload.group | toJson }}]
  apiVersions: [{{ $workload.version | toJson }}]
  resources: [{{ $workload.resource | toJson }}]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
{{- end }}
{{- end }}
{{- end -}}
