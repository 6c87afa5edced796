package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
)

// SaveProfile GETs a Go profile from url (a /debug/pprof/ endpoint served without
// authentication, such as the extender's --profiling-address) and writes it to path.
func SaveProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}
