package generate

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// The selectors a controller uses find exactly the objects generated for a
// trigger, and the clones of a source.
func TestDownstreamAndCloneLabels(t *testing.T) {
	trigger := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "ns", "uid": "t-1"}}
	other := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "ns2", "uid": "t-2"}}
	src := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "namespace": "default", "uid": "s-1"}}
	rule := &kyvernov1.Rule{Name: "copy", Generation: &kyvernov1.Generation{GeneratePattern: kyvernov1.GeneratePattern{
		ResourceSpec: kyvernov1.ResourceSpec{APIVersion: "v1", Kind: "Secret", Name: "s", Namespace: "{{request.object.metadata.name}}"},
		Clone:        kyvernov1.CloneFrom{Namespace: "default", Name: "s"},
	}}}
	policy := PolicyRef{Name: "p"}
	gen := func(tr map[string]any) labels.Set {
		objs, err := Generate(context.Background(), policy, rule, RefOf(tr), triggerDocument(t, tr, nil), Env{Objects: NewObjects(src)})
		if err != nil || len(objs) != 1 {
			t.Fatalf("Generate: %v %v", objs, err)
		}
		return labels.Set(stringLabels(objs[0].Object))
	}
	mine, theirs := gen(trigger), gen(other)
	for _, rule := range []string{"", "copy"} {
		sel := DownstreamLabels(policy, rule, RefOf(trigger)).AsSelector()
		if !sel.Matches(mine) || sel.Matches(theirs) {
			t.Errorf("DownstreamLabels(rule %q) = %v: matches own object %v, other trigger's %v", rule, sel, sel.Matches(mine), sel.Matches(theirs))
		}
	}
	if sel := DownstreamLabels(policy, "other-rule", RefOf(trigger)).AsSelector(); sel.Matches(mine) {
		t.Errorf("DownstreamLabels of another rule matches")
	}
	sel := CloneLabels(RefOf(src)).AsSelector()
	if !sel.Matches(mine) || !sel.Matches(theirs) {
		t.Errorf("CloneLabels %v does not match the clones", sel)
	}
	otherSrc := RefOf(src)
	otherSrc.UID = "s-2"
	if CloneLabels(otherSrc).AsSelector().Matches(mine) {
		t.Errorf("CloneLabels of another source matches")
	}
}
