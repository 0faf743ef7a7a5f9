package manifest

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/charter-dev/charter/clusterstate/policycheck"
)

func TestSplitKeepsDocumentNumbers(t *testing.T) {
	docs, err := ReadFile("testdata/mixed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 5 {
		t.Fatalf("got %d documents, want 5 (the comment-only one dropped)", len(docs))
	}
	if got, want := docs[0].Where(), "testdata/mixed.yaml (document 2)"; got != want {
		t.Errorf("Where() = %q, want %q", got, want)
	}
}

func TestSplitReportsTheBrokenDocument(t *testing.T) {
	_, err := Split([]byte("a: 1\n---\nb: [1\n"), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "x.yaml (document 2)") {
		t.Errorf("got %v, want an error naming x.yaml (document 2)", err)
	}
}

func TestDecodePolicies(t *testing.T) {
	docs, err := ReadFile("testdata/mixed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := DecodePolicies(docs)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Policies) != 2 || p.Policies[0].GetName() != "cp" || p.Policies[1].GetNamespace() != "default" {
		t.Errorf("policies: %v", p.Policies)
	}
	if len(p.Exceptions) != 1 || p.Exceptions[0].Namespace != "kyverno" {
		t.Errorf("exceptions: %v", p.Exceptions)
	}
	if p.Unsupported["vap"] != "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy" {
		t.Errorf("unsupported: %v", p.Unsupported)
	}
	if len(p.Others) != 1 || !strings.Contains(p.Others[0], "List") {
		t.Errorf("others: %v", p.Others)
	}
}

func TestObjectsExpandsListsAndDefaultsNamespaces(t *testing.T) {
	docs, err := ReadFile("testdata/mixed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(docs[4:])
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Fatalf("got %d objects, want the 2 list items", len(objs))
	}
	for _, o := range objs {
		DefaultNamespace(o)
	}
	if objs[0].GetNamespace() != "default" || objs[1].GetNamespace() != "" {
		t.Errorf("namespaces: Pod %q (want default), Namespace %q (want none)", objs[0].GetNamespace(), objs[1].GetNamespace())
	}
	if _, err := Objects([]Document{{Source: "f.yaml", Value: map[string]any{"metadata": map[string]any{}}}}); err == nil ||
		!strings.Contains(err.Error(), "f.yaml: missing apiVersion or kind") {
		t.Errorf("got %v", err)
	}
}

// TestDecodePoliciesEveryServedVersion: every version Kyverno 1.19 serves
// decodes into the hub type, and a version it does not serve (v1alpha1 of
// a Namespaced kind) is a policy charter does not evaluate, as in Kyverno's
// CLI.
func TestDecodePoliciesEveryServedVersion(t *testing.T) {
	docs, err := Split([]byte(`apiVersion: policies.kyverno.io/v1alpha1
kind: ValidatingPolicy
metadata: {name: alpha}
spec: {validations: [{expression: "true"}]}
---
apiVersion: policies.kyverno.io/v1beta1
kind: NamespacedValidatingPolicy
metadata: {name: beta, namespace: team-a}
spec: {validations: [{expression: "true"}]}
---
apiVersion: kyverno.io/v2beta1
kind: ClusterPolicy
metadata: {name: cpol}
spec: {rules: []}
---
apiVersion: policies.kyverno.io/v1alpha1
kind: PolicyException
metadata: {name: ex, namespace: team-a}
spec: {policyRefs: [{name: alpha, kind: ValidatingPolicy}]}
---
apiVersion: policies.kyverno.io/v1alpha1
kind: NamespacedValidatingPolicy
metadata: {name: never-served, namespace: team-a}
spec: {validations: [{expression: "true"}]}
`), "versions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := DecodePolicies(docs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, pol := range p.Policies {
		got = append(got, pol.GetKind()+"/"+pol.GetName())
	}
	if want := "ValidatingPolicy/alpha NamespacedValidatingPolicy/beta ClusterPolicy/cpol"; strings.Join(got, " ") != want {
		t.Errorf("policies: %v, want %s", got, want)
	}
	if len(p.CELExceptions) != 1 || p.CELExceptions[0].Spec.PolicyRefs[0].Name != "alpha" {
		t.Errorf("CEL exceptions: %v", p.CELExceptions)
	}
	if p.Unsupported["never-served"] != "policies.kyverno.io/v1alpha1 NamespacedValidatingPolicy" {
		t.Errorf("unsupported: %v", p.Unsupported)
	}
}

// TestDecodePoliciesIsStrict: a policy document is decoded as policy
// admission and the GitOps check decode it, so an unknown or duplicated
// field is refused, naming the file and document, the kind and name, and
// the field, in every group and served version.
func TestDecodePoliciesIsStrict(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"unknown field in a ClusterPolicy", `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-labels}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validat: {pattern: {metadata: {name: "?*"}}}
`, []string{"policies/x.yaml (document 2): ClusterPolicy require-labels:", `unknown field "spec.rules[0].validat"`}},
		{"unknown field in a served older version", `apiVersion: kyverno.io/v2beta1
kind: Policy
metadata: {name: p, namespace: team-a}
spec: {rulez: []}
`, []string{"policies/x.yaml (document 2): Policy team-a/p:", `unknown field "spec.rulez"`}},
		{"unknown field in a CEL policy", `apiVersion: policies.kyverno.io/v1beta1
kind: ValidatingPolicy
metadata: {name: vp}
spec: {validations: [{expresion: "true"}]}
`, []string{"ValidatingPolicy vp:", `unknown field "spec.validations[0].expresion"`}},
		{"unknown field in a PolicyException", `apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: ex, namespace: team-a}
spec: {exceptions: [{policyName: p, ruleNames: [r]}], matchh: {}}
`, []string{"PolicyException team-a/ex:", `unknown field "spec.matchh"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A first document, so the index in the message is seen.
			docs, err := Split([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n"+tt.doc), "policies/x.yaml")
			if err != nil {
				t.Fatal(err)
			}
			_, err = DecodePolicies(docs)
			if err == nil {
				t.Fatalf("DecodePolicies() = nil, want an error containing %q", tt.want)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("DecodePolicies() = %v, want it to contain %q", err, want)
				}
			}
		})
	}
}

// TestDefaultNamespaceFollowsTheKindTable: a resource of a kind charter
// serves gets the namespace "default" exactly when the kind table
// (policycheck) says the kind is namespaced: the CLI keeps no list of
// Kyverno's kinds of its own (issue #32: it had one, without
// GlobalContextEntry, which it put in "default").
func TestDefaultNamespaceFollowsTheKindTable(t *testing.T) {
	kinds := policycheck.All()
	if len(kinds) == 0 {
		t.Fatal("the kind table is empty")
	}
	for _, k := range kinds {
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion(k.Group + "/v1")
		obj.SetKind(k.Kind)
		obj.SetName("x")
		DefaultNamespace(obj)
		want := ""
		if k.Namespaced {
			want = "default"
		}
		if got := obj.GetNamespace(); got != want || IsClusterScoped(k.Kind) == k.Namespaced {
			t.Errorf("%s.%s (namespaced %v): namespace %q, want %q; IsClusterScoped %v",
				k.Kind, k.Group, k.Namespaced, got, want, IsClusterScoped(k.Kind))
		}
	}
}
