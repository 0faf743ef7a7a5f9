package background

import (
	"strings"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/generate"
)

// TestWriteChecks: the checks right before a background write refuse what
// the engine should never hand over (a patched target that is another
// object than the one read, one without the target it was read as, a
// namespaced policy's generated object in another namespace), so a gap in
// the engine cannot become a write.
func TestWriteChecks(t *testing.T) {
	tenant := &kyvernov1.Policy{}
	tenant.Name, tenant.Namespace = "relabel", "team-a"
	cm := engine.ResourceRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "settings"}
	object := func(kind, ns, name string) map[string]any {
		meta := map[string]any{"name": name}
		if ns != "" {
			meta["namespace"] = ns
		}
		return map[string]any{"apiVersion": "v1", "kind": kind, "metadata": meta}
	}
	for _, tc := range []struct {
		name   string
		target *engine.ResourceRef
		patch  map[string]any
		want   string
	}{
		{"same object", &cm, object("ConfigMap", "team-a", "settings"), ""},
		{"retargeted to a Namespace", &cm, object("Namespace", "", "team-b"),
			"rule label-ns: the patch changes the target's kind from ConfigMap to Namespace and namespace from team-a to \"\" and name from settings to team-b; a mutate-existing patch may not change apiVersion, kind, name or namespace; not written"},
		{"no target read", nil, object("ConfigMap", "team-a", "settings"), "rule label-ns: the engine named no target it read for the patched ConfigMap team-a/settings; not written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkPatchedTarget(tenant, &engine.RuleResponse{Name: "label-ns", Target: tc.target, PatchedTarget: tc.patch})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	d := &generate.DesiredObject{Object: object("ConfigMap", "team-b", "copy"), Policy: generate.PolicyRef{Name: "copy", Namespace: "team-a"}, Rule: "copy"}
	if err := checkGeneratedScope(d); err == nil || !strings.Contains(err.Error(), "only into its own namespace team-a, not team-b; not written") {
		t.Errorf("generated into team-b: %v", err)
	}
	d.Object = object("ConfigMap", "team-a", "copy")
	if err := checkGeneratedScope(d); err != nil {
		t.Errorf("generated into team-a: %v", err)
	}
}
