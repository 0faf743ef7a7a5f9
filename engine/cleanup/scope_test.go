package cleanup

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/internal/testcases"
	"github.com/charter-dev/charter/engine/loader"
)

// recordedCalls answers every apiCall with an empty object and keeps the
// calls.
type recordedCalls struct{ calls []loader.APICall }

func (r *recordedCalls) Call(_ context.Context, c loader.APICall) (any, error) {
	r.calls = append(r.calls, c)
	return map[string]any{}, nil
}

// TestCleanupPolicyReadsItsNamespace: a namespaced CleanupPolicy's
// context entries are confined to its namespace too.
func TestCleanupPolicyReadsItsNamespace(t *testing.T) {
	for ns, wantErr := range map[string]bool{"team-a": false, "team-b": true} {
		src := &kyvernov2.CleanupPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "sweep", Namespace: "team-a"},
			Spec: kyvernov2.CleanupPolicySpec{
				Schedule: "*/5 * * * *",
				Context: []kyvernov1.ContextEntry{{Name: "cms", APICall: &kyvernov1.ContextAPICall{
					APICall: kyvernov1.APICall{URLPath: "/api/v1/namespaces/" + ns + "/configmaps"}}}},
				MatchResources: kyvernov2.MatchResources{Any: kyvernov1.ResourceFilters{{ResourceDescription: kyvernov1.ResourceDescription{
					Kinds: []string{"ConfigMap"}}}}},
			},
		}
		p, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		api := testcases.APIPaths{"/api/v1/namespaces/team-a/configmaps": map[string]any{}, "/api/v1/namespaces/team-b/configmaps": map[string]any{}}
		_, err = p.Prepare(context.Background(), loader.Loaders{APICalls: api})
		if (err != nil) != wantErr || (wantErr && !strings.Contains(err.Error(), `own namespace "team-a"`)) {
			t.Errorf("reading %s's ConfigMaps: %v, want error %v", ns, err, wantErr)
		}
	}
}

// askedGlobalContext records for whom each entry is read: the namespace
// of a namespaced policy, "(cluster)" for a cluster-wide one.
type askedGlobalContext struct{ asked []string }

func (g *askedGlobalContext) GlobalContextEntry(context.Context, string) (any, error) {
	g.asked = append(g.asked, "(cluster)")
	return map[string]any{}, nil
}

func (g *askedGlobalContext) GlobalContextEntryForNamespace(_ context.Context, _, namespace string) (any, error) {
	g.asked = append(g.asked, namespace)
	return map[string]any{}, nil
}

// TestCleanupPolicyCallsAsItsNamespace: a namespaced CleanupPolicy's
// service calls and global context reads are made for its namespace (the
// cluster's loaders refuse them unless it may: not open to namespaced
// policies, service calls not allowed), a ClusterCleanupPolicy's for the
// cluster.
func TestCleanupPolicyCallsAsItsNamespace(t *testing.T) {
	spec := kyvernov2.CleanupPolicySpec{
		Schedule: "*/5 * * * *",
		Context: []kyvernov1.ContextEntry{
			{Name: "svc", APICall: &kyvernov1.ContextAPICall{APICall: kyvernov1.APICall{Service: &kyvernov1.ServiceCall{URL: "https://svc.example/x"}}}},
			{Name: "quota", GlobalReference: &kyvernov1.GlobalContextEntryReference{Name: "quota"}},
		},
		MatchResources: kyvernov2.MatchResources{Any: kyvernov1.ResourceFilters{{ResourceDescription: kyvernov1.ResourceDescription{
			Kinds: []string{"ConfigMap"}}}}},
	}
	for _, tc := range []struct {
		src                kyvernov2.CleanupPolicyInterface
		callAs, globalAsks string
	}{
		{&kyvernov2.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "sweep", Namespace: "team-a"}, Spec: spec}, "team-a", "team-a"},
		{&kyvernov2.ClusterCleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "sweep"}, Spec: spec}, "", "(cluster)"},
	} {
		p, err := Compile(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		api, global := &recordedCalls{}, &askedGlobalContext{}
		if _, err := p.Prepare(context.Background(), loader.Loaders{APICalls: api, GlobalContext: global}); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(api.calls) != 1 || api.calls[0].Namespace != tc.callAs {
			t.Errorf("%s: service calls %+v, want one made for %q", p, api.calls, tc.callAs)
		}
		if len(global.asked) != 1 || global.asked[0] != tc.globalAsks {
			t.Errorf("%s: global context read for %q, want %q", p, global.asked, tc.globalAsks)
		}
	}
}
