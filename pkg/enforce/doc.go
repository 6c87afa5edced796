// Package enforce holds containers to the GPU memory (and compute) they were given: it answers
// "this container gets these cards with these limits and this compute cap: which mounts, env
// and host files does it need, and what is cleaned up once its pod is gone".
//
// A Backend is one way of enforcing (--memory-limit): NewBackend builds the none backend (no
// limits) or the HAMi-core backend (an LD_PRELOAD interposer, its library, preload and
// override files, and one counter folder per container bounded by a tmpfs). Its API knows no
// device-plugin or kubelet type, so that the device plugin's Allocate and a DRA driver's
// NodePrepareResources call the same code and convert Edits to their own types.
package enforce
