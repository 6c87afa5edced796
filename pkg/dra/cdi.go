package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/enforce"
)

// Every prepared claim is one CDI spec file, <CDIRoot>/<driver>_claim_<claim UID>.json, of
// kind "<driver>/gpu" with one device named after the claim's UID: the container runtime
// applies its edits to every container that references the claim. The file is also the
// driver's record of the claim (the annotation "<driver>/claim", see record): on start the
// driver reads them back to know what it prepared, so there is no second file to keep in step
// with them, and a claim whose spec is gone is a claim that is not prepared.

// recordKey is the CDI spec annotation, under the driver's domain, that holds the record.
const recordKey = "claim"

// record is what the driver keeps of a prepared claim.
type record struct {
	UID       types.UID  `json:"uid"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	Pods      []consumer `json:"pods"`
	Shares    []share    `json:"shares"`
}

// pod names the record's (first) pod as namespace/name, for logs and errors.
func (r *record) pod() string { return r.Namespace + "/" + r.Pods[0].Name }

// specPath is the CDI spec file of the claim with a UID.
func (d *Driver) specPath(uid types.UID) string {
	return filepath.Join(d.cfg.CDIRoot, d.cfg.DriverName+"_claim_"+string(uid)+".json")
}

// cdiID is the fully qualified CDI device name of the claim with a UID.
func (d *Driver) cdiID(uid types.UID) string { return d.cfg.cdiKind() + "=" + string(uid) }

// writeSpec writes the claim's spec, replacing the file by rename so that the runtime never
// reads half of it; the same claim prepared again writes the same bytes.
func (d *Driver) writeSpec(rec *record, edits cdispec.ContainerEdits) error {
	if filepath.Base(string(rec.UID)) != string(rec.UID) || rec.UID == "" || rec.UID == ".." {
		return fmt.Errorf("%w: claim UID %q cannot name a file", ErrBadAllocation, rec.UID)
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("claim %s/%s record: %w", rec.Namespace, rec.Name, err)
	}
	spec := cdispec.Spec{Kind: d.cfg.cdiKind(), Annotations: map[string]string{d.cfg.DriverName + "/" + recordKey: string(raw)},
		Devices: []cdispec.Device{{Name: string(rec.UID), ContainerEdits: edits}}}
	if spec.Version, err = cdispec.MinimumRequiredVersion(&spec); err != nil {
		return fmt.Errorf("CDI spec of claim %s/%s: %w", rec.Namespace, rec.Name, err)
	}
	out, err := json.MarshalIndent(&spec, "", "  ")
	if err != nil {
		return fmt.Errorf("CDI spec of claim %s/%s: %w", rec.Namespace, rec.Name, err)
	}
	if err := os.MkdirAll(d.cfg.CDIRoot, 0o755); err != nil { //nolint:gosec // G301: the runtime reads the specs
		return fmt.Errorf("CDI folder: %w", err)
	}
	path := d.specPath(rec.UID)
	// The runtime reads *.json and *.yaml only: the temporary file is not a spec.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o644); err != nil { //nolint:gosec // G306: the runtime reads the specs
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// removeSpec removes the spec of the claim with a UID; a spec that is not there is no error.
func (d *Driver) removeSpec(uid types.UID) error {
	if err := os.Remove(d.specPath(uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the CDI spec of claim %s: %w", uid, err)
	}
	return nil
}

// readSpecs reads back the records of the claims the driver prepared (its CDI specs). A spec
// it cannot read is skipped and logged: it stays until its claim is unprepared.
func (d *Driver) readSpecs(logger klog.Logger) (map[types.UID]record, error) {
	paths, err := filepath.Glob(filepath.Join(d.cfg.CDIRoot, d.cfg.DriverName+"_claim_*.json"))
	if err != nil {
		return nil, fmt.Errorf("list CDI specs: %w", err)
	}
	out := map[types.UID]record{}
	for _, path := range paths {
		rec, err := d.readSpec(path)
		if err != nil {
			logger.Error(err, "Skipping a CDI spec the driver cannot read", "path", path)
			continue
		}
		out[rec.UID] = rec
	}
	return out, nil
}

// readSpec reads the record of one spec file, which must be of the driver's kind.
func (d *Driver) readSpec(path string) (record, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // G304: the driver's own files in --cdi-root
	if err != nil {
		return record{}, fmt.Errorf("read CDI spec: %w", err)
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return record{}, fmt.Errorf("parse CDI spec %s: %w", path, err)
	}
	var rec record
	if spec.Kind != d.cfg.cdiKind() {
		return record{}, fmt.Errorf("CDI spec %s is of kind %q, not %q", path, spec.Kind, d.cfg.cdiKind())
	}
	if err := json.Unmarshal([]byte(spec.Annotations[d.cfg.DriverName+"/"+recordKey]), &rec); err != nil {
		return record{}, fmt.Errorf("CDI spec %s: claim record: %w", path, err)
	}
	if rec.UID == "" || len(rec.Pods) == 0 || d.specPath(rec.UID) != path {
		return record{}, fmt.Errorf("CDI spec %s: claim record %+v does not match its file", path, rec)
	}
	return rec, nil
}

// containerEdits are env and mounts as CDI writes them: env sorted by name, mounts bound
// nosuid and nodev, read-only where enforce says.
func containerEdits(env map[string]string, mounts []enforce.Mount) cdispec.ContainerEdits {
	var out cdispec.ContainerEdits
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out.Env = append(out.Env, k+"="+env[k])
	}
	for _, m := range mounts {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		out.Mounts = append(out.Mounts, &cdispec.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath,
			Options: []string{mode, "nosuid", "nodev", "bind"}, Type: "bind"})
	}
	return out
}
