package main

import (
	"slices"
	"testing"
)

func TestIntList(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "20,200,1000", want: []int{20, 200, 1000}},
		{in: " 17 ", want: []int{17}},
		{in: "20,x", wantErr: true},
		{in: "0", wantErr: true},
		{in: "-5", wantErr: true},
	} {
		var l intList
		err := l.Set(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("Set(%q): err = %v, want an error: %v", tc.in, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && !slices.Equal(l, tc.want) {
			t.Errorf("Set(%q) = %v (%s), want %v", tc.in, []int(l), l.String(), tc.want)
		}
	}
}

func TestIntListString(t *testing.T) {
	if got := (&intList{20, 200, 1000}).String(); got != "20,200,1000" {
		t.Errorf("String() = %q", got)
	}
}
