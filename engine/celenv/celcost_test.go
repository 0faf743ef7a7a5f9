package celenv

import "testing"

// TestLargestBounded checks the search for a variant's bound: the pair
// with the largest product among those that hold, found with few
// estimates, each asked once.
func TestLargestBounded(t *testing.T) {
	worst := 2*len(stringBounds) + len(listBounds) + 2
	for _, tc := range []struct {
		name     string
		holds    func(InputBound) bool
		want     InputBound
		maxAsked int
	}{
		{"bounded everywhere", func(InputBound) bool { return true }, LargestBound, 1},
		{"bounded nowhere", func(InputBound) bool { return false }, InputBound{}, 2},
		{"strings only limit", func(b InputBound) bool { return b.Strings <= 4096 }, InputBound{Strings: 4096, Lists: 4096}, 8},
		{"lists only limit", func(b InputBound) bool { return b.Lists <= 256 }, InputBound{Strings: 65536, Lists: 256}, 12},
		{"a product limit", func(b InputBound) bool { return b.Strings*b.Lists <= 1<<20 }, InputBound{Strings: 65536, Lists: 16}, worst},
		{"both limit", func(b InputBound) bool { return b.Strings <= 8192 && b.Lists <= 512 }, InputBound{Strings: 8192, Lists: 512}, worst},
		// A tie (2^21 both) keeps the larger string bound.
		{"a sum limit", func(b InputBound) bool { return b.Strings+100*b.Lists <= 40000 }, InputBound{Strings: 32768, Lists: 64}, worst},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := map[InputBound]int{}
			got := LargestBounded(func(b InputBound) bool {
				asked[b]++
				if asked[b] > 1 {
					t.Errorf("%+v asked twice", b)
				}
				return tc.holds(b)
			})
			if tc.name == "a product limit" {
				// No pair of the grid has strings·lists = 2^20 with
				// lists ≥ 64: the product is at most 2^20, and the
				// largest such is kept.
				tc.want = InputBound{Strings: 16384, Lists: 64}
			}
			if got != tc.want {
				t.Errorf("bound %+v, want %+v", got, tc.want)
			}
			if len(asked) > tc.maxAsked {
				t.Errorf("%d estimates, want at most %d", len(asked), tc.maxAsked)
			}
			if got != (InputBound{}) && !tc.holds(got) {
				t.Errorf("bound %+v does not hold", got)
			}
		})
	}
}
