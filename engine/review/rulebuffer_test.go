package review

import (
	"strconv"
	"testing"
)

// TestRuleBufferWindowsStayApart: policies file their responses one after
// another into one buffer, past the room made up front and past a block;
// each policy's Rules holds exactly its own responses, in order, and
// appending to one window never reaches the next policy's responses.
func TestRuleBufferWindowsStayApart(t *testing.T) {
	for _, expect := range []int{-1, 0, 3, ruleBlock + 10} {
		t.Run(strconv.Itoa(expect), func(t *testing.T) {
			var b RuleBuffer
			if expect >= 0 {
				if got := b.Expect(expect); got != min(expect, ruleBlock) {
					t.Fatalf("room for %d, want %d", got, min(expect, ruleBlock))
				}
			}
			sizes := []int{2, 0, 1, 5, ruleBlock + 3, 1}
			var windows [][]RuleResponse
			for p, n := range sizes {
				if p%3 == 2 && n == 1 {
					windows = append(windows, b.One(RuleResponse{Name: strconv.Itoa(p) + "/0"}))
					continue
				}
				start := b.Len()
				for i := range n {
					start = b.Append(start, RuleResponse{Name: strconv.Itoa(p) + "/" + strconv.Itoa(i)})
				}
				windows = append(windows, b.Window(start))
			}
			for p, w := range windows {
				if len(w) != sizes[p] || cap(w) != len(w) {
					t.Fatalf("policy %d: %d rules (cap %d), want %d", p, len(w), cap(w), sizes[p])
				}
				if sizes[p] == 0 && w != nil {
					t.Fatalf("policy %d: empty window %v, want nil", p, w)
				}
				for i, rr := range w {
					if want := strconv.Itoa(p) + "/" + strconv.Itoa(i); rr.Name != want {
						t.Fatalf("policy %d rule %d is %q, want %q", p, i, rr.Name, want)
					}
				}
			}
			_ = append(windows[0], RuleResponse{Name: "extra"})
			if windows[1] != nil || windows[2][0].Name != "2/0" {
				t.Fatalf("appending to a window reached the next one: %v", windows[2])
			}
		})
	}
}
