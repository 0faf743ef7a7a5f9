package imageverify

import (
	"testing"
	"time"

	"github.com/charter-dev/charter/engine/loader"
)

func TestCache(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	c := NewCache(2, time.Hour, func() time.Time { return now })
	c.Put("a", loader.ImageVerified{Digest: "sha256:a"})

	if got, ok := c.Get("a", time.Time{}); !ok || got.Digest != "sha256:a" {
		t.Fatalf("Get(a) = %v, %v", got, ok)
	}
	now = start.Add(time.Minute)
	if _, ok := c.Get("a", now); ok {
		t.Fatal("a result verified before since was returned")
	}
	if _, ok := c.Get("a", start); !ok {
		t.Fatal("a result verified at since was refused")
	}
	c.Put("a", loader.ImageVerified{Digest: "sha256:a"}) // verified again
	if _, ok := c.Get("a", now); !ok {
		t.Fatal("a result verified again was refused")
	}

	// Least recently used goes first beyond the size bound.
	c.Put("b", loader.ImageVerified{})
	c.Get("a", time.Time{})
	c.Put("c", loader.ImageVerified{})
	if _, ok := c.Get("b", time.Time{}); ok || c.Len() != 2 {
		t.Fatalf("b kept beyond the bound (len %d)", c.Len())
	}

	// Entries expire after the TTL.
	now = now.Add(time.Hour)
	if _, ok := c.Get("a", time.Time{}); ok {
		t.Fatal("an expired result was returned")
	}
}
