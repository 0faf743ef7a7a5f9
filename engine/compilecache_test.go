package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// The engine keeps no compiled policy part across calls on its own: a
// cache is the caller's (CompileCache), so no package under engine/ may
// declare a package-level variable of a compile cache's type. What the
// check looks for is the name of such a type in a package-level var
// declaration (its type or its value): celruntime.Cache, CompileCache and
// the WeakCache it replaced.
func TestNoPackageLevelCompileCache(t *testing.T) {
	cacheTypes := map[string]bool{"Cache": true, "CompileCache": true, "WeakCache": true}
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			ast.Inspect(gd, func(n ast.Node) bool {
				var name string
				switch n := n.(type) {
				case *ast.SelectorExpr:
					name = n.Sel.Name
				case *ast.Ident:
					name = n.Name
				}
				if cacheTypes[name] {
					t.Errorf("%s: a package-level variable uses %s: a compile cache belongs to the caller (engine.CompileCache, WithCompileCache)", fset.Position(n.Pos()), name)
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("looked at %d files under engine/, want the engine's sources", files)
	}
}

// TestCompileCacheReachesTheClusterPolicyCompile: the cache a caller gives
// Compile (WithCompileCache) is the one the kyverno.io kind compiles its
// CEL parts into (engine/cpol tests the sharing itself): two sets compiled
// with one cache hold one entry of the rule, and a set compiled without
// one leaves the cache alone.
func TestCompileCacheReachesTheClusterPolicyCompile(t *testing.T) {
	const marker = "TestCompileCacheReachesTheClusterPolicyCompile"
	src := &kyvernov1.ClusterPolicy{}
	if err := yaml.UnmarshalStrict([]byte(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: cached}
spec:
  rules:
  - name: cel
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      cel:
        expressions:
        - expression: "'`+marker+`' != ''"
`), src); err != nil {
		t.Fatal(err)
	}
	cache := NewCompileCache()
	var sets []*PolicySet
	for range 2 {
		set, err := Compile([]kyvernov1.PolicyInterface{src}, WithCompileCache(cache))
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, set)
	}
	if n := cache.parts.Len(marker); n != 1 {
		t.Errorf("two sets compiled with one cache: %d entries of the rule, want 1", n)
	}
	if _, err := Compile([]kyvernov1.PolicyInterface{src}, WithCompileCache(NewCompileCache())); err != nil {
		t.Fatal(err)
	}
	if n := cache.parts.Len(marker); n != 1 {
		t.Errorf("after a compile with another cache: %d entries, want 1", n)
	}
	runtime.KeepAlive(sets)
}
