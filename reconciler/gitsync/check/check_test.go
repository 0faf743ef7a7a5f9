package check

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/api/versions"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(versions.AddToScheme(s))
	return s
}

// load reads a testdata file as the build package would return it.
func load(t *testing.T, file string) []build.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var objs []build.Object
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, build.Object{Unstructured: &unstructured.Unstructured{Object: m}, File: "repo/" + file})
	}
	return objs
}

func TestObjects(t *testing.T) {
	tests := []struct {
		file string
		// want are the faults' strings; none means the revision is valid.
		want []string
	}{
		{file: "valid.yaml"},
		{file: "no-rules.yaml", want: []string{`repo/no-rules.yaml: ClusterPolicy "empty": spec.rules: a policy needs at least one rule`}},
		{file: "unknown-field.yaml", want: []string{`repo/unknown-field.yaml: ClusterPolicy "typo": unknown field "spec.rules[0].match.any[0].resources.kindz"`}},
		{file: "core-unknown-field.yaml", want: []string{`repo/core-unknown-field.yaml: ConfigMap "team-a/settings": unknown field "dataa"`}},
		{file: "no-name.yaml", want: []string{`repo/no-name.yaml: ConfigMap "team-a/": an object needs apiVersion, kind and metadata.name`}},
		{file: "duplicate.yaml", want: []string{`repo/duplicate.yaml: Policy "team-a/twice": declared again (first in repo/duplicate.yaml)`}},
		{file: "bad-vpol.yaml", want: []string{`repo/bad-vpol.yaml: ValidatingPolicy "not-bool": spec.validations[0].expression: must evaluate to bool but got dyn`}},
		{file: "bad-mpol.yaml", want: []string{`repo/bad-mpol.yaml: MutatingPolicy "not-an-object": spec.mutations[0].applyConfiguration.expression: must evaluate to Object but got dyn`}},
		{file: "bad-exception.yaml", want: []string{`repo/bad-exception.yaml: PolicyException "team-a/allow-all": spec.exceptions: an exception needs at least one policy`}},
		{file: "bad-schedule.yaml", want: []string{`repo/bad-schedule.yaml: ClusterCleanupPolicy "stale-configmaps": spec.schedule: invalid schedule "61 * * * *": end of range (61) above maximum (59): 61`}},
		{file: "unsupported.yaml", want: []string{
			`repo/unsupported.yaml: ClusterPolicy "verify-assert": spec.rules[0].validate.assert: validate.assert is not supported by charter anywhere yet`,
		}},
		{file: "unsupported-audit.yaml"},
		{file: "older-versions.yaml", want: []string{
			`repo/older-versions.yaml: ValidatingPolicy "not-bool": spec.validations[0].expression: must evaluate to bool but got dyn`,
			`repo/older-versions.yaml: ClusterPolicy "empty": spec.rules: a policy needs at least one rule`,
			`repo/older-versions.yaml: PolicyException "team-a/allow-all": spec.exceptions: an exception needs at least one policy`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			g := NewWithT(t)
			err := Objects(load(t, tt.file), testScheme())
			if len(tt.want) == 0 {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(BeAssignableToTypeOf(&Error{}))
			var got []string
			for _, f := range err.(*Error).Faults {
				got = append(got, f.String())
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestOneInvalidObjectFailsTheWholeRevision(t *testing.T) {
	g := NewWithT(t)
	objs := append(load(t, "valid.yaml"), load(t, "no-rules.yaml")...)
	err := Objects(objs, testScheme())
	g.Expect(err).To(MatchError(ContainSubstring(`invalid revision: repo/no-rules.yaml: ClusterPolicy "empty"`)))
}

// TestNamespacedCalls: a revision with a namespaced policy that calls out
// is refused as policy admission refuses it, naming the file and field,
// unless the process allows such calls.
func TestNamespacedCalls(t *testing.T) {
	g := NewWithT(t)
	err := Objects(load(t, "namespaced-calls.yaml"), testScheme())
	g.Expect(err).To(BeAssignableToTypeOf(&Error{}))
	var got []string
	for _, f := range err.(*Error).Faults {
		got = append(got, f.String())
	}
	g.Expect(got).To(Equal([]string{
		`repo/namespaced-calls.yaml: Policy "team-a/lookup": spec.rules[0].context[0].apiCall.service.url: a namespaced policy may not call out (charter serve --allow-http-in-namespaced-policies)`,
		`repo/namespaced-calls.yaml: NamespacedValidatingPolicy "team-a/remote": spec.validations[0].expression: http.* is not allowed in namespaced policies; set --allow-http-in-namespaced-policies to enable`,
	}))
	g.Expect(Objects(load(t, "namespaced-calls.yaml"), testScheme(), AllowNamespacedCalls(true))).To(Succeed())
}
