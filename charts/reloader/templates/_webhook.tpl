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

{{- /* The ConfigMap holding the webhook's client CA bundle: the user's, or the chart's from pem; empty without one. */ -}}
{{- define "reloader.webhookClientCAConfigMap" -}}
{{- $ca := .Values.webhook.clientCA -}}
{{- if $ca.configMap -}}{{ $ca.configMap }}{{- else if $ca.pem -}}{{ include "reloader.fullname" . }}-webhook-client-ca{{- end -}}
{{- end -}}

{{- /* Where the API server connects from: webhook.networkPolicy.from, else the addresses of the kubernetes Service's EndpointSlice (as /32 or /128 ipBlocks), looked up from the cluster. As a JSON list of NetworkPolicyPeers; fails when neither is known. */ -}}
{{- define "reloader.webhookNetworkPolicyPeers" -}}
{{- $from := .Values.webhook.networkPolicy.from -}}
{{- if not $from -}}
  {{- $slice := lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "kubernetes" -}}
  {{- range $endpoint := ($slice.endpoints | default list) -}}
    {{- range $address := $endpoint.addresses -}}
      {{- $cidr := ternary (printf "%s/128" $address) (printf "%s/32" $address) (contains ":" $address) -}}
      {{- $from = append $from (dict "ipBlock" (dict "cidr" $cidr)) -}}
    {{- end -}}
  {{- end -}}
{{- end -}}
{{- if not $from -}}
  {{- fail "webhook.networkPolicy: the API server's addresses cannot be looked up here (helm template, --dry-run, or no EndpointSlice default/kubernetes); set webhook.networkPolicy.from to the NetworkPolicyPeers the API server connects from (e.g. [{ipBlock: {cidr: 10.0.0.10/32}}]), or webhook.networkPolicy.enabled=false (docs/security.md)" -}}
{{- end -}}
{{- $from | toJson -}}
{{- end -}}

{{- /*
(ours) "true" when the Job fence is served (writeFence.jobs, docs/security.md "Jobs"): with the write
fence's policy (Kubernetes 1.30+: its matchConditions need it), when Jobs or CronJobs are reloaded,
and, for "auto", where its server gets a certificate that survives the next render: an install or
upgrade against the cluster (the generated Secret is re-used), cert-manager or an existing Secret.
*/ -}}
{{- define "reloader.jobFence" -}}
{{- $r := .Values.reloader -}}
{{- $w := .Values.webhook -}}
{{- $jobs := toString .Values.writeFence.jobs -}}
{{- $createsJobs := or (not $r.ignoreJobs) (not $r.ignoreCronJobs) -}}
{{- $policy := .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" -}}
{{- if and .Values.writeFence.enabled $createsJobs $policy (ne $jobs "false") -}}
  {{- /* Found only by an install or upgrade against a cluster, never by `helm template`. */ -}}
  {{- $live := lookup "v1" "Namespace" "" "default" -}}
  {{- $keptCertificate := or $w.certManager.enabled $w.tls.existingSecret $live -}}
  {{- if or (eq $jobs "true") $w.enabled $keptCertificate -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{- /*
"true" when the webhook port gets a NetworkPolicy admitting only the API server: asked for, and
where the API server's addresses are known (webhook.networkPolicy.from, or looked up). The
mutating webhook (hashes of Secrets) never runs without one: "reloader.webhookNetworkPolicyPeers"
fails the render instead. The Job fence alone does (it tells only whether a Job equals one that
exists), and NOTES.txt says so.
*/ -}}
{{- define "reloader.webhookNetworkPolicy" -}}
{{- $np := .Values.webhook.networkPolicy -}}
{{- if and (include "reloader.admissionServed" .) $np.enabled -}}
  {{- if or .Values.webhook.enabled $np.from (lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "kubernetes") -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{- /* "true" when the controller's pods serve admission requests: the mutating webhook, the Job fence, or both. */ -}}
{{- define "reloader.admissionServed" -}}
{{- if or .Values.webhook.enabled (include "reloader.jobFence" .) -}}true{{- end -}}
{{- end -}}
