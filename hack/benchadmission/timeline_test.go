package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTimelineClusters(t *testing.T) {
	tl := newTimeline()
	start := time.Unix(1000, 0)
	record := tl.answered("charter", nil)
	fast, slow := time.Millisecond, 50*time.Millisecond
	// A burst over two adjacent windows, then one slow answer alone,
	// fast answers everywhere.
	for i := range 100 {
		record(i, start.Add(time.Duration(i)*10*time.Millisecond), fast)
	}
	record(100, start.Add(150*time.Millisecond), slow)
	record(101, start.Add(160*time.Millisecond), slow)
	record(102, start.Add(210*time.Millisecond), slow)
	record(103, start.Add(900*time.Millisecond), slow)
	n, bursts, largest := tl.clusters("charter", 20*time.Millisecond, 100*time.Millisecond)
	if n != 4 || bursts != 2 || largest != 3 {
		t.Errorf("clusters = %d slow in %d bursts, largest %d; want 4 in 2, largest 3", n, bursts, largest)
	}
	if n, bursts, _ := tl.clusters("null", 20*time.Millisecond, 100*time.Millisecond); n != 0 || bursts != 0 {
		t.Errorf("a webhook without answers: %d slow in %d bursts", n, bursts)
	}
	path := filepath.Join(t.TempDir(), "latency.csv")
	if err := tl.write(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 105 || lines[0] != "webhook,due_ms,latency_us" || !strings.HasSuffix(lines[104], ",50000") {
		t.Errorf("CSV: %d lines, first %q, last %q", len(lines), lines[0], lines[len(lines)-1])
	}
}
