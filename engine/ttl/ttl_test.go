package ttl

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	created := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		value    string
		deadline time.Time // zero: invalid
	}{
		{"30s", created.Add(30 * time.Second)},
		{"1h30m", created.Add(90 * time.Minute)},
		{"1d", created.Add(24 * time.Hour)},
		{"2w", created.Add(14 * 24 * time.Hour)},
		{"3days", created.Add(72 * time.Hour)},
		{"1d12h", created.Add(36 * time.Hour)},
		{"1week", created.Add(7 * 24 * time.Hour)},
		{"0s", created},
		{"2026-07-19T120000Z", time.Date(2026, 7, 19, 12, 0, 0, 0, time.UTC)},
		{"2026-07-19", time.Date(2026, 7, 19, 0, 0, 0, 0, time.UTC)},
		{"", time.Time{}},
		{"10ay", time.Time{}},
		{"1d2x", time.Time{}},
		{"10", time.Time{}},
		{"d", time.Time{}},
		{"2026-07-19T12:00:00Z", time.Time{}},
		{"2026-13-01", time.Time{}},
		{"tomorrow", time.Time{}},
	} {
		t.Run(tc.value, func(t *testing.T) {
			got, err := Parse(tc.value)
			if tc.deadline.IsZero() {
				if err == nil {
					t.Fatalf("Parse(%q) = %+v, want an error", tc.value, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.value, err)
			}
			if d := got.Deadline(created); !d.Equal(tc.deadline) {
				t.Errorf("Parse(%q).Deadline = %v, want %v", tc.value, d, tc.deadline)
			}
		})
	}
}
