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

{{- define "gpushare.draDriverName" -}}
{{- printf "%s-dra-driver" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The DRA webhook's caBundle: dra.webhook.caBundle, else the ca.crt of the extender's TLS
Secret (hack/extender-certs.sh's CA signs both sides); without either the render fails, since
the API server could not trust the extender and every gpu-mem pod would be refused. */}}
{{- define "gpushare.draWebhookCABundle" -}}
{{- $ca := .Values.dra.webhook.caBundle -}}
{{- if not $ca -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace .Values.extender.tls.secretName -}}
{{- if and $secret $secret.data -}}
{{- $ca = index $secret.data "ca.crt" | default "" -}}
{{- end -}}
{{- end -}}
{{- if not $ca -}}
{{- fail (printf "dra.webhook.caBundle: set it to the base64 of the CA that signed the extender's serving certificate (e.g. base64 -w0 ca.crt of hack/extender-certs.sh), or create the Secret %s/%s with ca.crt before installing (helm template cannot read it)" .Release.Namespace .Values.extender.tls.secretName) -}}
{{- end -}}
{{- if not (contains "-----BEGIN CERTIFICATE-----" (b64dec $ca)) -}}
{{- fail "dra.webhook.caBundle: not the base64 of a PEM certificate" -}}
{{- end -}}
{{- $ca -}}
{{- end -}}
