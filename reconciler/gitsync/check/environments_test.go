package check

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

// TestEnvironments builds the repository's own environments/ overlays the
// way gitsync does and checks them: every environment renders every library
// policy, each compiles, and every environment stages exactly the Pod
// Security restricted set (dev too, since a5053c6, so that promoting a
// namespace there enforces something). dev runs the generate and mutate
// policies of the library too.
func TestEnvironments(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	restricted := folderNames(t, filepath.Join(root, "policies", "pod-security", "restricted"))
	library := append(append(restricted,
		folderNames(t, filepath.Join(root, "policies", "pod-security", "baseline"))...),
		folderNames(t, filepath.Join(root, "policies", "best-practices"))...)
	devOnly := append(folderNames(t, filepath.Join(root, "policies", "generate")),
		folderNames(t, filepath.Join(root, "policies", "mutate"))...)

	for _, env := range []string{"dev", "staging", "prod"} {
		t.Run(env, func(t *testing.T) {
			g := NewWithT(t)
			objs, err := build.Build(context.Background(), root, "environments/"+env)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(Objects(objs, testScheme())).To(Succeed())

			var names, staged []string
			for _, o := range objs {
				g.Expect(o.GetKind()).To(Equal("ClusterPolicy"))
				g.Expect(o.File).To(Equal(findPolicyFile(root, o.GetName())))
				g.Expect(o.GetLabels()).To(HaveKeyWithValue("charter.dev/environment", env))
				names = append(names, o.GetName())
				if o.GetLabels()["charter.dev/staged"] == "true" {
					staged = append(staged, o.GetName())
				}
			}
			want := library
			if env == "dev" {
				want = append(append([]string(nil), library...), devOnly...)
			}
			g.Expect(names).To(ConsistOf(want))
			g.Expect(staged).To(ConsistOf(restricted))
		})
	}
}

func folderNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// findPolicyFile returns the repository path of the library policy name.
func findPolicyFile(root, name string) string {
	matches, _ := filepath.Glob(filepath.Join(root, "policies", "*", "*", name, name+".yaml"))
	matches2, _ := filepath.Glob(filepath.Join(root, "policies", "*", name, name+".yaml"))
	for _, m := range append(matches, matches2...) {
		rel, _ := filepath.Rel(root, m)
		return filepath.ToSlash(rel)
	}
	return ""
}
