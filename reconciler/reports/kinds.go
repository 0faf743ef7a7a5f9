package reports

import (
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/charter-dev/charter/engine/match"
)

// resourceType is a listable, watchable API resource a policy can match.
type resourceType struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

// APIVersion is the apiVersion of the resource's objects.
func (t resourceType) APIVersion() string { return t.GVR.GroupVersion().String() }

// kindResolver maps the kinds policies name ("Pod", "apps/v1/Deployment",
// "batch/*/Job") to served resources, through discovery. The discovery
// answer is cached and refreshed when a kind is not found, since CRDs come
// and go.
type kindResolver struct {
	disco discovery.DiscoveryInterface

	mu    sync.Mutex
	types []resourceType
}

func (r *kindResolver) refresh() error {
	lists, err := discovery.ServerPreferredResources(r.disco)
	if err != nil && len(lists) == 0 {
		return fmt.Errorf("discovering API resources: %w", err)
	}
	// A partial answer (an aggregated API that is down) still serves the
	// rest.
	var types []resourceType
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, res := range l.APIResources {
			if strings.Contains(res.Name, "/") || !hasVerbs(res.Verbs, "list", "watch", "get") {
				continue
			}
			types = append(types, resourceType{GVR: gv.WithResource(res.Name), Kind: res.Kind, Namespaced: res.Namespaced})
		}
	}
	r.mu.Lock()
	r.types = types
	r.mu.Unlock()
	return nil
}

func hasVerbs(verbs []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, v := range verbs {
			if v == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// resolve returns the resource types a kind selector names. Subresource
// selectors ("Pod/exec") and wildcard kinds match requests, not stored
// objects, and resolve to nothing: a background scan of every kind in the
// cluster is not something a policy should get by accident.
func (r *kindResolver) resolve(selector string) []resourceType {
	k := match.ParseKind(selector)
	if k.SubResource != "" || k.Kind == "" || strings.ContainsAny(k.Kind, "*?") {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []resourceType
	for _, t := range r.types {
		if t.Kind != k.Kind {
			continue
		}
		if k.Group != "*" && k.Group != t.GVR.Group {
			continue
		}
		if k.Version != "*" && k.Version != t.GVR.Version {
			continue
		}
		out = append(out, t)
	}
	return out
}
