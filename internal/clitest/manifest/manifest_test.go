package manifest

import (
	"strings"
	"testing"
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
