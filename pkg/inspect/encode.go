package inspect

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// PrintJSON prints the report as indented JSON.
func PrintJSON(out io.Writer, r *Report) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	_, err = out.Write(append(raw, '\n'))
	return err
}

// PrintYAML prints the report as YAML (the JSON field names).
func PrintYAML(out io.Writer, r *Report) error {
	raw, err := yaml.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode YAML: %w", err)
	}
	_, err = out.Write(raw)
	return err
}
