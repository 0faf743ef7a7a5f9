package jmespath

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCompileErrorNamesExpression(t *testing.T) {
	_, err := New().Compile("foo[")
	var ce *CompileError
	if !errors.As(err, &ce) || ce.Expression != "foo[" || !strings.Contains(err.Error(), `"foo["`) {
		t.Fatalf("Compile(foo[) error = %v, want CompileError naming the expression", err)
	}
}

func TestCompileCaches(t *testing.T) {
	i := New()
	q1, err := i.Compile("a.b")
	if err != nil {
		t.Fatal(err)
	}
	q2, _ := i.Compile("a.b")
	if q1 != q2 {
		t.Error("second Compile of the same expression did not return the cached query")
	}
}

func TestCompileCacheIsBounded(t *testing.T) {
	i := New(WithCacheSize(2))
	for _, e := range []string{"a", "b", "c", "d"} {
		if _, err := i.Compile(e); err != nil {
			t.Fatal(err)
		}
	}
	if n := i.cached.Load(); n > 2 {
		t.Errorf("cache holds %d entries, want at most 2", n)
	}
}

func TestMissingKeyIsNotFound(t *testing.T) {
	_, err := New().Search("a.x", map[string]any{"a": map[string]any{}})
	if !IsNotFound(err) {
		t.Fatalf("error = %v, want NotFoundError", err)
	}
	if err.Error() != `Unknown key "x" in path` {
		t.Errorf("message = %q", err.Error())
	}
	if IsNotFound(errors.New("other")) {
		t.Error("IsNotFound(other) = true")
	}
}

func TestFunctionsListsEveryCustomFunction(t *testing.T) {
	var custom int
	names := map[string]bool{}
	for _, f := range New().Functions() {
		if names[f.Name] {
			t.Errorf("function %s listed twice", f.Name)
		}
		names[f.Name] = true
		if f.Custom {
			custom++
		}
		if !strings.HasPrefix(f.Signature, f.Name+"(") || f.Description == "" {
			t.Errorf("function %s: bad info %+v", f.Name, f)
		}
	}
	if custom != 51 {
		t.Errorf("%d custom functions, want 51", custom)
	}
}

func TestArgumentChecking(t *testing.T) {
	i := New()
	for _, tc := range []struct{ expr, want string }{
		{"to_upper(`1`)", "Invalid type for: 1"},
		{"to_upper('a', 'b')", "incorrect number of args"},
		{"time_now('x')", "expects no arguments"},
		{"no_such_fn('x')", "unknown function: no_such_fn"},
	} {
		_, err := i.Search(tc.expr, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want containing %q", tc.expr, err, tc.want)
		}
	}
}

func TestConcurrentSearch(t *testing.T) {
	i := New(WithCacheSize(8))
	data := map[string]any{"a": map[string]any{"b": "c"}}
	done := make(chan error)
	for w := 0; w < 4; w++ {
		go func(w int) {
			var err error
			for n := 0; n < 200 && err == nil; n++ {
				var got any
				// More distinct expressions than cache slots, to exercise eviction.
				got, err = i.Search(fmt.Sprintf("a.b || '%d'", n%20), data)
				if err == nil && got != "c" {
					err = fmt.Errorf("got %v", got)
				}
			}
			done <- err
		}(w)
	}
	for w := 0; w < 4; w++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestMayReadRoot: which top-level entries an expression may read, as the
// tree interpreter evaluates it; whenever it cannot tell, any.
func TestMayReadRoot(t *testing.T) {
	i := New()
	tests := []struct {
		expr string
		want map[string]bool
	}{
		{"request.object.metadata.name", map[string]bool{"request": true, "images": false}},
		{"images.containers.*.tag", map[string]bool{"images": true, "request": false}},
		{"request.object.spec.volumes[].keys(@)[] || `[]`", map[string]bool{"request": true, "images": false}},
		{"request.object.spec.containers[?name == 'images'].image", map[string]bool{"request": true, "images": false}},
		{"length(images.initContainers || `{}`) > `0`", map[string]bool{"images": true}},
		{"[request.name, serviceAccountName]", map[string]bool{"request": true, "serviceAccountName": true, "images": false}},
		{"{a: request.name}", map[string]bool{"request": true, "images": false}},
		{"sort_by(request.object.spec.containers, &images)", map[string]bool{"request": true, "images": false}},
		{"request | images", map[string]bool{"request": true, "images": false}},
		{"@", map[string]bool{"images": true, "anything": true}},
		{"to_string(@)", map[string]bool{"images": true}},
		{"@ | images", map[string]bool{"images": true}},
		{"!images", map[string]bool{"images": true, "request": false}},
		{"`1`", map[string]bool{"images": false}},
		{"not a (valid expression", map[string]bool{"images": true}},
	}
	for _, tc := range tests {
		for key, want := range tc.want {
			if got := i.MayReadRoot(tc.expr, key); got != want {
				t.Errorf("MayReadRoot(%q, %q) = %v, want %v", tc.expr, key, got, want)
			}
		}
	}
}
