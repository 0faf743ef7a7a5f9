package conditions

import (
	"testing"
	"time"
)

// TestMayBeDurationKeepsEveryDuration: mayBeDuration only skips strings
// time.ParseDuration would refuse.
func TestMayBeDurationKeepsEveryDuration(t *testing.T) {
	for _, s := range []string{"1h", "-1.5h", "+2m", ".5s", "300ms", "1µs", "1μs", "2us", "3ns", "1h30m", "0s", "00h", "-0", "+0",
		"", "0", "10", "-", "+", "h", "abc", "1x", "1 h", "1h ", " 1h", "--1h", "1.2.3s", "1e3s", "∞", "1hh", "5m-"} {
		_, err := time.ParseDuration(s)
		if err == nil && !mayBeDuration(s) {
			t.Errorf("mayBeDuration(%q) = false, but time.ParseDuration accepts it", s)
		}
	}
}

func FuzzMayBeDuration(f *testing.F) {
	for _, s := range []string{"1h", "-1.5h", "10", "abc", "1µs"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := time.ParseDuration(s); err == nil && !mayBeDuration(s) {
			t.Errorf("mayBeDuration(%q) = false, but time.ParseDuration accepts it", s)
		}
	})
}
