package droplog

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
)

// TestDroppedLogsOncePerInterval: the first drop is said at once, the
// drops within the interval are counted into the next line, which says
// how many there were.
func TestDroppedLogsOncePerInterval(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	l := New(log, "queue full: dropped", time.Second)
	clock := time.Unix(1000, 0)
	l.now = func() time.Time { return clock }

	steps := []struct {
		advance time.Duration
		logged  bool
	}{
		{0, true},                       // first drop: said at once
		{100 * time.Millisecond, false}, // within the interval: counted
		{100 * time.Millisecond, false},
		{900 * time.Millisecond, true}, // the interval passed: the three since the last line
		{2 * time.Second, true},        // a lone drop later
	}
	for i, s := range steps {
		clock = clock.Add(s.advance)
		if got := l.Dropped("resource", "ns/pod-"+string(rune('a'+i))); got != s.logged {
			t.Fatalf("drop %d: logged = %v, want %v", i, got, s.logged)
		}
	}
	want := []string{`"dropped"=1`, `"dropped"=3`, `"dropped"=1`}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %q", len(lines), len(want), lines)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) || !strings.Contains(lines[i], `"msg"="queue full: dropped"`) {
			t.Errorf("line %d = %s, want %s and the message", i, lines[i], w)
		}
	}
	if !strings.Contains(lines[1], `"resource"="ns/pod-d"`) {
		t.Errorf("line 1 = %s, want it to name the latest drop", lines[1])
	}
}
