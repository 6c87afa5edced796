package framework

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func TestSaveProfile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/pprof/heap" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("profile bytes"))
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "heap.pprof")
	if err := SaveProfile(context.Background(), srv.URL+"/debug/pprof/heap", path); err != nil {
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(path); err != nil || string(raw) != "profile bytes" {
		t.Errorf("saved %q (%v), want the served bytes", raw, err)
	}
	if err := SaveProfile(context.Background(), srv.URL+"/elsewhere", filepath.Join(t.TempDir(), "x")); err == nil {
		t.Error("SaveProfile of a 404 = nil, want an error")
	}
}
