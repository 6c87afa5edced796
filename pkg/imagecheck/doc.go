// Package imagecheck tells, before a container is created, whether its image could redirect a
// path that the device plugin mounts into it.
//
// The runtime (runc) resolves a mount's destination inside the container's root filesystem,
// following symlinks. An image whose /etc/ld.so.preload (or /etc, or a folder on the way to the
// HAMi-core library) is a symlink therefore moves the plugin's bind elsewhere, for instance into
// a folder that a pod volume mounted later covers. The admission policy keeps pod volumes away
// from the protected paths, so at creation the only place such a symlink can come from is the
// image's layers: this package reads them, through the container runtime's own snapshot of the
// image, and refuses an image that has a symlink on any component of a protected path.
//
// The check runs in the device plugin's PreStartContainer, which the kubelet calls after the
// image is pulled and before the container is created, at every start.
package imagecheck
