package conditions

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/charter-dev/charter/engine/wildcard"
)

// The set operators compare stringified elements. The key is a scalar (one
// element) or an array; the value is an array, a JSON-encoded array string,
// a range "A-B" (or "A!-B", everything outside A..B), or a single string,
// number or bool. Wildcards work in both directions between key and value
// elements.

func anyIn(key, value any) bool {
	keys, vs, ok := operands(key, value)
	if !ok {
		return false
	}
	for i := range keys.len() {
		if vs.contains(keys.at(i)) {
			return true
		}
	}
	return false
}

func allIn(key, value any) bool {
	keys, vs, ok := operands(key, value)
	if !ok {
		return false
	}
	for i := range keys.len() {
		if !vs.contains(keys.at(i)) {
			return false
		}
	}
	return true
}

func anyNotIn(key, value any) bool {
	keys, vs, ok := operands(key, value)
	if !ok {
		return false
	}
	for i := range keys.len() {
		if !vs.contains(keys.at(i)) {
			return true
		}
	}
	return false
}

func allNotIn(key, value any) bool {
	keys, vs, ok := operands(key, value)
	if !ok {
		return false
	}
	for i := range keys.len() {
		if vs.contains(keys.at(i)) {
			return false
		}
	}
	return true
}

// operands reads the key as its elements and the value as a set; ok is
// false when either has a type the operators do not take. Neither is
// copied: the Pod Security policies' deny conditions meet a few set
// operators per review, and the value lists are the policies' own.
func operands(key, value any) (keyElements, valueSet, bool) {
	var keys keyElements
	switch k := key.(type) {
	case string:
		keys.one = k
	case bool, int, int64, float64:
		keys.one = fmt.Sprint(k)
	case []any:
		keys.list, keys.isList = k, true
	default:
		return keyElements{}, valueSet{}, false
	}
	vs, ok := parseValueSet(value)
	return keys, vs, ok
}

// keyElements is a scalar key (one element) or an array key's elements,
// stringified as they are read.
type keyElements struct {
	one    string
	list   []any
	isList bool
}

func (k keyElements) len() int {
	if k.isList {
		return len(k.list)
	}
	return 1
}

func (k keyElements) at(i int) string {
	if k.isList {
		return element(k.list[i])
	}
	return k.one
}

// element stringifies one element of a key or value array as fmt.Sprint
// does, without fmt's cost for the common case of a string, which is
// itself (a Pod review meets hundreds of such elements in the Pod Security
// policies' deny conditions).
func element(e any) string {
	if s, ok := e.(string); ok {
		return s
	}
	return fmt.Sprint(e)
}

// valueSet is the right-hand side of a set operator.
type valueSet struct {
	// list holds an array value's elements, stringified (element) as
	// they are compared; items a JSON-encoded array's, or a scalar's.
	list  []any
	items []string
	// literal is a string value itself, matched as a wildcard pattern before
	// its range or JSON reading is tried.
	literal    string
	hasLiteral bool
	rng        *numberRange
}

type numberRange struct {
	lo, hi  string
	outside bool // "A!-B": members are the numbers outside A..B
}

var (
	inRangeRE    = regexp.MustCompile(`^([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)-([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)$`)
	notInRangeRE = regexp.MustCompile(`^([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)!-([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)$`)
)

func parseValueSet(value any) (valueSet, bool) {
	switch v := value.(type) {
	case []any:
		return valueSet{list: v}, true
	case bool, int, int64, float64:
		return valueSet{items: []string{fmt.Sprint(v)}}, true
	case string:
		s := valueSet{literal: v, hasLiteral: true}
		// Both range forms hold a '-' between their bounds; the common
		// value without one skips the expressions.
		if strings.Contains(v, "-") {
			if m := notInRangeRE.FindStringSubmatch(v); m != nil {
				s.rng = &numberRange{lo: m[1], hi: m[2], outside: true}
				return s, true
			}
			if m := inRangeRE.FindStringSubmatch(v); m != nil {
				s.rng = &numberRange{lo: m[1], hi: m[2]}
				return s, true
			}
		}
		if strings.HasPrefix(strings.TrimSpace(v), "[") {
			var arr []string
			if err := json.Unmarshal([]byte(v), &arr); err != nil {
				return valueSet{}, false
			}
			s.items = arr
		}
		return s, true
	}
	return valueSet{}, false
}

