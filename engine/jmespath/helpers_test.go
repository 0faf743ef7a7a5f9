package jmespath

import (
	"encoding/json"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fnCase is one expression evaluated against data. Exactly one of want and
// wantErr is checked: wantErr is a substring of the error.
type fnCase struct {
	expr    string
	data    string // JSON; empty means null
	want    any
	wantErr string
}

var testNow = time.Date(2024, 3, 10, 12, 30, 45, 0, time.FixedZone("CET", 3600))

func testInterpreter() *Interpreter {
	return New(
		WithClock(func() time.Time { return testNow }),
		WithLookupIP(func(host string) ([]net.IP, error) {
			switch host {
			case "internal.example":
				return []net.IP{net.ParseIP("10.0.0.1")}, nil
			case "public.example":
				return []net.IP{net.ParseIP("93.184.216.34")}, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}),
		WithRandom(func(n int) int { return n / 2 }),
	)
}

func runFnCases(t *testing.T, cases []fnCase) {
	t.Helper()
	i := testInterpreter()
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			var data any
			if tc.data != "" {
				if err := json.Unmarshal([]byte(tc.data), &data); err != nil {
					t.Fatal(err)
				}
			}
			got, err := i.Search(tc.expr, data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v (result %#v), want containing %q", err, got, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("= %#v, want %#v", got, tc.want)
			}
		})
	}
}
