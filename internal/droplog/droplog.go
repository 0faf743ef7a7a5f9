// Package droplog logs what a bounded queue drops without turning a
// flood of drops into a flood of log lines: the first drop is logged at
// once, later ones as one line per interval with their count. Admission's
// writers (events, admission reports, UpdateRequests) drop rather than
// block the review; what they drop is counted in a metric and said in the
// log, never silent.
package droplog

import (
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// DefaultInterval is the least time between two lines of one Log.
const DefaultInterval = 10 * time.Second

// Log logs the drops of one queue. The zero value is not usable: use New.
type Log struct {
	log      logr.Logger
	msg      string
	interval time.Duration
	now      func() time.Time

	mu     sync.Mutex
	last   time.Time // when a line was last written
	unsaid int64     // drops since then
}

// New returns a Log writing msg to log at most once per interval
// (DefaultInterval when 0).
func New(log logr.Logger, msg string, interval time.Duration) *Log {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Log{log: log, msg: msg, interval: interval, now: time.Now}
}

// Dropped records one drop; keysAndValues describe it (the line written,
// if any, names the latest drop). It reports whether a line was written.
func (l *Log) Dropped(keysAndValues ...any) bool {
	now := l.now()
	l.mu.Lock()
	l.unsaid++
	if !l.last.IsZero() && now.Sub(l.last) < l.interval {
		l.mu.Unlock()
		return false
	}
	n := l.unsaid
	l.unsaid, l.last = 0, now
	l.mu.Unlock()
	l.log.Info(l.msg, append([]any{"dropped", n, "since", l.interval.String()}, keysAndValues...)...)
	return true
}
