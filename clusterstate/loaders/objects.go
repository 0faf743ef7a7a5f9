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

	"github.com/charter-dev/charter/engine"
)

// Objects serves engine.ObjectLoader (mutate-existing targets, clone and
// cloneList sources) from the API server: a GET when the query names one
// object, else a LIST of the namespace (or of every namespace when it is a
// wildcard) with the query's label selector. The engine filters names and
// namespaces by wildcard itself.
type Objects struct {
	Client dynamic.Interface
	Mapper meta.RESTMapper
}

var _ engine.ObjectLoader = Objects{}

// Objects implements engine.ObjectLoader.
func (o Objects) Objects(ctx context.Context, q engine.ObjectQuery) ([]map[string]any, error) {
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
	list, err := ri.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, list.Items[i].Object)
	}
	return out, nil
}

func hasWildcard(s string) bool { return strings.ContainsAny(s, "*?") }
