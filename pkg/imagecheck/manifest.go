package imagecheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
)

// Media types an image's target may have (OCI and Docker's).
const (
	mediaOCIIndex      = "application/vnd.oci.image.index.v1+json"
	mediaDockerList    = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaOCIManifest   = "application/vnd.oci.image.manifest.v1+json"
	mediaDockerSchema2 = "application/vnd.docker.distribution.manifest.v2+json"
)

// maxBlob bounds the index, manifest and config blobs read (they are JSON of a few KiB).
const maxBlob = 4 << 20

// blobReader reads one blob of the runtime's content store by digest.
type blobReader func(ctx context.Context, digest string) ([]byte, error)

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Platform  *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform,omitempty"`
}

type index struct {
	MediaType string       `json:"mediaType"`
	Manifests []descriptor `json:"manifests"`
}

type manifest struct {
	MediaType string     `json:"mediaType"`
	Config    descriptor `json:"config"`
}

type imageConfig struct {
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// chainID returns the chain ID of the image whose target is (mediaType, digest): the name under
// which the runtime's snapshotter keeps its unpacked top layer. An index picks the manifest of
// linux on this machine's architecture.
func chainID(ctx context.Context, read blobReader, mediaType, digest string) (string, error) {
	for range 3 { // an index of indexes is legal; three levels are more than any registry makes
		switch mediaType {
		case mediaOCIIndex, mediaDockerList:
			var idx index
			if err := readJSON(ctx, read, digest, &idx); err != nil {
				return "", err
			}
			d, err := pickPlatform(idx.Manifests)
			if err != nil {
				return "", fmt.Errorf("image index %s: %w", digest, err)
			}
			mediaType, digest = d.MediaType, d.Digest
			continue
		case mediaOCIManifest, mediaDockerSchema2:
			var m manifest
			if err := readJSON(ctx, read, digest, &m); err != nil {
				return "", err
			}
			var cfg imageConfig
			if err := readJSON(ctx, read, m.Config.Digest, &cfg); err != nil {
				return "", err
			}
			return chainOf(cfg.RootFS.DiffIDs)
		default:
			return "", fmt.Errorf("image target %s has media type %q, which the check does not know", digest, mediaType)
		}
	}
	return "", fmt.Errorf("image target %s: indexes nested too deep", digest)
}

func readJSON(ctx context.Context, read blobReader, digest string, v any) error {
	b, err := read(ctx, digest)
	if err != nil {
		return fmt.Errorf("read blob %s: %w", digest, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("blob %s: %w", digest, err)
	}
	return nil
}

// pickPlatform picks linux on this machine's architecture from an index.
func pickPlatform(ms []descriptor) (descriptor, error) {
	for _, d := range ms {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			return d, nil
		}
	}
	return descriptor{}, fmt.Errorf("no manifest for linux/%s", runtime.GOARCH)
}

// chainOf computes the chain ID of layers' diff IDs (the OCI image spec's ChainID):
// chain(0) = diff(0), chain(n) = sha256(chain(n-1) + " " + diff(n)).
func chainOf(diffIDs []string) (string, error) {
	if len(diffIDs) == 0 {
		return "", fmt.Errorf("image config lists no layers")
	}
	chain := diffIDs[0]
	for _, d := range diffIDs[1:] {
		sum := sha256.Sum256([]byte(chain + " " + d))
		chain = "sha256:" + hex.EncodeToString(sum[:])
	}
	return chain, nil
}
