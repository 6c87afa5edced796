package main

import (
	"fmt"
	"net/http"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/draconvert"
)

// withDRAWebhook returns routes, plus the DRA conversion webhook at draconvert.Path when
// --dra-webhook is set. The webhook is served by every replica, as the API server calls it: it
// neither reads the cache nor is forwarded to the leader, and asks no client certificate (a
// managed control plane cannot present one).
func withDRAWebhook(cfg *config, client kubernetes.Interface, routes http.Handler, logger klog.Logger) (http.Handler, error) {
	if !cfg.draWebhook {
		return routes, nil
	}
	hook, err := draconvert.NewHandler(client, cfg.names, klog.LoggerWithName(logger, "dra-webhook"),
		draconvert.WithDriver(cfg.draDriver), draconvert.WithDeviceClass(cfg.draDeviceClass), draconvert.WithMaxTemplates(cfg.draMaxTemplates))
	if err != nil {
		return nil, fmt.Errorf("--dra-webhook: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(draconvert.Path, hook)
	mux.Handle("/", routes)
	return mux, nil
}
