package conditions

import (
	"math"
	"reflect"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/charter-dev/charter/engine/wildcard"
)

// equals dispatches on the key's type. A string key is compared as a
// duration if either side is one, else as a quantity when both are, else
// with the value as a wildcard pattern: "nginx:latest" Equals "*:latest".
func equals(key, value any) bool {
	switch k := key.(type) {
	case bool:
		v, ok := value.(bool)
		return ok && k == v
	case int:
		return intEquals(int64(k), value, false)
	case int64:
		return intEquals(k, value, false)
	case float64:
		return floatEquals(k, value, false)
	case string:
		return stringEquals(k, value, false)
	case map[string]any:
		v, ok := value.(map[string]any)
		return ok && reflect.DeepEqual(k, v)
	case []any:
		v, ok := value.([]any)
		return ok && reflect.DeepEqual(k, v)
	}
	return false // null key: never equal, not even to null
}

// notEquals is the inverse of equals except where Kyverno's NotEquals is
// not: a value of another type than the key is "not equal" (true), an
// integer key against a fractional float is false, and a null key is false.
func notEquals(key, value any) bool {
	switch k := key.(type) {
	case bool:
		v, ok := value.(bool)
		return !ok || k != v
	case int:
		return intEquals(int64(k), value, true)
	case int64:
		return intEquals(k, value, true)
	case float64:
		return floatEquals(k, value, true)
	case string:
		return stringEquals(k, value, true)
	case map[string]any:
		v, ok := value.(map[string]any)
		return !ok || !reflect.DeepEqual(k, v)
	case []any:
		v, ok := value.([]any)
		return !ok || !reflect.DeepEqual(k, v)
	}
	return false
}

// intEquals compares an integer key; negate selects NotEquals, whose
// results on unusable values are written out case by case.
func intEquals(k int64, value any, negate bool) bool {
	switch v := value.(type) {
	case int:
		return (int64(v) == k) != negate
	case int64:
		return (v == k) != negate
	case float64:
		if v != math.Trunc(v) {
			return false // both operators say false
		}
		return (int64(v) == k) != negate
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return negate
		}
		return (n == k) != negate
	}
	return negate
}

func floatEquals(k float64, value any, negate bool) bool {
	switch v := value.(type) {
	case int:
		if k != math.Trunc(k) {
			return negate
		}
		return (int(k) == v) != negate
	case int64:
		if k != math.Trunc(k) {
			return negate
		}
		return (int64(k) == v) != negate
	case float64:
		return (v == k) != negate
	case string:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return negate
		}
		return (f == k) != negate
	}
	return negate
}

func stringEquals(k string, value any, negate bool) bool {
	if kd, vd, ok := durations(k, value); ok {
		return (kd.Seconds() == vd.Seconds()) != negate
	}
	if kq, err := resource.ParseQuantity(k); err == nil {
		if v, isString := value.(string); isString {
			// A value that is no quantity ("") is compared as a string,
			// as Kyverno does since it fixed NotEquals for this case.
			if vq, err := resource.ParseQuantity(v); err == nil {
				return kq.Equal(vq) != negate
			}
		}
	}
	if v, ok := value.(string); ok {
		return wildcard.Match(v, k) != negate
	}
	return negate
}
