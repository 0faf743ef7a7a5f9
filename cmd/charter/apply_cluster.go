package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate/loaders"
	"github.com/charter-dev/charter/engine/autogen"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/wildcard"
	"github.com/charter-dev/charter/internal/cliapply"
)

// clusterSource is `charter apply --cluster`: the current kubeconfig's
// cluster supplies the resources (without --resource) and what the
// policies look up as they evaluate.
type clusterSource struct {
	enabled    bool
	namespace  string
	kubeconfig string

	kube      kubernetes.Interface
	dyn       dynamic.Interface
	resources []*metav1.APIResourceList
}

// configure connects to the cluster and points the run's loaders and, when
// no --resource is given, its resources at it.
func (c *clusterSource) configure(_ context.Context, opts *cliapply.Options) error {
	cfg, err := restConfig(c.kubeconfig)
	if err != nil {
		return fmt.Errorf("--cluster: %w", err)
	}
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("--cluster: %w", err)
	}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return fmt.Errorf("--cluster: %w", err)
	}
	c.resources, err = c.kube.Discovery().ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return fmt.Errorf("--cluster: discovery at %s: %w", cfg.Host, err)
	}
	opts.Loaders.ConfigMaps = loaders.ConfigMaps{Client: c.kube}
	calls := loaders.NewAPICalls(c.kube)
	// The CLI runs on the user's own machine with the user's own reach,
	// as Kyverno's CLI does: its calls are not held by the egress guard
	// that charter serve applies, and a namespaced policy's run as they
	// would in Kyverno's CLI.
	calls.HTTPLimits = loaders.HTTPLimits{Blocklist: []string{}, AllowNamespacedPolicies: true}
	opts.Loaders.APICalls = calls
	opts.Loaders.Namespaces = c
	opts.Loaders.Objects = c
	if len(opts.ResourcePaths) == 0 {
		opts.ResourcesFor = c.resourcesFor
	}
	return nil
}

// NamespaceLabels reads a namespace's labels (loader.NamespaceLabelsLoader).
func (c *clusterSource) NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	ns, err := c.kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return ns.Labels, nil
}

// Objects lists existing objects of a kind (loader.ObjectLoader): mutate
// targets and generate clone sources. The engine filters names and
// namespaces with wildcards again.
func (c *clusterSource) Objects(ctx context.Context, q loader.ObjectQuery) ([]map[string]any, error) {
	gv, err := schema.ParseGroupVersion(q.APIVersion)
	if err != nil {
		return nil, err
	}
	found := c.find(match.KindSelector{Group: gv.Group, Version: gv.Version, Kind: q.Kind})
	if len(found) == 0 {
		return nil, fmt.Errorf("the cluster serves no %s %s", q.APIVersion, q.Kind)
	}
	namespace := q.Namespace
	if wildcard.ContainsWildcard(namespace) {
		namespace = ""
	}
	var list metav1.ListOptions
	if q.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(q.Selector)
		if err != nil {
			return nil, err
		}
		list.LabelSelector = sel.String()
	}
	items, err := c.list(ctx, found[0], namespace, list)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		out = append(out, it.Object)
	}
	return out, nil
}

// servedResource is a listable resource of the cluster.
type servedResource struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
}

// find returns the listable resources of a kind selector: every group that
// serves the kind when the selector names none.
func (c *clusterSource) find(k match.KindSelector) []servedResource {
	var out []servedResource
	for _, l := range c.resources {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		if (k.Group != "*" && k.Group != gv.Group) || (k.Version != "*" && k.Version != "" && k.Version != gv.Version) {
			continue
		}
		for _, r := range l.APIResources {
			if r.Kind != k.Kind || strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			out = append(out, servedResource{gvr: gv.WithResource(r.Name), kind: r.Kind, namespaced: r.Namespaced})
		}
	}
	return out
}

func (c *clusterSource) list(ctx context.Context, r servedResource, namespace string, opts metav1.ListOptions) ([]unstructured.Unstructured, error) {
	var ri dynamic.ResourceInterface = c.dyn.Resource(r.gvr)
	if r.namespaced && namespace != "" {
		ri = c.dyn.Resource(r.gvr).Namespace(namespace)
	}
	l, err := ri.List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", r.gvr, err)
	}
	gvk := r.gvr.GroupVersion().WithKind(r.kind)
	for i := range l.Items {
		l.Items[i].SetGroupVersionKind(gvk)
	}
	return l.Items, nil
}

// resourcesFor lists, from the cluster, the resources of every kind the
// policies' rules (autogen rules included) match: in --namespace for
// namespaced kinds when it is set. Kinds given by wildcard are not listed.
func (c *clusterSource) resourcesFor(ctx context.Context, policies []kyvernov1.PolicyInterface) ([]*unstructured.Unstructured, error) {
	seen := map[schema.GroupVersionResource]bool{}
	var out []*unstructured.Unstructured
	for _, p := range policies {
		rules, err := autogen.ComputeRules(p)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.GetName(), err)
		}
		for i := range rules {
			filters, _ := rules[i].MatchResources.Filters()
			for _, f := range filters {
				for _, kind := range f.ResourceDescription.Kinds {
					k := match.ParseKind(kind)
					if k.SubResource != "" || wildcard.ContainsWildcard(k.Kind) {
						continue
					}
					for _, r := range c.find(k) {
						if seen[r.gvr] {
							continue
						}
						seen[r.gvr] = true
						items, err := c.list(ctx, r, c.namespace, metav1.ListOptions{})
						if err != nil {
							return nil, err
						}
						for j := range items {
							out = append(out, &items[j])
						}
					}
				}
			}
		}
	}
	return out, nil
}