func (s valueSet) contains(k string) bool {
	if s.hasLiteral && (wildcard.Match(s.literal, k) || wildcard.Match(k, s.literal)) {
		return true
	}
	if s.rng != nil {
		return s.rng.contains(k)
	}
	for _, e := range s.list {
		if v := element(e); wildcard.Match(v, k) || wildcard.Match(k, v) {
			return true
		}
	}
	for _, v := range s.items {
		if wildcard.Match(v, k) || wildcard.Match(k, v) {
			return true
		}
	}
	return false
}

// contains compares k with the bounds as quantities (plain numbers are
// quantities), or as durations when all three are durations.
func (r *numberRange) contains(k string) bool {
	inside, ok := between(k, r.lo, r.hi)
	if !ok {
		return false
	}
	return inside != r.outside
}

func between(k, lo, hi string) (inside, ok bool) {
	kq, err1 := resource.ParseQuantity(k)
	lq, err2 := resource.ParseQuantity(lo)
	hq, err3 := resource.ParseQuantity(hi)
	if err1 == nil && err2 == nil && err3 == nil {
		return kq.Cmp(lq) >= 0 && kq.Cmp(hq) <= 0, true
	}
	kd, err1 := time.ParseDuration(k)
	ld, err2 := time.ParseDuration(lo)
	hd, err3 := time.ParseDuration(hi)
	if err1 == nil && err2 == nil && err3 == nil {
		return kd >= ld && kd <= hd, true
	}
	return false, false
}

// in implements the deprecated In: a scalar key is looked up with the key
// as the wildcard pattern over the value's elements; an array key must be a
// subset of the value, compared exactly.
func in(key, value any) bool {
	found, ok := deprecatedIn(key, value)
	return ok && found
}

// notIn implements the deprecated NotIn: true when the scalar key is not in
// the value, or when some element of an array key is missing from it.
func notIn(key, value any) bool {
	found, ok := deprecatedIn(key, value)
	return ok && !found
}

func deprecatedIn(key, value any) (found, ok bool) {
	switch k := key.(type) {
	case string:
		return scalarIn(k, value)
	case int, int64, float64:
		return scalarIn(fmt.Sprint(k), value)
	case []any:
		keys := make([]string, len(k))
		for i, e := range k {
			s, isString := e.(string)
			if !isString {
				return false, false
			}
			keys[i] = s
		}
		return subsetOf(keys, value)
	}
	return false, false
}

func scalarIn(k string, value any) (found, ok bool) {
	switch v := value.(type) {
	case []any:
		for _, e := range v {
			if wildcard.Match(k, element(e)) {
				return true, true
			}
		}
		return false, true
	case string:
		if wildcard.Match(v, k) {
			return true, true
		}
		var arr []string
		if err := json.Unmarshal([]byte(v), &arr); err != nil {
			return false, false
		}
		for _, e := range arr {
			if e == k {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}

func subsetOf(keys []string, value any) (found, ok bool) {
	var set []string
	switch v := value.(type) {
	case []any:
		for _, e := range v {
			s, isString := e.(string)
			if !isString {
				return false, false
			}
			set = append(set, s)
		}
	case string:
		if len(keys) == 1 && keys[0] == v {
			return true, true
		}
		if err := json.Unmarshal([]byte(v), &set); err != nil {
			return false, false
		}
	default:
		return false, false
	}
	for _, k := range keys {
		member := false
		for _, s := range set {
			if s == k {
				member = true
				break
			}
		}
		if !member {
			return false, true
		}
	}
	return true, true
}
