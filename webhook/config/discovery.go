package config

import (
	"errors"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/charter-dev/charter/engine/wildcard"
)

// DiscoveryResolver resolves kinds through the API server's discovery, at
// each group's preferred version (the webhooks use matchPolicy
// Equivalent, so other versions are covered too).
type DiscoveryResolver struct {
	client discovery.DiscoveryInterface

	mu      sync.RWMutex
	entries []discovered
}

type discovered struct {
	Resource
	kind, sub string
}

// NewDiscoveryResolver returns a resolver; call Refresh before Resolve.
func NewDiscoveryResolver(client discovery.DiscoveryInterface) *DiscoveryResolver {
	return &DiscoveryResolver{client: client}
}

// Refresh reloads the resources the API server serves. Groups that fail
// discovery (an aggregated API that is down) are an error: building
// without them would drop policies from the webhook.
func (d *DiscoveryResolver) Refresh() error {
	lists, err := d.client.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return err
	}
	var failed *discovery.ErrGroupDiscoveryFailed
	partial := errors.As(err, &failed)
	var entries []discovered
	for _, list := range lists {
		gv, perr := schema.ParseGroupVersion(list.GroupVersion)
		if perr != nil {
			continue
		}
		kinds := map[string]string{}
		for _, r := range list.APIResources {
			if !strings.Contains(r.Name, "/") {
				kinds[r.Name] = r.Kind
			}
		}
		for _, r := range list.APIResources {
			parent, sub, _ := strings.Cut(r.Name, "/")
			kind := kinds[parent]
			if kind == "" {
				continue
			}
			entries = append(entries, discovered{
				Resource: Resource{Group: gv.Group, Version: gv.Version, Resource: r.Name, Namespaced: r.Namespaced},
				kind:     kind, sub: sub,
			})
		}
	}
	d.mu.Lock()
	d.entries = entries
	d.mu.Unlock()
	if partial {
		return err
	}
	return nil
}

// Resolve implements Resolver. Kind, group, version and subresource may
// hold wildcards; an empty group or version matches any.
func (d *DiscoveryResolver) Resolve(group, version, kind, sub string) ([]Resource, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var out []Resource
	for _, e := range d.entries {
		if !wildcard.Match(kind, e.kind) ||
			(group != "" && !wildcard.Match(group, e.Group)) ||
			(version != "" && !wildcard.Match(version, e.Version)) {
			continue
		}
		if (sub == "" && e.sub != "") || (sub != "" && !wildcard.Match(sub, e.sub)) {
			continue
		}
		out = append(out, e.Resource)
	}
	return out, nil
}
