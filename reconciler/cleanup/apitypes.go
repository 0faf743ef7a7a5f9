package cleanup

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/charter-dev/charter/engine/match"
)

// apiType is an API resource the controller can list, watch and delete.
type apiType struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

// GVK is the kind of the type's objects.
func (t apiType) GVK() schema.GroupVersionKind { return t.GVR.GroupVersion().WithKind(t.Kind) }

// discoverDeletable returns the preferred version of every resource that
// serves list, watch and delete. A partial answer (an aggregated API that
// is down) still returns the rest.
func discoverDeletable(disco discovery.DiscoveryInterface) ([]apiType, error) {
	lists, err := discovery.ServerPreferredResources(disco)
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discovering API resources: %w", err)
	}
	var out []apiType
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			out = append(out, apiType{GVR: gv.WithResource(r.Name), Kind: r.Kind, Namespaced: r.Namespaced})
		}
	}
	return out, nil
}

// resolveKind returns the types a cleanup policy's kind selector names
// (Kind, version/Kind or group/version/Kind; the engine refuses wildcards
// and subresources in cleanup policies).
func resolveKind(types []apiType, selector string) []apiType {
	k := match.ParseKind(selector)
	var out []apiType
	for _, t := range types {
		if t.Kind == k.Kind && (k.Group == "*" || k.Group == t.GVR.Group) && (k.Version == "*" || k.Version == t.GVR.Version) {
			out = append(out, t)
		}
	}
	return out
}
