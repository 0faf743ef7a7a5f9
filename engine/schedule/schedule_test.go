package schedule

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	ref := time.Date(2026, 11, 25, 10, 0, 30, 0, time.UTC)
	for _, tc := range []struct {
		spec string
		next time.Time // zero: the spec must be refused
	}{
		{"* * * * *", time.Date(2026, 11, 25, 10, 1, 0, 0, time.UTC)},
		{"*/5 * * * *", time.Date(2026, 11, 25, 10, 5, 0, 0, time.UTC)},
		{"0 0 * * *", time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)},
		{"*/10 * * * * *", time.Date(2026, 11, 25, 10, 0, 40, 0, time.UTC)},
		{"@hourly", time.Date(2026, 11, 25, 11, 0, 0, 0, time.UTC)},
		{"@midnight", time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)},
		{"@every 1h", ref.Add(time.Hour)},
		{"@every 5s", ref.Add(5 * time.Second)},
		{"CRON_TZ=Europe/Berlin 0 12 * * *", time.Date(2026, 11, 25, 11, 0, 0, 0, time.UTC)},
		{"  * * * * *  ", time.Date(2026, 11, 25, 10, 1, 0, 0, time.UTC)},
		{"", time.Time{}},
		{"* * * *", time.Time{}},
		{"* * * * * * *", time.Time{}},
		{"61 * * * *", time.Time{}},
		{"@every", time.Time{}},
		{"@every tomorrow", time.Time{}},
		{"@often", time.Time{}},
		{"TZ=UTC", time.Time{}},
		{"CRON_TZ=Mars/Olympus 0 * * * *", time.Time{}},
		{"every minute", time.Time{}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			s, err := Parse(tc.spec)
			if tc.next.IsZero() {
				if err == nil {
					t.Fatalf("Parse(%q) accepted, want an error", tc.spec)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.spec, err)
			}
			if got := Next(s, ref); !got.Equal(tc.next) {
				t.Errorf("Next(%q) = %v, want %v", tc.spec, got.UTC(), tc.next)
			}
		})
	}
}
