package clusterstate

import (
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/charter-dev/charter/engine/match"
)

// ResourceType is a listable, watchable API resource a policy can match.
type ResourceType struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

// APIVersion is the apiVersion of the resource's objects.
func (t ResourceType) APIVersion() string { return t.GVR.GroupVersion().String() }

// Kinds maps the kinds policies name ("Pod", "apps/v1/Deployment",
// "batch/*/Job") to served resources, through discovery. The discovery
// answer is cached; callers Refresh it when a kind is not found, since
// CRDs come and go. The reports and background controllers use it.
type Kinds struct {
	disco discovery.DiscoveryInterface

	mu    sync.Mutex
	types []ResourceType
}

// NewKinds returns a resolver asking disco; call Refresh before Resolve.
func NewKinds(disco discovery.DiscoveryInterface) *Kinds { return &Kinds{disco: disco} }

// Refresh asks discovery for the served resources again.
func (r *Kinds) Refresh() error {
	lists, err := discovery.ServerPreferredResources(r.disco)
	if err != nil && len(lists) == 0 {
		return fmt.Errorf("discovering API resources: %w", err)
	}
	// A partial answer (an aggregated API that is down) still serves the
	// rest.
	var types []ResourceType
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, res := range l.APIResources {
			if strings.Contains(res.Name, "/") || !hasVerbs(res.Verbs, "list", "watch", "get") {
				continue
			}
			types = append(types, ResourceType{GVR: gv.WithResource(res.Name), Kind: res.Kind, Namespaced: res.Namespaced})
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

// ResolveResource returns the resource types a ValidatingPolicy resource
// rule names (group and version may be "*"); a wildcard or subresource
// resource matches requests, not stored objects, and resolves to nothing.
func (r *Kinds) ResolveResource(group, version, resource string) []ResourceType {
	if resource == "*" || strings.Contains(resource, "/") {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ResourceType
	for _, t := range r.types {
		if t.GVR.Resource == resource && (group == "*" || group == t.GVR.Group) && (version == "*" || version == t.GVR.Version) {
			out = append(out, t)
		}
	}
	return out
}

// Resolve returns the resource types a kind selector names. Subresource
// selectors ("Pod/exec") and wildcard kinds match requests, not stored
// objects, and resolve to nothing: a background scan of every kind in the
// cluster is not something a policy should get by accident.
func (r *Kinds) Resolve(selector string) []ResourceType {
	k := match.ParseKind(selector)
	if k.SubResource != "" || k.Kind == "" || strings.ContainsAny(k.Kind, "*?") {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ResourceType
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
