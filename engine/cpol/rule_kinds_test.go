package cpol

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/match"
)

// TestRuleKindPrefilterKeepsMatching checks that turning requests away by
// kind name before walking the filters (rule.kindNames) never changes
// whether a rule selects: for match blocks of every form built from kind
// selectors of every shape, and requests for kinds and subresources that
// meet them, selects agrees with match.Selects.
func TestRuleKindPrefilterKeepsMatching(t *testing.T) {
	selectors := []string{
		"Pod", "Deployment", "*", "Po?", "P*", "*/Pod", "v1/Pod", "apps/v1/Deployment", "apps/v1/*",
		"Pod/exec", "Pod/*", "Pod.status", "v1/Pod/ephemeralcontainers", "batch/v1/CronJob", "Namespace",
		"", "P\xffd", "P\uFFFDd", "pod", "Pods", "core/v1/Pod", "*/*/Pod/status", "a/b/c/d/e",
	}
	blocks := []func(kinds []string) *kyvernov1.MatchResources{
		func(k []string) *kyvernov1.MatchResources {
			return &kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{ResourceDescription: kyvernov1.ResourceDescription{Kinds: k}}}}
		},
		func(k []string) *kyvernov1.MatchResources {
			return &kyvernov1.MatchResources{All: kyvernov1.ResourceFilters{{ResourceDescription: kyvernov1.ResourceDescription{Kinds: k}}}}
		},
		func(k []string) *kyvernov1.MatchResources {
			return &kyvernov1.MatchResources{ResourceDescription: kyvernov1.ResourceDescription{Kinds: k}}
		},
		// Two filters: the kinds, and one on the name only (any kind).
		func(k []string) *kyvernov1.MatchResources {
			return &kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{
				{ResourceDescription: kyvernov1.ResourceDescription{Kinds: k}},
				{ResourceDescription: kyvernov1.ResourceDescription{Name: "web"}},
			}}
		},
		// Two filters with kinds, all of which must hold.
		func(k []string) *kyvernov1.MatchResources {
			return &kyvernov1.MatchResources{All: kyvernov1.ResourceFilters{
				{ResourceDescription: kyvernov1.ResourceDescription{Kinds: k}},
				{ResourceDescription: kyvernov1.ResourceDescription{Kinds: []string{"Pod", "Deployment"}}},
			}}
		},
		func([]string) *kyvernov1.MatchResources { return &kyvernov1.MatchResources{} },
	}
	requests := []match.Resource{}
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "Pod"}, {Group: "apps", Version: "v1", Kind: "Deployment"}, {Version: "v1", Kind: "Namespace"},
		{Group: "batch", Version: "v1", Kind: "CronJob"}, {Version: "v1", Kind: "Pods"}, {Version: "v1", Kind: "pod"},
		{Version: "v1", Kind: "P\xfed"}, {Version: "v1", Kind: ""}, {Group: "core", Version: "v1", Kind: "Pod"},
	} {
		for _, sub := range []string{"", "exec", "status", "ephemeralcontainers"} {
			requests = append(requests, match.Resource{Kind: gvk, SubResource: sub, Name: "web", Namespace: "default", Operation: kyvernov1.Create})
		}
	}
	lists := [][]string{nil}
	for i, s := range selectors {
		lists = append(lists, []string{s}, []string{s, selectors[(i+7)%len(selectors)]})
	}
	checked, turnedAway := 0, 0
	for bi, block := range blocks {
		for _, kinds := range lists {
			m := block(kinds)
			r := &rule{match: m, kindNames: matchKindNames(m)}
			for i := range requests {
				res := &requests[i]
				want := match.Selects(m, nil, res)
				if got := r.selects(res); got != want {
					t.Errorf("block %d, kinds %q (kindNames %q), request %s/%s: selects %v, match.Selects %v",
						bi, kinds, r.kindNames, fmt.Sprint(res.Kind), res.SubResource, got, want)
				}
				if r.kindNames != nil && !want {
					turnedAway++
				}
				checked++
			}
		}
	}
	if turnedAway == 0 {
		t.Fatalf("no request of %d was turned away by kind name: the prefilter is not exercised", checked)
	}
}
