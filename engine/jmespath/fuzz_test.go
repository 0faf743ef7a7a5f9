package jmespath

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzSearch checks that no expression panics the interpreter: nested
// variables build expressions from resource data, so any text can arrive.
func FuzzSearch(f *testing.F) {
	for _, seed := range []string{
		"a.b", "a.x || 'd'", "list[?n == `1`].n", "to_upper(a)", "sum(`[]`)", "divide('1Gi', `0`)",
		"random('[a-z]{3}')", "x509_decode('')", "items(a, 'k', 'v')", "lookup(list, `-1`)",
		"time_since('', '2024-01-01T00:00:00Z', '')", "image_normalize('nginx')", "foo[", "`{`",
		"modulo('5Gi', '2Gi')", "truncate('abc', `1e300`)", "replace('a', 'a', 'b', `1e300`)", "round(`1`, `400`)",
	} {
		f.Add(seed)
	}
	var data any
	if err := json.Unmarshal([]byte(`{"a": {"b": "c"}, "list": [{"n": 1}, {"m": "2"}], "s": "x"}`), &data); err != nil {
		f.Fatal(err)
	}
	i := New(WithClock(func() time.Time { return time.Unix(0, 0) }), WithLookupIP(nil), WithRandom(func(int) int { return 0 }))
	f.Fuzz(func(t *testing.T, expr string) {
		if len(expr) > 200 {
			return
		}
		_, _ = i.Search(expr, data)
	})
}
