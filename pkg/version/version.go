// Package version holds the build version, set with -ldflags at build time.
package version

// Version is the build version; `make build` sets it from git.
var Version = "dev"
