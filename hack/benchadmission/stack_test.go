package main

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
)

// TestAPICallsFromTheAPIServersCounters: the counters are summed by verb
// and resource over every code and scope, other metrics are ignored, and
// writes are told from reads.
func TestAPICallsFromTheAPIServersCounters(t *testing.T) {
	data, err := os.ReadFile("testdata/apiserver-requests.txt")
	if err != nil {
		t.Fatal(err)
	}
	after := parseAPICalls(string(data))
	before := apiCalls{"POST events": 23, "GET pods": 80, "POST policyreports": 50}
	got := after.since(before)
	want := apiCalls{"POST events": 100, "PATCH events": 7, "GET policyreports": 400, "GET pods": 300, "WATCH pods": 2}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	total, by := got.writes()
	if total != 107 || by["events"] != 107 || len(by) != 1 {
		t.Errorf("writes %v by %v, want 107, all events", total, by)
	}
	if r := got.reads(); r != 702 {
		t.Errorf("reads %v, want 702", r)
	}
}

func TestStackGoals(t *testing.T) {
	for _, tc := range []struct {
		mode string
		rate float64
		want float64
		ok   bool
	}{
		{"split", 1000, 1.5, true},
		{"split", 3000, 2, true},
		{"dev", 1000, 2, true},
		{"dev", 3000, 0, false},
	} {
		if got, ok := stackGoal(tc.mode, tc.rate); got != tc.want || ok != tc.ok {
			t.Errorf("stackGoal(%s, %g) = %v, %v; want %v, %v", tc.mode, tc.rate, got, ok, tc.want, tc.ok)
		}
	}
}

// TestWithObjectUID: each request's Pod carries a uid of its own in the
// review's object, where charter's audit sink reads it.
func TestWithObjectUID(t *testing.T) {
	w, err := newWorkload(directOptions{noncompliant: 0.5, uniqueNames: true})
	if err != nil {
		t.Fatal(err)
	}
	at := withObjectUID(w.at)
	for _, i := range []int{0, 7} {
		var review struct {
			Request struct {
				Object struct {
					Metadata struct{ Name, UID string } `json:"metadata"`
				} `json:"object"`
			} `json:"request"`
		}
		if err := json.Unmarshal(at(i).body, &review); err != nil {
			t.Fatal(err)
		}
		if got, want := review.Request.Object.Metadata.UID, objectUIDPrefix+strconv.Itoa(i); got != want {
			t.Errorf("request %d: object uid %q, want %q", i, got, want)
		}
		if review.Request.Object.Metadata.Name == "" {
			t.Errorf("request %d: the Pod lost its name", i)
		}
	}
}
