// Package cachetest checks, for the tests of a CEL kind, that its compiled
// parts keep the contract of celruntime.Cache.
package cachetest

import (
	"runtime"
	"testing"
	"time"

	"github.com/charter-dev/charter/engine/celruntime"
)

// SharedThenReleased checks the part compile returns (compiled with the
// cache given, nil for none) as a caller-owned cache must keep it:
// compiled twice without a cache, two parts; twice with one cache, one
// part, held by one entry whose source contains marker; with another
// cache, another part; and the entry goes once nothing holds the part, so
// a process that compiles policy after policy does not keep them all.
func SharedThenReleased(t *testing.T, marker string, compile func(*celruntime.Cache) any) {
	t.Helper()
	if a, b := compile(nil), compile(nil); a == nil || a == b {
		t.Error("compiled twice without a cache, the policy shared its compiled part")
	}
	cache := &celruntime.Cache{}
	a, b := compile(cache), compile(cache)
	if a == nil || a != b {
		t.Error("the same policy compiled twice with one cache did not share its compiled part")
	}
	if c := compile(&celruntime.Cache{}); a == c {
		t.Error("two caches shared a compiled part")
	}
	if n := cache.Len(marker); n != 1 {
		t.Fatalf("%d cache entries while policies hold the part, want 1", n)
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	for deadline := time.Now().Add(10 * time.Second); cache.Len(marker) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cache still holds the compiled part after every policy holding it is gone")
		}
		runtime.GC()
	}
}
