package initgc

import (
	"runtime/debug"
	"testing"
)

// TestOffUntilDone: the collector is off once this package has initialised
// and nothing has called Done; Done gives back the setting it had.
func TestOffUntilDone(t *testing.T) {
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("GC percent before Done = %d, want -1 (off)", got)
	}
	Done()
	if got := debug.SetGCPercent(percent); got != percent {
		t.Errorf("GC percent after Done = %d, want %d", got, percent)
	}
}
