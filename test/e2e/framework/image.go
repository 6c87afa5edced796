package framework

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"sort"
)

// ImageFile is one file of a local image: its content comes from Src on the host, or it is a
// symlink to Link.
type ImageFile struct {
	Src  string
	Link string
	Mode int64
}

// WriteOCIImage writes a single-layer OCI image layout as a tar archive (for `ctr images
// import`) named name (e.g. localhost/gpushare/e2e:1) holding files (path in the image → file),
// with entrypoint. No registry is involved.
func WriteOCIImage(out, name string, files map[string]ImageFile, entrypoint []string) error {
	layer, err := layerTar(files)
	if err != nil {
		return err
	}
	blobs := map[string][]byte{}
	add := func(b []byte) (string, int) {
		sum := sha256.Sum256(b)
		d := hex.EncodeToString(sum[:])
		blobs[d] = b
		return "sha256:" + d, len(b)
	}
	layerDigest, layerSize := add(layer)
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": entrypoint, "Env": []string{"PATH=/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	cfgDigest, cfgSize := add(cfg)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfgDigest, "size": cfgSize},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layerDigest, "size": layerSize}},
	})
	mDigest, mSize := add(manifest)
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []any{map[string]any{
			"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": mDigest, "size": mSize,
			"platform":    map[string]string{"architecture": "amd64", "os": "linux"},
			"annotations": map[string]string{"io.containerd.image.name": name},
		}},
	})
	entries := []tarEntry{{name: "oci-layout", data: []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {name: "index.json", data: index}}
	var digests []string
	for d := range blobs {
		digests = append(digests, d)
	}
	sort.Strings(digests)
	for _, d := range digests {
		entries = append(entries, tarEntry{name: "blobs/sha256/" + d, data: blobs[d]})
	}
	archive, err := writeTar(entries)
	if err != nil {
		return err
	}
	return os.WriteFile(out, archive, 0o644)
}

type tarEntry struct {
	name string
	data []byte
	link string
	mode int64
}

func layerTar(files map[string]ImageFile) ([]byte, error) {
	dirs := map[string]bool{}
	if _, ok := files["tmp"]; !ok { // an image may make /tmp something else, e.g. a symlink
		dirs["tmp"] = true
	}
	var entries []tarEntry
	for p, f := range files {
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
		if f.Link != "" {
			entries = append(entries, tarEntry{name: p, link: f.Link})
			continue
		}
		data, err := os.ReadFile(f.Src)
		if err != nil {
			return nil, fmt.Errorf("image file %s: %w", p, err)
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o755
		}
		entries = append(entries, tarEntry{name: p, data: data, mode: mode})
	}
	for d := range dirs {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		entries = append(entries, tarEntry{name: d + "/", mode: mode})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	return writeTar(entries)
}

func writeTar(entries []tarEntry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		switch {
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size, h.Mode = tar.TypeSymlink, e.link, 0, 0o777
		case len(e.name) > 0 && e.name[len(e.name)-1] == '/':
			h.Typeflag, h.Mode = tar.TypeDir, e.mode
		case e.mode != 0:
			h.Mode = e.mode
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
