package wildcard

import "testing"

// reference is the textbook recursive definition the library implements,
// memoized on the two positions so that a pattern of many stars (a fuzzer
// found "******************\x10" against 33 runes) takes n·m steps instead
// of exponentially many; the fuzz test checks Match against it.
func reference(pattern, s []rune) bool {
	memo := map[[2]int]bool{}
	var match func(p, i int) bool
	match = func(p, i int) bool {
		key := [2]int{p, i}
		if v, ok := memo[key]; ok {
			return v
		}
		var v bool
		switch {
		case p == len(pattern):
			v = i == len(s)
		case pattern[p] == '*':
			v = match(p+1, i) || (i < len(s) && match(p, i+1))
		case i < len(s) && (pattern[p] == '?' || pattern[p] == s[i]):
			v = match(p+1, i+1)
		}
		memo[key] = v
		return v
	}
	return match(0, 0)
}

func TestMatch(t *testing.T) {
	cases := []struct {
		name, pattern, s string
		want             bool
	}{
		{"empty pattern matches empty", "", "", true},
		{"empty pattern rejects text", "", "a", false},
		{"star matches empty", "*", "", true},
		{"star matches anything", "*", "nginx:latest", true},
		{"literal equal", "nginx", "nginx", true},
		{"literal differs", "nginx", "nginy", false},
		{"literal prefix only", "nginx", "nginx2", false},
		{"suffix star", "nginx*", "nginx:1.25", true},
		{"prefix star", "*:latest", "nginx:latest", true},
		{"prefix star mismatch", "*:latest", "nginx:1.0", false},
		{"middle star", "corp/*/app", "corp/team/app", true},
		{"middle star empty", "a*b", "ab", true},
		{"question needs one char", "?", "", false},
		{"question one char", "?", "x", true},
		{"question star non-empty", "?*", "", false},
		{"question star one", "?*", "5", true},
		{"question not two", "?", "xy", false},
		{"question is a rune", "?", "é", true},
		{"question rune in text", "caf?", "café", true},
		{"backtracking", "*a*b*c", "xaxbxbxc", true},
		{"backtracking fails", "*a*b*c", "xaxbxbx", false},
		{"many stars", "**", "", true},
		{"star then question", "*?", "", false},
		{"star then question", "*?", "a", true},
		{"not alphanumeric only", "a*", "a/b:c@d", true},
		{"no char classes", "[a]", "a", false},
		{"no char classes literal", "[a]", "[a]", true},
		{"trailing literal after star", "*.io", "app.kubernetes.io", true},
		{"dot is literal", "a.c", "abc", false},
	}
	for _, tc := range cases {
		t.Run(tc.name+"/"+tc.pattern+"~"+tc.s, func(t *testing.T) {
			if got := Match(tc.pattern, tc.s); got != tc.want {
				t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
			}
			if ref := reference([]rune(tc.pattern), []rune(tc.s)); ref != tc.want {
				t.Fatalf("test case disagrees with the reference definition")
			}
		})
	}
}

func TestContainsWildcard(t *testing.T) {
	for s, want := range map[string]bool{"": false, "abc": false, "a*": true, "?": true, "a-b": false} {
		if got := ContainsWildcard(s); got != want {
			t.Errorf("ContainsWildcard(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		Match("*corp*/?pp:*-v?", "registry.corp.io/app:1.2-v3")
	})
	if allocs != 0 {
		t.Fatalf("Match allocated %v times per call", allocs)
	}
}

func FuzzMatch(f *testing.F) {
	for _, seed := range [][2]string{
		{"*", ""}, {"?*", "x"}, {"a*b?c", "axxbyc"}, {"*:latest", "nginx:latest"},
		{"ca?é*", "cafée"}, {"\xff*", "\xfe"}, {"**?**", "ab"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 64 || len(s) > 64 {
			return // keep the exponential reference fast
		}
		got := Match(pattern, s)
		if want := reference([]rune(pattern), []rune(s)); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", pattern, s, got, want)
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	for b.Loop() {
		Match("*corp*/?pp:*-v?", "registry.corp.io/app:1.2-v3")
	}
}
