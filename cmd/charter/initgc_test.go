package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestCollectorOnAfterInit: internal/initgc turned the collector off while
// packages initialised; package main's init gave it back its setting (on,
// unless $GOGC is off).
func TestCollectorOnAfterInit(t *testing.T) {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	if off := os.Getenv("GOGC") == "off"; off != (p < 0) {
		t.Errorf("GC percent in main = %d with GOGC=%q", p, os.Getenv("GOGC"))
	}
}
