package engine

import (
	"context"
	"strings"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// TestRetargetRefused: a mutate-existing patch that changes its target's
// apiVersion, kind, namespace or name is an error on the rule, with no
// patched target to write, for a Policy (patchesJson6902 and
// patchStrategicMerge), a ClusterPolicy, and a NamespacedMutatingPolicy
// (JSONPatch and ApplyConfiguration); patches that keep the identity
// pass. Issue #27: a tenant's Policy relabelled Namespace team-b.
func TestRetargetRefused(t *testing.T) {
	policies, _ := readCELPolicies(t, "retarget/policies.yaml")
	set, err := Compile(policies)
	if err != nil {
		t.Fatal(err)
	}
	store := readObjectStore(t, "retarget/targets.yaml")
	trigger := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "trigger", "namespace": "team-a", "labels": map[string]any{"trigger": "yes"}}}
	resp := set.Mutate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: trigger},
		WithLoaders(loader.Loaders{Objects: fixedObjects(store), Resources: store}), WithMutateExisting())

	// want is the message of each rule's one response ("" for a pass
	// whose patched target keeps the identity).
	want := map[string]string{
		"team-a/relabel-ns/label-ns": "rule label-ns: the patch changes the target's kind from ConfigMap to Namespace and namespace from team-a to \"\" and name from settings to team-b; " +
			"a mutate-existing patch may not change apiVersion, kind, name or namespace",
		"team-a/move-strategic/move":       "rule move: the patch changes the target's namespace from team-a to team-b;",
		"rename-cluster/rename":            "rule rename: the patch changes the target's apiVersion from v1 to v2 and name from settings to other;",
		"label-cluster/label":              "",
		"team-a/nmpol-rename/nmpol-rename": "rule nmpol-rename: the patch changes the target's kind from ConfigMap to Namespace and name from settings to team-b;",
		"team-a/nmpol-apply/nmpol-apply":   "rule nmpol-apply: the patch changes the target's namespace from team-a to team-b and name from settings to other;",
		"mpol-label/mpol-label":            "",
	}
	got := map[string]bool{}
	for _, pr := range resp.Policies {
		for _, rr := range pr.Rules {
			key := pr.Key + "/" + rr.Name
			msg, ok := want[key]
			if !ok {
				t.Errorf("unexpected response %s: %s %s", key, rr.Status, rr.Message)
				continue
			}
			got[key] = true
			if rr.Target == nil || rr.Target.Kind != "ConfigMap" || rr.Target.Name != "settings" {
				t.Errorf("%s: target %v, want ConfigMap team-a/settings", key, rr.Target)
			}
			if msg == "" {
				if rr.Status != review.StatusPass || rr.PatchedTarget == nil {
					t.Errorf("%s: %s %q, want pass with the patched target", key, rr.Status, rr.Message)
				} else if err := review.CheckRetarget(rr.Name, *rr.Target, rr.PatchedTarget); err != nil {
					t.Errorf("%s: %v", key, err)
				}
				continue
			}
			if rr.Status != review.StatusError || !strings.HasPrefix(rr.Message, msg) || rr.PatchedTarget != nil {
				t.Errorf("%s: %s %q (patched target %v), want error %q and nothing to write", key, rr.Status, rr.Message, rr.PatchedTarget != nil, msg)
			}
		}
	}
	for key := range want {
		if !got[key] {
			t.Errorf("no response of %s", key)
		}
	}
}
