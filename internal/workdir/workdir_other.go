//go:build !unix

package workdir

import "os"

// Lock locks nothing where there is no flock.
func Lock(string) (*os.File, error) { return nil, nil }

// Unlock has nothing to release where there is no flock.
func Unlock(*os.File, bool) error { return nil }

// RemoveStale removes nothing where there is no flock to tell a folder in
// use from a stale one.
func RemoveStale(string, string) ([]string, error) { return nil, nil }
