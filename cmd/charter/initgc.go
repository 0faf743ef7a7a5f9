package main

import "github.com/charter-dev/charter/internal/initgc"

// The collector is off while the packages charter links initialise
// (internal/initgc); package main's init runs after all of theirs, in
// charter and in this package's test binary alike, and turns it back on.
func init() { initgc.Done() }
