{{/* Names and labels shared by every object of the release. */}}
{{- define "strata.name" -}}{{ .Release.Name | trunc 40 | trimSuffix "-" }}{{- end }}

{{- define "strata.labels" -}}
app.kubernetes.io/name: strata
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* strata.selector takes (list . "component"). */}}
{{- define "strata.selector" -}}
app.kubernetes.io/name: strata
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{- define "strata.image" -}}
{{- $repo := required "image.repository is required: the registry path of strata's image (docs/install.md)" .Values.image.repository -}}
{{- $ref := printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) -}}
{{- with .Values.image.digest }}{{ $ref = printf "%s@%s" $ref . }}{{ end -}}
{{- $ref -}}
{{- end }}

{{/* strata.nodeImage is strata-node's image: the agents and the CSI driver. */}}
{{- define "strata.nodeImage" -}}
{{- $repo := .Values.nodeImage.repository | default (printf "%s-node" (required "image.repository is required: the registry path of strata's image (docs/install.md)" .Values.image.repository)) -}}
{{- $ref := printf "%s:%s" $repo (.Values.nodeImage.tag | default .Values.image.tag | default .Chart.AppVersion) -}}
{{- with .Values.nodeImage.digest }}{{ $ref = printf "%s@%s" $ref . }}{{ end -}}
{{- $ref -}}
{{- end }}

{{/* strata.sidecar takes (list . .Values.csiSidecars.provisioner). */}}
{{- define "strata.sidecar" -}}
{{- $root := index . 0 -}}
{{- $registry := required "csiSidecars.registry is required when csi.enabled or agent.enabled: the registry or mirror serving the Kubernetes CSI sidecar images (docs/install.md)" $root.Values.csiSidecars.registry -}}
{{- $ref := printf "%s/%s:%s" $registry (index . 1).name (index . 1).tag -}}
{{- with (index . 1).digest }}{{ $ref = printf "%s@%s" $ref . }}{{ end -}}
{{- $ref -}}
{{- end }}

{{- define "strata.pluginDir" -}}{{ .Values.csi.kubeletDir }}/plugins/strata.csi.strata.dev{{- end }}

{{/* strata.nodeSelector renders a nodeSelector with every value a string,
so that --set sel.key=true selects the label value "true". */}}
{{- define "strata.nodeSelector" -}}
nodeSelector:
{{- range $k, $v := . }}
  {{ $k | quote }}: {{ $v | toString | quote }}
{{- end }}
{{- end }}

{{- /* Non-empty when the controller serves the data-loss guard for Flux's
prunes: storage-only mode, with guard.fluxPrunes. */ -}}
{{- define "strata.guardsFluxPrunes" -}}
{{- if and .Values.controller.enabled (not .Values.engine.enabled) .Values.guard.fluxPrunes }}true{{ end }}
{{- end }}

{{- /* Where strata's events go in Flux's format: controller.eventsAddr
(Flux's notification-controller), else, with the engine, the controller's
own alerts endpoint; empty otherwise. */ -}}
{{- define "strata.eventsAddr" -}}
{{- if .Values.controller.eventsAddr }}{{ .Values.controller.eventsAddr }}
{{- else if and .Values.controller.enabled .Values.engine.enabled }}http://{{ include "strata.name" . }}-controller.{{ .Release.Namespace }}.svc:9690/
{{- end }}
{{- end }}

{{- /* The chart makes the agents' CA (btrfs-host-ca.yaml), and the
       controller signs the agents' certificates from it, when a btrfs
       host serves TLS without a certificate of its own, or the LVM mover
       is on. */}}
{{- define "strata.agentCA" -}}
{{- $b := .Values.btrfsHost }}
{{- if or (and $b.enabled $b.tls.enabled (not $b.tls.secretName)) .Values.agent.replication.enabled }}true{{ end }}
{{- end }}
