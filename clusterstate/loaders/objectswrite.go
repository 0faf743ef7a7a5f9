package loaders

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/charter-dev/charter/engine/loader"
)

var (
	_ loader.ResourceCreator = Objects{}
	_ loader.ResourceMapper  = Objects{}
)

// CreateResource implements loader.ResourceCreator (resource.Post of CEL
// policies, typically a SubjectAccessReview): a CREATE of obj, whose
// apiVersion and kind are set from the resource when absent, and the
// object the API server answered. A namespace given for a cluster-scoped
// resource is refused, never dropped: the engine passes a namespaced
// policy's own namespace, and such a policy creates nothing cluster-wide.
// For a namespaced policy (policyNamespace set) the create is made with
// the client of ForNamespace, with that namespace's rights; without
// ForNamespace it is refused.
func (o Objects) CreateResource(ctx context.Context, policyNamespace, apiVersion, resource, namespace string, obj map[string]any) (map[string]any, error) {
	gvr, kind, namespaced, err := o.mapResource(apiVersion, resource)
	if err != nil {
		return nil, err
	}
	if !namespaced && namespace != "" {
		return nil, &ClusterScopedLookupError{Resource: gvr.GroupResource().String(), Namespace: namespace}
	}
	cl := o.Client
	if policyNamespace != "" {
		if o.ForNamespace == nil {
			return nil, &NoNamespacedWriterError{Namespace: policyNamespace}
		}
		if cl, err = o.ForNamespace(policyNamespace); err != nil {
			return nil, err
		}
	}
	u := &unstructured.Unstructured{Object: obj}
	if u.GetAPIVersion() == "" {
		u.SetAPIVersion(apiVersion)
	}
	if u.GetKind() == "" {
		u.SetKind(kind)
	}
	ri := cl.Resource(gvr)
	if namespaced {
		if namespace == "" {
			namespace = u.GetNamespace()
		}
		created, err := ri.Namespace(namespace).Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		return created.Object, nil
	}
	created, err := ri.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return created.Object, nil
}

// NoNamespacedWriterError is a namespaced policy's resource.Post where no
// client acts with its namespace's rights: refused, since charter's own
// rights are never used for a namespaced policy's writes.
type NoNamespacedWriterError struct{ Namespace string }

func (e *NoNamespacedWriterError) Error() string {
	return fmt.Sprintf("a namespaced policy of %s creates objects only as its namespace's ServiceAccount, and this process has none to act as (charter serve --namespaced-policy-service-account)", e.Namespace)
}

// ResourceFor implements loader.ResourceMapper (resource.ToGVR).
func (o Objects) ResourceFor(apiVersion, kind string) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	mapping, err := o.Mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("%s %s: %w", apiVersion, kind, err)
	}
	return mapping.Resource, nil
}

// mapResource returns the resource's GVR, its kind and whether it is
// namespaced.
func (o Objects) mapResource(apiVersion, resource string) (schema.GroupVersionResource, string, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionResource{}, "", false, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	gvr := gv.WithResource(resource)
	kind, err := o.Mapper.KindFor(gvr)
	if err != nil {
		return gvr, "", false, fmt.Errorf("%s: %w", gvr.String(), err)
	}
	mapping, err := o.Mapper.RESTMapping(kind.GroupKind(), kind.Version)
	if err != nil {
		return gvr, "", false, fmt.Errorf("%s: %w", gvr.String(), err)
	}
	return mapping.Resource, kind.Kind, mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
}
