// Package version holds the build version, set with -ldflags at build time.
package version

// Version is the build version; `make build` sets it from git.
var Version = "dev"

// Commit is the git commit the binary was built from; `make build` sets it ("" when unknown).
var Commit = ""
