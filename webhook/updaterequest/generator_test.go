package updaterequest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/api/charter"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/enginetest"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/webhook/server"
)

const (
	backgroundSA = "system:serviceaccount:charter-system:charter-background"
	developer    = "kubernetes-admin"
)

func loadPolicy(t *testing.T, file string, edit func(*kyvernov1.ClusterPolicy)) *engine.PolicySet {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var p kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&p)
	}
	set := enginetest.Set(t, &p)
	return set
}

func configMap(name string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "team-a", "uid": "uid-" + name}}
}

// TestOwnRequestsTriggerNothing: the background controller's own writes
// (its ServiceAccount's, or a shared identity's with its field manager)
// trigger no rule that skips background requests, so a policy whose
// generated kind is its trigger kind does not feed itself; everyone
// else's requests, the shared identity's other writes included, still
// do, and skipBackgroundRequests: false opts a rule back in.
func TestOwnRequestsTriggerNothing(t *testing.T) {
	own := OwnRequests{Users: []string{backgroundSA}, SharedUsers: []string{developer}}
	optIn := func(p *kyvernov1.ClusterPolicy) {
		f := false
		for i := range p.Spec.Rules {
			p.Spec.Rules[i].SkipBackgroundRequests = &f
		}
	}
	for _, tc := range []struct {
		name         string
		user         string
		fieldManager string
		edit         func(*kyvernov1.ClusterPolicy)
		want         []kyvernov2.RequestType
	}{
		{name: "someone else", user: "alice", want: []kyvernov2.RequestType{kyvernov2.Generate, kyvernov2.Mutate}},
		{name: "someone else claiming the field manager", user: "alice", fieldManager: charter.BackgroundFieldManager, want: []kyvernov2.RequestType{kyvernov2.Generate, kyvernov2.Mutate}},
		{name: "the controller's ServiceAccount", user: backgroundSA, fieldManager: "kubectl", want: nil},
		{name: "the shared identity's own write", user: developer, fieldManager: charter.BackgroundFieldManager, want: nil},
		{name: "the shared identity's other write", user: developer, fieldManager: "kubectl-client-side-apply", want: []kyvernov2.RequestType{kyvernov2.Generate, kyvernov2.Mutate}},
		{name: "skipBackgroundRequests false", user: backgroundSA, edit: optIn, want: []kyvernov2.RequestType{kyvernov2.Generate, kyvernov2.Mutate}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := loadPolicy(t, "copy-configmaps.yaml", tc.edit)
			g := NewGenerator(nil, "charter-system", loader.Loaders{}, 0, logr.Discard())
			g.Own = own
			rec := server.BackgroundRecord{
				Request: &engine.Request{Operation: kyvernov1.Create, Object: configMap("settings"),
					UserInfo: authenticationv1.UserInfo{Username: tc.user}},
				Sets: []*engine.PolicySet{set}, FieldManager: tc.fieldManager,
			}
			var got []kyvernov2.RequestType
			for _, ur := range g.Build(context.Background(), rec) {
				got = append(got, ur.Spec.Type)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("UpdateRequests of types %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("UpdateRequest %d is %s, want %s", i, got[i], tc.want[i])
				}
			}
			if skipped := g.OwnSkipped(); (skipped == 1) != (tc.want == nil) {
				t.Errorf("OwnSkipped %d", skipped)
			}
		})
	}
}

