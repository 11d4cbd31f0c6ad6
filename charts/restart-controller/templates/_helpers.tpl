{{- define "restart-controller.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "restart-controller.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "restart-controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "restart-controller.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "restart-controller.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "restart-controller.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: restart-controller
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "restart-controller.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "restart-controller.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "restart-controller.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Checks of value combinations that would install something broken. */}}
{{- define "restart-controller.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicaCount > 1 needs leaderElection.enabled: replicas without leader election would all restart workloads" -}}
{{- end -}}
{{- if not (has .Values.rbac.scope (list "cluster" "namespaced")) -}}
{{- fail (printf "rbac.scope must be cluster or namespaced, not %q" .Values.rbac.scope) -}}
{{- end -}}
{{- if and (eq .Values.rbac.scope "namespaced") (empty .Values.rbac.namespaces) -}}
{{- fail "rbac.scope=namespaced needs rbac.namespaces: the namespaces to watch" -}}
{{- end -}}
{{- end -}}

{{/*
The controller's config: .Values.config, with namespaces set to
rbac.namespaces when the RBAC is namespaced (the controller must not try to
watch what it may not read).
*/}}
{{- define "restart-controller.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- if eq .Values.rbac.scope "namespaced" -}}
{{- $_ := set $config "namespaces" .Values.rbac.namespaces -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/*
The rules the controller needs: list and watch on every source kind; list,
watch and patch on every workload kind; get on the kinds a runNow or recreate
strategy restarts, create and get on Jobs for runNow, delete and create on
the kind for recreate (access.Needs); Events. Grouped by API group, in the
order the kinds appear in the config (as manifests/rbac.yaml writes them).
*/}}
{{/*
With config.namespaceSelector, a metadata-only informer lists and watches
Namespaces for their labels (access.NamespaceVerbs).
*/}}
{{- define "restart-controller.namespaceRules" -}}
{{- if .Values.config.namespaceSelector }}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
{{- end }}
{{- end -}}

{{- define "restart-controller.rules" -}}
{{- $sources := dict -}}
{{- $sourceGroups := list -}}
{{- range .Values.config.sources -}}
{{- $g := .group | default "" -}}
{{- if not (hasKey $sources $g) }}{{ $sourceGroups = append $sourceGroups $g }}{{ $_ := set $sources $g list }}{{ end -}}
{{- $_ := set $sources $g (append (get $sources $g) .resource) -}}
{{- end -}}
{{- $workloads := dict -}}
{{- $workloadGroups := list -}}
{{- range .Values.config.workloads -}}
{{- $g := .group | default "" -}}
{{- if not (hasKey $workloads $g) }}{{ $workloadGroups = append $workloadGroups $g }}{{ $_ := set $workloads $g list }}{{ end -}}
{{- $_ := set $workloads $g (append (get $workloads $g) .resource) -}}
{{- end -}}
{{- range $sourceGroups }}
- apiGroups: [{{ . | quote }}]
  resources: [{{ join ", " (get $sources .) }}]
  verbs: [list, watch]
{{- end }}
{{- range $workloadGroups }}
- apiGroups: [{{ . | quote }}]
  resources: [{{ join ", " (get $workloads .) }}]
  verbs: [list, watch, patch]
{{- end }}
{{- $runNow := false }}
{{- range .Values.config.workloads }}
{{- $strategies := list ((.restart | default dict).strategy | default "templateAnnotation") }}
{{- range ((.restart | default dict).byAnnotation | default list) }}{{ $strategies = append $strategies (.strategy | default "templateAnnotation") }}{{ end }}
{{- if or (has "runNow" $strategies) (has "recreate" $strategies) }}
- apiGroups: [{{ .group | default "" | quote }}]
  resources: [{{ .resource }}]
  verbs: [get]
{{- end }}
{{- if has "runNow" $strategies }}{{ $runNow = true }}{{ end }}
{{- if has "recreate" $strategies }}
- apiGroups: [{{ .group | default "" | quote }}]
  resources: [{{ .resource }}]
  verbs: [delete, create]
{{- end }}
{{- end }}
{{- if $runNow }}
- apiGroups: ["batch"]
  resources: [jobs]
  verbs: [create, get]
{{- end }}
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- with .Values.rbac.extraRules }}
{{ toYaml . }}
{{- end }}
{{- end -}}
