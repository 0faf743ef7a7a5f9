// Package ttl reads the cleanup.kyverno.io/ttl label: when an object that
// carries it is due for deletion.
//
// A value is tried, in Kyverno's order, as
//
//  1. a duration counted from the object's creationTimestamp (not from
//     when the label was set): Go's form ("90s", "1h30m") or a sequence of
//     <number><unit> groups with the units of kube-openapi's strfmt,
//     which add days and weeks ("1d", "2w", "3days", "1d12h");
//  2. an absolute time "2006-01-02T150405Z" (UTC; colons are not legal in
//     label values);
//  3. a date "2006-01-02" (midnight UTC).
//
// Unlike Kyverno, a value is valid only as a whole: Kyverno sums the groups
// it recognises and ignores the rest, so "1d2x" lives a day and "10ay"
// forever; charter refuses both, at admission and, for objects that
// predate it, by an event, and never guesses a deadline.
package ttl

import (
	"fmt"
	"regexp"
	"time"

	"k8s.io/kube-openapi/pkg/validation/strfmt"
)

// Label is the TTL label.
const Label = "cleanup.kyverno.io/ttl"

// PropagationAnnotation sets the propagation policy of a TTL deletion:
// Foreground, Background or Orphan.
const PropagationAnnotation = "cleanup.kyverno.io/propagation-policy"

// Layouts of the absolute forms.
const (
	TimestampLayout = "2006-01-02T150405Z"
	DateLayout      = "2006-01-02"
)

// TTL is a parsed label value: a duration after creation, or an instant.
type TTL struct {
	// After is the lifetime counted from creation, when At is zero.
	After time.Duration
	// At is the absolute deadline, when set.
	At time.Time
}

// Deadline is when an object created at created expires.
func (t TTL) Deadline(created time.Time) time.Time {
	if !t.At.IsZero() {
		return t.At
	}
	return created.Add(t.After)
}

// groups is one or more <number><unit> groups making up the whole value.
var (
	whole = regexp.MustCompile(`^(\d+\s*[A-Za-zµ]+\s*)+$`)
	group = regexp.MustCompile(`\d+\s*[A-Za-zµ]+`)
)

// Parse parses a label value. The error explains the accepted forms.
func Parse(value string) (TTL, error) {
	if d, err := parseDuration(value); err == nil {
		if d < 0 {
			return TTL{}, fmt.Errorf("cleanup.kyverno.io/ttl %q: a negative duration", value)
		}
		return TTL{After: d}, nil
	}
	if t, err := time.Parse(TimestampLayout, value); err == nil {
		return TTL{At: t.UTC()}, nil
	}
	if t, err := time.Parse(DateLayout, value); err == nil {
		return TTL{At: t.UTC()}, nil
	}
	return TTL{}, fmt.Errorf("cleanup.kyverno.io/ttl %q is not a duration (e.g. 30s, 1h30m, 2d, 1w), a UTC time %s (e.g. 2026-07-19T120000Z) or a date %s", value, TimestampLayout, DateLayout)
}

func parseDuration(value string) (time.Duration, error) {
	if d, err := time.ParseDuration(value); err == nil {
		return d, nil
	}
	if !whole.MatchString(value) {
		return 0, fmt.Errorf("not a duration")
	}
	// Every group must carry a unit strfmt knows: strfmt itself would
	// skip the ones it does not.
	for _, g := range group.FindAllString(value, -1) {
		if _, err := strfmt.ParseDuration(g); err != nil {
			return 0, err
		}
	}
	return strfmt.ParseDuration(value)
}
