package jmespath

import (
	"fmt"
	"strconv"
	"time"
)

func parseRFC3339(s string, pos int) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return t, fmt.Errorf("argument %d: %w", pos, err)
	}
	return t, nil
}

func parseDuration(s string, pos int) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return d, fmt.Errorf("argument %d: %w", pos, err)
	}
	return d, nil
}

func (e *env) fnTimeNow([]any) (any, error) {
	return e.now().Format(time.RFC3339), nil
}

func (e *env) fnTimeNowUTC([]any) (any, error) {
	return e.now().UTC().Format(time.RFC3339), nil
}

// fnTimeSince returns t2 - t1; an empty layout means RFC 3339 and an empty t2
// means now.
func (e *env) fnTimeSince(a []any) (any, error) {
	layout, s1, s2 := a[0].(string), a[1].(string), a[2].(string)
	if layout == "" {
		layout = time.RFC3339
	}
	t1, err := time.Parse(layout, s1)
	if err != nil {
		return nil, fmt.Errorf("argument 2: %w", err)
	}
	t2 := e.now()
	if s2 != "" {
		if t2, err = time.Parse(layout, s2); err != nil {
			return nil, fmt.Errorf("argument 3: %w", err)
		}
	}
	return t2.Sub(t1).String(), nil
}

func fnTimeAdd(a []any) (any, error) {
	t, err := parseRFC3339(a[0].(string), 1)
	if err != nil {
		return nil, err
	}
	d, err := parseDuration(a[1].(string), 2)
	if err != nil {
		return nil, err
	}
	return t.Add(d).Format(time.RFC3339), nil
}

// fnTimeParse converts a time in the given Go layout to RFC 3339. A layout that
// is an integer ("1") means the value is epoch seconds; the result is then UTC.
func fnTimeParse(a []any) (any, error) {
	layout, value := a[0].(string), a[1].(string)
	if _, err := strconv.ParseInt(layout, 10, 64); err == nil {
		secs, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("argument 2: epoch seconds expected: %w", err)
		}
		return time.Unix(secs, 0).UTC().Format(time.RFC3339), nil
	}
	t, err := time.Parse(layout, value)
	if err != nil {
		return nil, fmt.Errorf("argument 2: %w", err)
	}
	return t.Format(time.RFC3339), nil
}

func fnTimeToCron(a []any) (any, error) {
	t, err := parseRFC3339(a[0].(string), 1)
	if err != nil {
		return nil, err
	}
	t = t.UTC()
	return fmt.Sprintf("%d %d %d %d %d", t.Minute(), t.Hour(), t.Day(), int(t.Month()), int(t.Weekday())), nil
}

func fnTimeUTC(a []any) (any, error) {
	t, err := parseRFC3339(a[0].(string), 1)
	if err != nil {
		return nil, err
	}
	return t.UTC().Format(time.RFC3339), nil
}

func parseTimes(a []any) ([]time.Time, error) {
	out := make([]time.Time, len(a))
	for i, v := range a {
		t, err := parseRFC3339(v.(string), i+1)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

func fnTimeDiff(a []any) (any, error) {
	t, err := parseTimes(a)
	if err != nil {
		return nil, err
	}
	return t[1].Sub(t[0]).String(), nil
}

func fnTimeBefore(a []any) (any, error) {
	t, err := parseTimes(a)
	if err != nil {
		return nil, err
	}
	return t[0].Before(t[1]), nil
}

func fnTimeAfter(a []any) (any, error) {
	t, err := parseTimes(a)
	if err != nil {
		return nil, err
	}
	return t[0].After(t[1]), nil
}

// fnTimeBetween is exclusive at both ends.
func fnTimeBetween(a []any) (any, error) {
	t, err := parseTimes(a)
	if err != nil {
		return nil, err
	}
	return t[0].After(t[1]) && t[0].Before(t[2]), nil
}

func fnTimeTruncate(a []any) (any, error) {
	t, err := parseRFC3339(a[0].(string), 1)
	if err != nil {
		return nil, err
	}
	d, err := parseDuration(a[1].(string), 2)
	if err != nil {
		return nil, err
	}
	return t.Truncate(d).Format(time.RFC3339), nil
}
