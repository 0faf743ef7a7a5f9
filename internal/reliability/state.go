package reliability

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// State is what a cluster holds: every object of every listable resource,
// by "resource namespace/name", with what a change of it changes: its
// generation where the API server keeps one (a policy's spec; status
// written by charter's controllers is theirs to move), else its
// resourceVersion.
type State map[string]string

// volatile are resources the control plane itself rewrites all the time;
// no bad input reaches them.
var volatile = map[string]bool{
	"events":                     true,
	"events.events.k8s.io":       true,
	"leases.coordination.k8s.io": true,
}

// Snapshot lists every object of every resource the API server serves
// (but Events and Leases) and returns the cluster's State.
func Snapshot(ctx context.Context, cfg *rest.Config) (State, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	lists, err := disc.ServerPreferredResources()
	if err != nil {
		return nil, fmt.Errorf("discovering the cluster's resources: %w", err)
	}
	state := State{}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range list.APIResources {
			id := r.Name
			if gv.Group != "" {
				id += "." + gv.Group
			}
			if volatile[id] || !slices.Contains(r.Verbs, "list") || strings.Contains(r.Name, "/") {
				continue
			}
			objs, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", id, err)
			}
			for _, o := range objs.Items {
				key := id + " " + o.GetName()
				if ns := o.GetNamespace(); ns != "" {
					key = id + " " + ns + "/" + o.GetName()
				}
				if g := o.GetGeneration(); g != 0 {
					state[key] = "generation " + strconv.FormatInt(g, 10)
				} else {
					state[key] = "resourceVersion " + o.GetResourceVersion()
				}
			}
		}
	}
	return state, nil
}

// Diff lists what differs from before to after: objects created, deleted
// or changed.
func (before State) Diff(after State) []string {
	var out []string
	for k, v := range before {
		switch w, ok := after[k]; {
		case !ok:
			out = append(out, k+" deleted")
		case w != v:
			out = append(out, fmt.Sprintf("%s changed (%s, then %s)", k, v, w))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			out = append(out, k+" created")
		}
	}
	sort.Strings(out)
	return out
}
