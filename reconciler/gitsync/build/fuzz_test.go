package build

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzBase is a sibling folder every fuzzed kustomization may reach.
const fuzzBase = `apiVersion: v1
kind: ConfigMap
metadata: {name: base}
data: {a: b}
`

// FuzzBuild builds a repository whose folder app holds a fuzzed
// kustomization.yaml (none when empty: a plain folder) and a fuzzed
// res.yaml, beside a folder base with one ConfigMap. Whatever the input,
// Build must not panic; a failure must be *Error naming the folder built;
// every object built must name the repository file it came from, inside the
// repository, and carry no origin annotation of charter's.
func FuzzBuild(f *testing.F) {
	seeds := [][2]string{
		{"", fuzzBase},
		{"resources: [res.yaml]\n", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n"},
		{"resources: [res.yaml, ../base]\nnamePrefix: x-\ncommonLabels: {team: a}\n", "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: ConfigMap, metadata: {name: l}}]\n"},
		{"resources: [../base/cm.yaml]\npatches:\n- patch: |-\n    - op: add\n      path: /data/c\n      value: d\n  target: {kind: ConfigMap}\n", ""},
		{"resources: [https://github.com/example/repo//x?ref=v1]\n", ""},
		{"resources: [res.yaml]\nconfigMapGenerator:\n- name: g\n  literals: [k=v]\n  files: [res.yaml]\n", "k: v\n"},
		{"resources: [res.yaml]\nreplacements:\n- source: {kind: ConfigMap, name: base, fieldPath: data.a}\n  targets: [{select: {kind: ConfigMap}, fieldPaths: [data.z]}]\n", fuzzBase},
		{"components: [../../..]\n", "{"},
		{"resources: [res.yaml, res.yaml]\n", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: twice}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: twice}\n"},
		{"helmCharts: [{name: x, repo: https://example.com}]\n", ""},
		{"generators:\n- |-\n  apiVersion: builtin\n  kind: ConfigMapGenerator\n  metadata: {name: g}\n  files: [/etc/passwd]\n", ""},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, kustomization, resource string) {
		root := t.TempDir()
		write := func(name, data string) {
			p := filepath.Join(root, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write("base/cm.yaml", fuzzBase)
		write("app/res.yaml", resource)
		if kustomization != "" {
			write("app/kustomization.yaml", kustomization)
		}
		objs, err := Build(context.Background(), root, "app")
		if err != nil {
			var berr *Error
			if !errors.As(err, &berr) || berr.Path != "app" {
				t.Fatalf("Build failed without naming the folder app: %T %v", err, err)
			}
			return
		}
		for _, o := range objs {
			if o.File == "" || path.IsAbs(o.File) || o.File != path.Clean(o.File) || strings.HasPrefix(o.File, "..") {
				t.Fatalf("%s %q: file %q is not a file of the repository", o.GetKind(), o.GetName(), o.File)
			}
			if _, ok := o.GetAnnotations()[originAnnotation]; ok {
				t.Fatalf("%s %q keeps the origin annotation", o.GetKind(), o.GetName())
			}
		}
	})
}
