// Package schedule parses the cron schedules of cleanup policies. One
// parser serves policy admission, compilation and the controller's run
// loop, so a schedule that is admitted is a schedule that runs: Kyverno
// checks schedules with robfig/cron and runs them with another library,
// which admits "@every 1h" and then never runs it.
//
// Accepted forms (github.com/robfig/cron/v3):
//
//   - five fields, minute hour day-of-month month day-of-week
//     ("*/5 * * * *"), as Kubernetes CronJobs and Kyverno take them;
//   - six fields, with seconds first ("*/10 * * * * *"): charter's
//     extension for short intervals, which Kyverno refuses at admission;
//   - descriptors: @yearly, @annually, @monthly, @weekly, @daily,
//     @midnight, @hourly and "@every <duration>" (at least one second);
//   - an optional time zone prefix "CRON_TZ=Europe/Berlin " (or "TZ=");
//     without it schedules run in UTC, as Kyverno's do.
package schedule

import (
	"fmt"
	"strings"
	"time"
	// Time zones named by CRON_TZ= resolve without the host's zoneinfo
	// (charter's image has none).
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// Schedule yields the activation times of a cron schedule.
type Schedule = cron.Schedule

var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse parses a schedule. The error says what is wrong with it.
func Parse(spec string) (s Schedule, err error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, fmt.Errorf("empty schedule")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		// robfig/cron slices up to the first space and panics without one.
		if !strings.Contains(spec, " ") {
			return nil, fmt.Errorf("a time zone prefix needs a schedule after it, e.g. \"CRON_TZ=UTC 0 * * * *\"")
		}
	} else {
		spec = "CRON_TZ=UTC " + spec
	}
	defer func() {
		// The parser is third-party code reading user input: a panic in it
		// is a refused schedule, never a crashed controller or webhook.
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("cannot parse schedule: %v", r)
		}
	}()
	return parser.Parse(spec)
}

// Next returns the first activation strictly after t.
func Next(s Schedule, t time.Time) time.Time { return s.Next(t) }
