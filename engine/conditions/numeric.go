package conditions

import (
	"strconv"
	"time"

	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/api/resource"
)

// numeric implements GreaterThan, GreaterThanOrEquals, LessThan and
// LessThanOrEquals. A string key is tried as a duration (when either side is
// one; numbers count as seconds), a quantity (when both sides are strings),
// a float, an int and finally a semantic version.
func numeric(o Operator, key, value any) bool {
	switch k := key.(type) {
	case int:
		return numberVs(o, float64(k), key, value)
	case int64:
		return numberVs(o, float64(k), key, value)
	case float64:
		return numberVs(o, k, key, value)
	case string:
		if kd, vd, ok := durations(k, value); ok {
			return o.holds(cmpFloat(kd.Seconds(), vd.Seconds()))
		}
		if v, ok := value.(string); ok {
			if kq, err := resource.ParseQuantity(k); err == nil {
				if vq, err := resource.ParseQuantity(v); err == nil {
					return o.holds(kq.Cmp(vq))
				}
			}
		}
		if f, err := strconv.ParseFloat(k, 64); err == nil {
			return numberVs(o, f, f, value)
		}
		if n, err := strconv.ParseInt(k, 10, 64); err == nil {
			return numberVs(o, float64(n), n, value)
		}
		return versionVs(o, k, value)
	}
	return false
}

// numberVs compares a numeric key k (raw is the key as given, for the
// duration check) with a number or a string holding a duration or number.
func numberVs(o Operator, k float64, raw, value any) bool {
	switch v := value.(type) {
	case int:
		return o.holds(cmpFloat(k, float64(v)))
	case int64:
		return o.holds(cmpFloat(k, float64(v)))
	case float64:
		return o.holds(cmpFloat(k, v))
	case string:
		if kd, vd, ok := durations(raw, value); ok {
			return o.holds(cmpFloat(kd.Seconds(), vd.Seconds()))
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return o.holds(cmpFloat(k, f))
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return o.holds(cmpFloat(k, float64(n)))
		}
	}
	return false
}

// versionVs compares semantic versions: "1.10.0" > "1.9.0". Both sides must
// be strict semver strings.
func versionVs(o Operator, k string, value any) bool {
	v, ok := value.(string)
	if !ok {
		return false
	}
	kv, err := semver.Parse(k)
	if err != nil {
		return false
	}
	vv, err := semver.Parse(v)
	if err != nil {
		return false
	}
	return o.holds(kv.Compare(vv))
}

// durationOp implements the deprecated Duration* operators: the key must be
// a duration string or a number of seconds, and so must the value.
func durationOp(o Operator, key, value any) bool {
	var kd time.Duration
	switch k := key.(type) {
	case string:
		d, err := time.ParseDuration(k)
		if err != nil {
			return false
		}
		kd = d
	default:
		d, ok := seconds(key)
		if !ok {
			return false
		}
		kd = d
	}
	var vd time.Duration
	if v, ok := value.(string); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return false
		}
		vd = d
	} else if d, ok := seconds(value); ok {
		vd = d
	} else {
		return false
	}
	return o.holds(cmpDuration(kd, vd))
}

// durations returns key and value as durations when at least one of them is
// a duration string (other than "0") and the other is a duration string or
// a number of seconds.
func durations(key, value any) (time.Duration, time.Duration, bool) {
	kd, kok := durationString(key)
	vd, vok := durationString(value)
	if !kok && !vok {
		return 0, 0, false
	}
	if !kok {
		if kd, kok = seconds(key); !kok {
			return 0, 0, false
		}
	}
	if !vok {
		if vd, vok = seconds(value); !vok {
			return 0, 0, false
		}
	}
	return kd, vd, true
}

func durationString(x any) (time.Duration, bool) {
	s, ok := x.(string)
	if !ok || s == "0" || !mayBeDuration(s) {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}

// mayBeDuration is a necessary condition for time.ParseDuration to accept
// s: optionally signed, a zero, or a number first and a unit (ns, us, µs,
// ms, s, m, h) last. It spares the numeric operators the error
// ParseDuration allocates for each of the many operands that are plain
// numbers or words.
func mayBeDuration(s string) bool {
	if s != "" && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	if s == "0" { // "-0" and "+0" are durations too
		return true
	}
	if s == "" || !(s[0] >= '0' && s[0] <= '9' || s[0] == '.') {
		return false
	}
	switch s[len(s)-1] {
	case 's', 'm', 'h':
		return true
	}
	return false
}

// seconds converts a number to a duration in whole seconds; a float is
// truncated first, as Kyverno does.
func seconds(x any) (time.Duration, bool) {
	switch n := x.(type) {
	case int:
		return time.Duration(n) * time.Second, true
	case int64:
		return time.Duration(n) * time.Second, true
	case float64:
		return time.Duration(n) * time.Second, true
	}
	return 0, false
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpDuration(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
