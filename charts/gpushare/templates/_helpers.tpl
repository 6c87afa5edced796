{{/* Names and labels shared by the chart's templates. */}}

{{- define "gpushare.extenderName" -}}
{{- printf "%s-extender" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpushare.sharePluginName" -}}
{{- printf "%s-share-plugin" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpushare.labels" -}}
app.kubernetes.io/part-of: gpushare
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "gpushare.image" -}}
{{- printf "%s:%s" .image.repository (default .chart.AppVersion .image.tag) -}}
{{- end -}}

{{/* The contract flags, identical on the extender and the share-plugin. */}}
{{- define "gpushare.contractArgs" -}}
- --resource-name={{ .Values.contract.resourceName }}
- --count-name={{ .Values.contract.countName }}
- --unit={{ .Values.contract.unit }}
- --node-gpus-annotation={{ .Values.contract.nodeGPUsAnnotation }}
- --model-annotation={{ .Values.contract.modelAnnotation }}
- --gpu-count-annotation={{ .Values.contract.gpuCountAnnotation }}
- --gpu-core-annotation={{ .Values.contract.gpuCoreAnnotation }}
{{- end -}}

{{- define "gpushare.extenderURL" -}}
{{- printf "https://%s.%s.svc:%d/gpushare-scheduler" (include "gpushare.extenderName" .) .Release.Namespace (int .Values.extender.port) -}}
{{- end -}}

{{/* The Secret holding the extender's hold key: the one given, or the chart's. */}}
{{- define "gpushare.holdKeySecret" -}}
{{- default (printf "%s-hold-key" (include "gpushare.extenderName" .)) .Values.extender.holdKey.secretName -}}
{{- end -}}
