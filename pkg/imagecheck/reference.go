package imagecheck

import (
	"fmt"
	"strings"
)

// normalizeRef spells an image reference as the container runtime's image store names it: a
// registry host first (docker.io when the first component is not one, with library/ for a
// one-component name) and a tag (latest) when there is neither tag nor digest. An image ID
// (sha256:...) is kept as it is.
func normalizeRef(ref string) (string, error) {
	if ref == "" || strings.ContainsAny(ref, " \t\n") {
		return "", fmt.Errorf("image reference %q is not valid", ref)
	}
	if strings.HasPrefix(ref, "sha256:") {
		return ref, nil
	}
	name, digest, hasDigest := strings.Cut(ref, "@")
	first, rest, hasSlash := strings.Cut(name, "/")
	switch {
	case !hasSlash:
		name = "docker.io/library/" + name
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		name = "docker.io/" + name
	case first == "docker.io" && !strings.Contains(rest, "/"):
		name = "docker.io/library/" + rest
	}
	if hasDigest {
		return name + "@" + digest, nil
	}
	if !strings.Contains(name[strings.LastIndex(name, "/")+1:], ":") {
		name += ":latest"
	}
	return name, nil
}
