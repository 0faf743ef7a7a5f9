package updaterequest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/enginetest"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/webhook/server"
)

// TestMutatingPolicyUpdateRequests: a request a mutate-existing
// MutatingPolicy's matchConstraints and matchConditions select makes one
// mutate UpdateRequest under the policy's rule (its name), labelled with
// the trigger as Kyverno labels them; a false matchCondition or an
// operation it does not match makes none; a DELETE it matches triggers
// with the deleted object; the background controller's own write makes
// none (skipBackgroundRequests defaults to true), unless the policy opts
// back in.
func TestMutatingPolicyUpdateRequests(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "mpol-label-configmaps.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	compile := func(skipOwn bool) *engine.PolicySet {
		var p policiesv1.MutatingPolicy
		if err := yaml.UnmarshalStrict(data, &p); err != nil {
			t.Fatal(err)
		}
		p.Spec.EvaluationConfiguration.SkipBackgroundRequests = &skipOwn
		set := enginetest.Set(t, &p)
		return set
	}
	for _, tc := range []struct {
		name    string
		op      kyvernov1.AdmissionOperation
		object  string
		user    string
		optIn   bool
		wantURs int
	}{
		{name: "selected CREATE", op: kyvernov1.Create, object: "settings", user: "alice", wantURs: 1},
		{name: "a false matchCondition", op: kyvernov1.Create, object: "skipped", user: "alice"},
		{name: "an operation not matched", op: kyvernov1.Update, object: "settings", user: "alice"},
		{name: "a DELETE it matches", op: kyvernov1.Delete, object: "settings", user: "alice", wantURs: 1},
		{name: "the controller's own write", op: kyvernov1.Create, object: "settings", user: backgroundSA},
		{name: "the controller's own write, skipBackgroundRequests false", op: kyvernov1.Create, object: "settings", user: backgroundSA, optIn: true, wantURs: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGenerator(nil, "charter-system", loader.Loaders{}, 0, logr.Discard())
			g.Own = OwnRequests{Users: []string{backgroundSA}}
			req := &engine.Request{Operation: tc.op, UserInfo: authenticationv1.UserInfo{Username: tc.user}}
			if tc.op == kyvernov1.Delete {
				req.OldObject = configMap(tc.object)
			} else {
				req.Object = configMap(tc.object)
			}
			if tc.op == kyvernov1.Update {
				req.OldObject = configMap(tc.object)
			}
			urs := g.Build(context.Background(), server.BackgroundRecord{Request: req, Sets: []*engine.PolicySet{compile(!tc.optIn)}})
			if len(urs) != tc.wantURs {
				t.Fatalf("%d UpdateRequests, want %d: %+v", len(urs), tc.wantURs, urs)
			}
			for _, ur := range urs {
				s := ur.Spec
				if s.Type != kyvernov2.CELMutate || s.Policy != "label-configmaps" || s.Rule != "label-configmaps" ||
					s.Resource.Name != tc.object || string(s.Resource.UID) != "uid-"+tc.object || s.Resource.Kind != "ConfigMap" {
					t.Errorf("UpdateRequest spec %+v", s)
				}
				if ur.Labels[LabelMutatePolicy] != "label-configmaps" || ur.Labels[LabelMutateTriggerName] != tc.object || ur.Labels[LabelMutateTriggerNS] != "team-a" {
					t.Errorf("labels %v", ur.Labels)
				}
			}
		})
	}
}
