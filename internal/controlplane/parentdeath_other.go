//go:build !linux

package controlplane

// watchedBinary returns binary itself: only Linux has a parent-death
// signal, so elsewhere a control plane whose parent is killed outlives it
// until the next Start removes its work folder.
func watchedBinary(_, binary string) (string, error) { return binary, nil }
