package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/charter-dev/charter/engine/wildcard"
)

// evalCondition compares key and value with a condition operator
// (validate-semantics.md §6.3).
//
// Stand-in until engine/conditions lands: it covers the operators and the
// duration, quantity, wildcard and semver comparisons of the spec.
func evalCondition(key any, op string, value any) (bool, error) {
	switch op {
	case "Equals", "Equal":
		return equals(key, value), nil
	case "NotEquals", "NotEqual":
		if key == nil {
			return false, nil
		}
		if !sameKind(key, value) {
			return true, nil
		}
		return !equals(key, value), nil
	case "AnyIn":
		return anyIn(key, value), nil
	case "AllIn":
		return allIn(key, value), nil
	case "AnyNotIn":
		return anyNotIn(key, value), nil
	case "AllNotIn":
		return allNotIn(key, value), nil
	case "In":
		if list, ok := key.([]any); ok {
			return subset(list, value), nil
		}
		return anyIn(key, value), nil
	case "NotIn":
		if list, ok := key.([]any); ok {
			return !subset(list, value), nil
		}
		return !anyIn(key, value), nil
	case "GreaterThan", "DurationGreaterThan":
		return compare(key, value, func(c int) bool { return c > 0 }), nil
	case "GreaterThanOrEquals", "DurationGreaterThanOrEquals":
		return compare(key, value, func(c int) bool { return c >= 0 }), nil
	case "LessThan", "DurationLessThan":
		return compare(key, value, func(c int) bool { return c < 0 }), nil
	case "LessThanOrEquals", "DurationLessThanOrEquals":
		return compare(key, value, func(c int) bool { return c <= 0 }), nil
	}
	return false, fmt.Errorf("unsupported operator %q", op)
}

func sameKind(a, b any) bool {
	switch a.(type) {
	case bool:
		_, ok := b.(bool)
		return ok
	case map[string]any:
		_, ok := b.(map[string]any)
		return ok
	case []any:
		_, ok := b.([]any)
		return ok
	}
	return true
}

func equals(key, value any) bool {
	switch k := key.(type) {
	case nil:
		return false
	case bool:
		v, ok := value.(bool)
		return ok && k == v
	case float64, int, int64:
		kf, _ := toFloat(k)
		vf, ok := toFloat(value)
		return ok && kf == vf
	case string:
		if kd, vd, ok := durations(k, value); ok {
			return kd == vd
		}
		if vs, ok := value.(string); ok {
			if kq, err := resource.ParseQuantity(k); err == nil {
				if vq, err := resource.ParseQuantity(vs); err == nil {
					return kq.Cmp(vq) == 0
				}
			}
			return wildcard.Match(vs, k)
		}
		if vf, ok := toFloat(value); ok {
			kf, err := strconv.ParseFloat(k, 64)
			return err == nil && kf == vf
		}
		return false
	default:
		return reflect.DeepEqual(key, value)
	}
}

func toFloat(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	case string:
		f, err := strconv.ParseFloat(t, 64)
		return f, err == nil
	}
	return 0, false
}

// durations converts both sides to seconds when either is a duration string
// ("0" excluded); a number counts as seconds.
func durations(key, value any) (float64, float64, bool) {
	kd, kIs := asDuration(key)
	vd, vIs := asDuration(value)
	if !kIs && !vIs {
		return 0, 0, false
	}
	if !kIs {
		f, ok := toFloat(key)
		if !ok {
			return 0, 0, false
		}
		kd = f
	}
	if !vIs {
		f, ok := toFloat(value)
		if !ok {
			return 0, 0, false
		}
		vd = f
	}
	return kd, vd, true
}

func asDuration(v any) (float64, bool) {
	s, ok := v.(string)
	if !ok || s == "0" {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, false
	}
	return d.Seconds(), true
}

func compare(key, value any, ok func(int) bool) bool {
	if key == nil {
		return false
	}
	if kd, vd, is := durations(key, value); is {
		return ok(cmpFloat(kd, vd))
	}
	ks, kIsString := key.(string)
	vs, vIsString := value.(string)
	if kIsString && vIsString {
		if kq, err := resource.ParseQuantity(ks); err == nil {
			if vq, err := resource.ParseQuantity(vs); err == nil {
				return ok(kq.Cmp(vq))
			}
		}
	}
	if kf, kok := toFloat(key); kok {
		if vf, vok := toFloat(value); vok {
			return ok(cmpFloat(kf, vf))
		}
	}
	if kIsString && vIsString {
		kv, err1 := semver.Parse(ks)
		vv, err2 := semver.Parse(vs)
		if err1 == nil && err2 == nil {
			return ok(kv.Compare(vv))
		}
	}
	return false
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	if math.IsNaN(a) || math.IsNaN(b) {
		return 2
	}
	return 0
}

func stringify(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// valueSet returns the elements of a condition value for the In operators:
// a list, a JSON-encoded list string, or a single scalar.
func valueSet(value any) ([]any, string) {
	switch t := value.(type) {
	case []any:
		return t, ""
	case string:
		var list []any
		if strings.HasPrefix(t, "[") && json.Unmarshal([]byte(t), &list) == nil {
			return list, ""
		}
		return []any{t}, t
	default:
		return []any{stringify(t)}, ""
	}
}

// inRange reports whether key lies in a range value "A-B"; ok is false when
// value is not a range.
func inRange(key any, rng string) (in, ok bool) {
	if rng == "" {
		return false, false
	}
	idx := strings.Index(rng[1:], "-")
	if idx < 0 {
		return false, false
	}
	lo, hi := rng[:idx+1], rng[idx+2:]
	loQ, err1 := resource.ParseQuantity(lo)
	hiQ, err2 := resource.ParseQuantity(hi)
	if err1 != nil || err2 != nil {
		return false, false
	}
	kq, err := resource.ParseQuantity(stringify(key))
	if err != nil {
		return false, true
	}
	return kq.Cmp(loQ) >= 0 && kq.Cmp(hiQ) <= 0, true
}

func memberOf(k any, value any) bool {
	set, single := valueSet(value)
	if in, ok := inRange(k, single); ok {
		return in
	}
	ks := stringify(k)
	for _, v := range set {
		vs := stringify(v)
		if wildcard.Match(vs, ks) || wildcard.Match(ks, vs) {
			return true
		}
	}
	return false
}

func keys(key any) []any {
	if list, ok := key.([]any); ok {
		return list
	}
	return []any{key}
}

func anyIn(key, value any) bool {
	for _, k := range keys(key) {
		if memberOf(k, value) {
			return true
		}
	}
	return false
}

func allIn(key, value any) bool {
	for _, k := range keys(key) {
		if !memberOf(k, value) {
			return false
		}
	}
	return true
}

func anyNotIn(key, value any) bool {
	for _, k := range keys(key) {
		if !memberOf(k, value) {
			return true
		}
	}
	return false
}

func allNotIn(key, value any) bool {
	for _, k := range keys(key) {
		if memberOf(k, value) {
			return false
		}
	}
	return true
}

func subset(list []any, value any) bool {
	set, _ := valueSet(value)
	for _, k := range list {
		found := false
		for _, v := range set {
			if stringify(k) == stringify(v) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
