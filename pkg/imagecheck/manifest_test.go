package imagecheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestChainID(t *testing.T) {
	d1 := "sha256:" + strings.Repeat("a", 64)
	d2 := "sha256:" + strings.Repeat("b", 64)
	sum := sha256.Sum256([]byte(d1 + " " + d2))
	two := "sha256:" + hex.EncodeToString(sum[:])
	blobs := map[string]string{
		"cfg1": fmt.Sprintf(`{"rootfs":{"type":"layers","diff_ids":[%q]}}`, d1),
		"cfg2": fmt.Sprintf(`{"rootfs":{"type":"layers","diff_ids":[%q,%q]}}`, d1, d2),
		"cfg0": `{"rootfs":{"type":"layers","diff_ids":[]}}`,
		"m1":   `{"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"digest":"cfg1"}}`,
		"m2":   `{"config":{"digest":"cfg2"}}`,
		"m0":   `{"config":{"digest":"cfg0"}}`,
		"idx": fmt.Sprintf(`{"manifests":[{"mediaType":%q,"digest":"m1","platform":{"os":"windows","architecture":%q}},`+
			`{"mediaType":%q,"digest":"m2","platform":{"os":"linux","architecture":%q}}]}`,
			mediaOCIManifest, runtime.GOARCH, mediaDockerSchema2, runtime.GOARCH),
		"idx-other": `{"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"m1","platform":{"os":"linux","architecture":"s390x-not"}}]}`,
		"junk":      `{`,
	}
	read := func(_ context.Context, d string) ([]byte, error) {
		b, ok := blobs[d]
		if !ok {
			return nil, fmt.Errorf("no blob %s", d)
		}
		return []byte(b), nil
	}
	tests := []struct {
		name, media, digest, want, err string
	}{
		{name: "one layer", media: mediaOCIManifest, digest: "m1", want: d1},
		{name: "two layers", media: mediaDockerSchema2, digest: "m2", want: two},
		{name: "index picks linux on this arch", media: mediaOCIIndex, digest: "idx", want: two},
		{name: "index without this platform", media: mediaDockerList, digest: "idx-other", err: "no manifest for linux/"},
		{name: "no layers", media: mediaOCIManifest, digest: "m0", err: "lists no layers"},
		{name: "unknown media type", media: "text/plain", digest: "m1", err: "does not know"},
		{name: "missing blob", media: mediaOCIManifest, digest: "nope", err: "no blob nope"},
		{name: "malformed JSON", media: mediaOCIManifest, digest: "junk", err: "blob junk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := chainID(context.Background(), read, tt.media, tt.digest)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("chainID: %q, %v; want an error with %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("chainID = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
