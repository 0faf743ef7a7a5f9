package loaders

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/charter-dev/charter/engine/loader"
)

// Objects serves loader.ObjectLoader (mutate-existing targets, clone and
// cloneList sources) from the API server: a GET when the query names one
// object, else a LIST of the namespace (or of every namespace when it is a
// wildcard) with the query's label selector. The engine filters names and
// namespaces by wildcard itself.
type Objects struct {
	Client dynamic.Interface
	Mapper meta.RESTMapper
	// ForNamespace returns the client that resource.Post of a namespaced
	// policy of namespace creates with: one acting with that namespace's
	// rights (impersonate.Clients.For, its ServiceAccount). nil refuses
	// such a Post.
	ForNamespace func(namespace string) (dynamic.Interface, error)
}

var _ loader.ObjectLoader = Objects{}

// Objects implements loader.ObjectLoader.
func (o Objects) Objects(ctx context.Context, q loader.ObjectQuery) ([]map[string]any, error) {
	if strings.Contains(q.Kind, "/") {
		return nil, fmt.Errorf("kind %q: subresources are not supported as targets or sources", q.Kind)
	}
	gv, err := schema.ParseGroupVersion(q.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("apiVersion %q: %w", q.APIVersion, err)
	}
	mapping, err := o.Mapper.RESTMapping(gv.WithKind(q.Kind).GroupKind(), gv.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", q.APIVersion, q.Kind, err)
	}
	res := o.Client.Resource(mapping.Resource)
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	var ri dynamic.ResourceInterface = res
	if namespaced && q.Namespace != "" && !hasWildcard(q.Namespace) {
		ri = res.Namespace(q.Namespace)
	}
	if q.Name != "" && !hasWildcard(q.Name) && (!namespaced || (q.Namespace != "" && !hasWildcard(q.Namespace))) {
		obj, err := ri.Get(ctx, q.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, err
		}
		return []map[string]any{obj.Object}, nil
	}
	opts := metav1.ListOptions{}
	if q.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(q.Selector)
		if err != nil {
			return nil, fmt.Errorf("selector: %w", err)
		}
		opts.LabelSelector = sel.String()
	}
	return list(ctx, ri, opts)
}

// list returns the content of the objects a LIST returns.
func list(ctx context.Context, ri dynamic.ResourceInterface, opts metav1.ListOptions) ([]map[string]any, error) {
	l, err := ri.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, l.Items[i].Object)
	}
	return out, nil
}

func hasWildcard(s string) bool { return strings.ContainsAny(s, "*?") }

var _ loader.ResourceLoader = Objects{}

// Resource implements loader.ResourceLoader (resource.Get, mutate-existing
// targets a MutatingPolicy's expression names): a GET of the object, nil
// when it does not exist.
func (o Objects) Resource(ctx context.Context, apiVersion, resource, namespace, name string) (map[string]any, error) {
	ri, err := o.resourceInterface(apiVersion, resource, namespace)
	if err != nil {
		return nil, err
	}
	obj, err := ri.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return obj.Object, nil
}

// Resources implements loader.ResourceLoader (resource.List, a
// MutatingPolicy's mutate-existing targets): a LIST of the namespace, or
// of every namespace when namespace is "".
func (o Objects) Resources(ctx context.Context, apiVersion, resource, namespace string) ([]map[string]any, error) {
	ri, err := o.resourceInterface(apiVersion, resource, namespace)
	if err != nil {
		return nil, err
	}
	return list(ctx, ri, metav1.ListOptions{})
}

// ClusterScopedLookupError is a lookup in a namespace of a resource that
// has none. A namespaced policy's resource.Get and resource.List always
// name its own namespace (the engine refuses any other), so this is what
// keeps such a policy from reading cluster-scoped objects
// (ClusterRoleBindings, Nodes, Namespaces) with charter's identity: the
// namespace is never ignored.
type ClusterScopedLookupError struct {
	Resource  string
	Namespace string
}

func (e *ClusterScopedLookupError) Error() string {
	return fmt.Sprintf("%s is cluster-scoped: a lookup in namespace %q cannot read it (a namespaced policy reads only namespaced resources of its own namespace)",
		e.Resource, e.Namespace)
}

// resourceInterface is the client of a resource, in namespace when it is
// namespaced and namespace is set. A namespace given for a cluster-scoped
// resource is a ClusterScopedLookupError.
func (o Objects) resourceInterface(apiVersion, resource, namespace string) (dynamic.ResourceInterface, error) {
	if strings.Contains(resource, "/") {
		return nil, fmt.Errorf("resource %q: subresources cannot be read", resource)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	gvr := gv.WithResource(resource)
	kind, err := o.Mapper.KindFor(gvr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvr.String(), err)
	}
	mapping, err := o.Mapper.RESTMapping(kind.GroupKind(), kind.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvr.String(), err)
	}
	res := o.Client.Resource(mapping.Resource)
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		if namespace != "" {
			return nil, &ClusterScopedLookupError{Resource: gvr.GroupResource().String(), Namespace: namespace}
		}
		return res, nil
	}
	if namespace != "" {
		return res.Namespace(namespace), nil
	}
	return res, nil
}