// TestTenantServiceAccountWritesAreOwnForItsNamespaceOnly: the background
// controller writes for a namespaced policy as the ServiceAccount
// charter-policy of the policy's namespace, so that ServiceAccount's
// requests are its own for that namespace's namespaced policies (a Policy
// copying ConfigMaps does not feed itself), and for nothing else. The
// namespace's owner holds the ServiceAccount too: written as it, a
// ConfigMap still triggers every cluster-scoped policy, and another
// namespace's ServiceAccount of that name, or another ServiceAccount of the
// namespace, is anyone.
func TestTenantServiceAccountWritesAreOwnForItsNamespaceOnly(t *testing.T) {
	const policySA = "charter-policy"
	own := OwnRequests{Users: []string{backgroundSA}, NamespacedPolicyServiceAccount: policySA}
	cluster := loadPolicy(t, "copy-configmaps.yaml", nil)
	namespaced := func(ns string) *engine.PolicySet {
		cp := cluster.Policies()[0].Source().(*kyvernov1.ClusterPolicy)
		p := &kyvernov1.Policy{ObjectMeta: metav1.ObjectMeta{Name: cp.Name, Namespace: ns}, Spec: *cp.Spec.DeepCopy()}
		set := enginetest.Set(t, p)
		return set
	}
	both := []kyvernov2.RequestType{kyvernov2.Generate, kyvernov2.Mutate}
	for _, tc := range []struct {
		name string
		own  OwnRequests
		user string
		set  *engine.PolicySet
		want []kyvernov2.RequestType
	}{
		{name: "team-a's ServiceAccount, team-a's Policy", own: own, user: "system:serviceaccount:team-a:charter-policy", set: namespaced("team-a")},
		{name: "team-a's ServiceAccount, a ClusterPolicy", own: own, user: "system:serviceaccount:team-a:charter-policy", set: cluster, want: both},
		{name: "team-b's ServiceAccount, team-a's Policy", own: own, user: "system:serviceaccount:team-b:charter-policy", set: namespaced("team-a"), want: both},
		{name: "another ServiceAccount of team-a, team-a's Policy", own: own, user: "system:serviceaccount:team-a:default", set: namespaced("team-a"), want: both},
		{name: "a user named like it", own: own, user: "charter-policy", set: namespaced("team-a"), want: both},
		{name: "no namespaced-policy ServiceAccount configured", own: OwnRequests{Users: []string{backgroundSA}}, user: "system:serviceaccount:team-a:charter-policy", set: namespaced("team-a"), want: both},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGenerator(nil, "charter-system", loader.Loaders{}, 0, logr.Discard())
			g.Own = tc.own
			rec := server.BackgroundRecord{
				Request: &engine.Request{Operation: kyvernov1.Create, Namespace: "team-a", Object: configMap("settings"),
					UserInfo: authenticationv1.UserInfo{Username: tc.user}},
				Sets: []*engine.PolicySet{tc.set},
			}
			var got []kyvernov2.RequestType
			for _, ur := range g.Build(context.Background(), rec) {
				got = append(got, ur.Spec.Type)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("UpdateRequests of types %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDeleteContexts: a trigger's DELETE generates from the deleted object
// for a rule that names DELETE, deletes the downstream objects of a
// synchronized rule that does not, and does nothing for a rule that does
// neither (§2.2).
func TestDeleteContexts(t *testing.T) {
	onDelete := func(p *kyvernov1.ClusterPolicy) {
		p.Spec.Rules = p.Spec.Rules[:1]
		p.Spec.Rules[0].MatchResources.Any[0].ResourceDescription.Operations = []kyvernov1.AdmissionOperation{kyvernov1.Delete}
	}
	synchronized := func(p *kyvernov1.ClusterPolicy) {
		p.Spec.Rules = p.Spec.Rules[:1]
		p.Spec.Rules[0].Generation.Synchronize = true
	}
	plain := func(p *kyvernov1.ClusterPolicy) { p.Spec.Rules = p.Spec.Rules[:1] }
	for _, tc := range []struct {
		name             string
		edit             func(*kyvernov1.ClusterPolicy)
		wantContexts     int
		deleteDownstream bool
	}{
		{name: "rule names DELETE", edit: onDelete, wantContexts: 1},
		{name: "synchronized rule", edit: synchronized, wantContexts: 1, deleteDownstream: true},
		{name: "neither", edit: plain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGenerator(nil, "charter-system", loader.Loaders{}, 0, logr.Discard())
			rec := server.BackgroundRecord{
				Request: &engine.Request{Operation: kyvernov1.Delete, OldObject: configMap("settings"),
					UserInfo: authenticationv1.UserInfo{Username: "alice"}},
				Sets: []*engine.PolicySet{loadPolicy(t, "copy-configmaps.yaml", tc.edit)},
			}
			var contexts []kyvernov2.RuleContext
			for _, ur := range g.Build(context.Background(), rec) {
				contexts = append(contexts, ur.Spec.RuleContext...)
			}
			if len(contexts) != tc.wantContexts {
				t.Fatalf("rule contexts %+v, want %d", contexts, tc.wantContexts)
			}
			for _, rc := range contexts {
				if rc.Trigger.UID != "uid-settings" || rc.DeleteDownstream != tc.deleteDownstream {
					t.Errorf("rule context %+v, want the deleted object as trigger, deleteDownstream %v", rc, tc.deleteDownstream)
				}
			}
		})
	}
}

// TestGeneratingPolicyDeleteTrigger: a GeneratingPolicy that asks for
// DELETE passes for the deleted object, which is then the UpdateRequest's
// trigger (a DELETE carries no new object: an empty trigger would leave
// the background controller nothing to generate from); its CREATE makes
// no UpdateRequest.
func TestGeneratingPolicyDeleteTrigger(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "gpol-on-delete.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p policiesv1.GeneratingPolicy
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatal(err)
	}
	set := enginetest.Set(t, &p)
	for _, tc := range []struct {
		name    string
		req     *engine.Request
		wantURs int
	}{
		{name: "DELETE", req: &engine.Request{Operation: kyvernov1.Delete, OldObject: configMap("settings")}, wantURs: 1},
		{name: "CREATE", req: &engine.Request{Operation: kyvernov1.Create, Object: configMap("settings")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGenerator(nil, "charter-system", loader.Loaders{}, 0, logr.Discard())
			tc.req.UserInfo = authenticationv1.UserInfo{Username: "alice"}
			urs := g.Build(context.Background(), server.BackgroundRecord{Request: tc.req, Sets: []*engine.PolicySet{set}})
			if len(urs) != tc.wantURs {
				t.Fatalf("%d UpdateRequests, want %d: %+v", len(urs), tc.wantURs, urs)
			}
			for _, ur := range urs {
				s := ur.Spec
				if s.Type != kyvernov2.CELGenerate || s.Resource.Name != "settings" || len(s.RuleContext) != 1 {
					t.Fatalf("UpdateRequest spec %+v", s)
				}
				if rc := s.RuleContext[0]; rc.Trigger.UID != "uid-settings" || rc.Trigger.Kind != "ConfigMap" || rc.Trigger.Namespace != "team-a" || rc.DeleteDownstream {
					t.Errorf("rule context %+v, want the deleted ConfigMap as trigger and no deleteDownstream", rc)
				}
			}
		})
	}
}

// TestAdmittedDropsWhenFullWithoutBlocking: a full queue refuses the
// admitted request at once, counts it, and says it in the log once per
// interval, not once per request.
func TestAdmittedDropsWhenFullWithoutBlocking(t *testing.T) {
	set := loadPolicy(t, "copy-configmaps.yaml", nil)
	var lines []string
	log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
	g := NewGenerator(nil, "charter-system", loader.Loaders{}, 1, log)
	rec := server.BackgroundRecord{
		Request: &engine.Request{Operation: kyvernov1.Create, Object: configMap("settings"), UserInfo: authenticationv1.UserInfo{Username: "alice"}},
		Sets:    []*engine.PolicySet{set},
	}
	got := []bool{g.Admitted(rec), g.Admitted(rec), g.Admitted(rec)}
	if want := []bool{true, false, false}; !slices.Equal(got, want) {
		t.Fatalf("Admitted = %v, want %v (no worker runs: the queue of 1 stays full)", got, want)
	}
	if _, _, dropped := g.Counts(); dropped != 2 {
		t.Errorf("dropped %d, want 2", dropped)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "UpdateRequest queue full") || !strings.Contains(lines[0], `"dropped"=1`) {
		t.Errorf("log lines %q, want one line for the first drop (the second waits for the next interval)", lines)
	}
}
