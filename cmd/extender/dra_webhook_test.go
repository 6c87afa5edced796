package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/draconvert"
)

func TestWithDRAWebhook(t *testing.T) {
	verbs := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for _, tc := range []struct {
		name     string
		on       bool
		path     string
		wantCode int
	}{
		{"off: the webhook's path reaches the verbs' routes", false, draconvert.Path, http.StatusTeapot},
		{"on: the webhook answers its path (a bad review is a 400)", true, draconvert.Path, http.StatusBadRequest},
		{"on: other paths still reach the verbs' routes", true, "/gpushare-scheduler/filter", http.StatusTeapot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.draWebhook = tc.on
			logger, _ := ktesting.NewTestContext(t)
			routes, err := withDRAWebhook(&cfg, fake.NewClientset(), verbs, logger)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader("{not json"))
			req.Header.Set("Content-Type", "application/json")
			routes.ServeHTTP(rec, req)
			if rec.Code != tc.wantCode {
				t.Fatalf("POST %s: code %d, want %d (%s)", tc.path, rec.Code, tc.wantCode, rec.Body.String())
			}
		})
	}
}
