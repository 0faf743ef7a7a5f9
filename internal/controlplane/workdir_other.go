//go:build !unix

package controlplane

import "os"

func lockWorkDir(string) (*os.File, error) { return nil, nil }

func unlockWorkDir(*os.File, bool) error { return nil }

// RemoveStaleWorkDirs removes nothing where there is no flock to tell a
// folder in use from a stale one.
func RemoveStaleWorkDirs(string) ([]string, error) { return nil, nil }
