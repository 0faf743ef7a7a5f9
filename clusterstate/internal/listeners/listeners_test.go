package listeners

import (
	"slices"
	"testing"
)

func TestAddRemove(t *testing.T) {
	var s Set[func() string]
	removeA := s.Add(func() string { return "a" })
	s.Add(func() string { return "b" })
	removeC := s.Add(func() string { return "c" })
	held := s.All()
	removeA()
	removeA() // a second remove changes nothing
	removeC()
	var got []string
	for _, fn := range s.All() {
		got = append(got, fn())
	}
	if !slices.Equal(got, []string{"b"}) {
		t.Errorf("after removing a and c: %v, want [b]", got)
	}
	// What All returned before stays as it was.
	if len(held) != 3 || held[0]() != "a" || held[2]() != "c" {
		t.Errorf("a listing taken before the removals changed: %d listeners", len(held))
	}
}
