{{/*
The rules reloader needs where it watches workloads: the ClusterRole in global mode, each
namespaced Role otherwise. Every rule here is used by the binary with the same values, and
nothing else is granted: watches list and watch; a reload GETs the workload fresh and PATCHes it
(a Job is deleted and created again, a CronJob gets a new Job). tests/behaviour/tests/chart_rbac/ takes
each verb out in turn and shows the binary fails without it.
Call with (dict "root" $ "cluster" true|false).
*/}}
{{- define "reloader.workloadRules" -}}
{{- $r := .root.Values.reloader -}}
{{- $sources := list -}}
{{- if not $r.ignoreConfigMaps }}{{ $sources = append $sources "configmaps" }}{{ end -}}
{{- if not $r.ignoreSecrets }}{{ $sources = append $sources "secrets" }}{{ end -}}
{{- if $sources }}
- apiGroups: [""]
  resources: {{ $sources | toJson }}
  verbs: ["list", "watch"]
{{- end }}
{{- if and .cluster $r.watchGlobally $r.namespaceSelector }}
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "list", "watch"]
{{- end }}
- apiGroups: ["apps"]
  resources: ["deployments", "daemonsets", "statefulsets"]
  verbs: ["get", "list", "watch", "patch"]
{{- if not $r.ignoreCronJobs }}
- apiGroups: ["batch"]
  resources: ["cronjobs"]
  verbs: ["get", "list", "watch"]
{{- end }}
{{- if not $r.ignoreJobs }}
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "delete"]
{{- else if not $r.ignoreCronJobs }}
{{- /* Jobs are not watched, but a CronJob reload creates one. */}}
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["create"]
{{- end }}
{{- if $r.isArgoRollouts }}
- apiGroups: ["argoproj.io"]
  resources: ["rollouts"]
  verbs: ["get", "list", "watch", "patch"]
{{- end }}
{{- if $r.isOpenshift }}
- apiGroups: ["apps.openshift.io"]
  resources: ["deploymentconfigs"]
  verbs: ["get", "list", "watch", "patch"]
{{- end }}
{{- range $workload := $r.customWorkloads | default list }}
- apiGroups: [{{ $workload.group | toJson }}]
  resources: [{{ $workload.resource | toJson }}]
  verbs: ["get", "list", "watch", "patch"]
{{- end }}
{{- if $r.enableCSIIntegration }}
- apiGroups: ["secrets-store.csi.x-k8s.io"]
  resources: ["secretproviderclasspodstatuses", "secretproviderclasses"]
  verbs: ["get", "list", "watch"]
{{- end }}
{{- $evicts := and (or $r.restartByEviction $r.reloadPods) (not $r.dryRun) (not $r.webhookUrl) }}
{{- if $r.reloadPods }}
{{- /* Pods as reload targets: the labelled pods are watched (and evicted, below). */}}
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
{{- else if $evicts }}
{{- /* Restart by eviction: each opted-in workload's pods are listed, and evicted. */}}
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
{{- end }}
{{- if $evicts }}
- apiGroups: [""]
  resources: ["pods/eviction"]
  verbs: ["create"]
{{- end }}
{{- /* Events are core/v1 Events, as Stakater records them (a repeat patches the first). */}}
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}
