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
	"time"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// A compiled CEL policy part (a validate.cel rule, webhook
// matchConditions; engine/vpol and engine/mpol test their variants) is
// shared by the sets compiled with one CompileCache while a set holds it,
// and dropped from the cache once none does, so a process that compiles
// policy after policy (every edit in the cluster, every suite of charter
// test) does not keep them all. Without a cache nothing is shared.
func TestCompiledVariantsAreSharedThenReleased(t *testing.T) {
	const marker = "TestCompiledVariantsAreSharedThenReleased"
	tests := []struct {
		name     string
		manifest string
		policy   func() kyvernov1.PolicyInterface
		// compiled is the shared part of the set's first policy.
		compiled func(*PolicySet) any
	}{{
		name: "ClusterPolicy validate.cel",
		manifest: `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: released}
spec:
  rules:
  - name: cel
    match:
      any:
      - resources: {kinds: [Pod]}
    validate:
      cel:
        expressions:
        - expression: "'TestCompiledVariantsAreSharedThenReleased' != ''"
`,
		policy:   func() kyvernov1.PolicyInterface { return &kyvernov1.ClusterPolicy{} },
		compiled: func(s *PolicySet) any { return s.policies[0].cpol.rules[0].validate.cel },
	}, {
		name: "webhook matchConditions",
		manifest: `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: released}
spec:
  webhookConfiguration:
    matchConditions:
    - {name: released, expression: "'TestCompiledVariantsAreSharedThenReleased' != ''"}
  rules:
  - name: deny
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {failureAction: Enforce, deny: {}}
`,
		policy:   func() kyvernov1.PolicyInterface { return &kyvernov1.ClusterPolicy{} },
		compiled: func(s *PolicySet) any { return s.policies[0].cpol.webhookConditions },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			compile := func(opts ...CompileOption) *PolicySet {
				p := tt.policy()
				if err := yaml.UnmarshalStrict([]byte(tt.manifest), p); err != nil {
					t.Fatal(err)
				}
				set, err := Compile([]kyvernov1.PolicyInterface{p}, opts...)
				if err != nil {
					t.Fatal(err)
				}
				return set
			}
			if ca, cb := tt.compiled(compile()), tt.compiled(compile()); ca == nil || ca == cb {
				t.Error("compiled twice without a CompileCache, the policy shared its compiled part")
			}
			cache := NewCompileCache()
			a, b := compile(WithCompileCache(cache)), compile(WithCompileCache(cache))
			if ca, cb := tt.compiled(a), tt.compiled(b); ca == nil || ca != cb {
				t.Error("the same policy compiled twice with one CompileCache did not share its compiled part")
			}
			if ca, cc := tt.compiled(a), tt.compiled(compile(WithCompileCache(NewCompileCache()))); ca == cc {
				t.Error("two CompileCaches shared a compiled part")
			}
			if n := cache.parts.Len(marker); n != 1 {
				t.Fatalf("%d cache entries while sets hold the policy, want 1", n)
			}
			runtime.KeepAlive(a)
			runtime.KeepAlive(b)
			deadline := time.Now().Add(10 * time.Second)
			for cache.parts.Len(marker) != 0 {
				if time.Now().After(deadline) {
					t.Fatal("the cache still holds the compiled part after every set holding it is gone")
				}
				runtime.GC()
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

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
