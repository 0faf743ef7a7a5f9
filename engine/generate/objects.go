package generate

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ClusterObjects gives generation read access to the objects `clone` and
// `cloneList` copy. The background controller implements it over its
// client or informers; the CLI over a suite's cloneSourceResource file
// (see Objects).
//
// Objects are plain JSON values (map[string]any, []any, string, float64,
// bool, nil), as encoding/json or unstructured.Unstructured hold them.
// Generation never modifies what it is handed.
type ClusterObjects interface {
	// Get returns one object. A missing object is an error for which
	// k8s.io/apimachinery/pkg/api/errors.IsNotFound is true.
	Get(ctx context.Context, apiVersion, kind, namespace, name string) (map[string]any, error)
	// List returns the objects of a kind in a namespace ("" for every
	// namespace, or for a cluster-scoped kind) whose labels the selector
	// matches. apiVersion may be empty when a cloneList kind names only a
	// kind. The order of the result is the order of the generated clones.
	List(ctx context.Context, apiVersion, kind, namespace string, selector labels.Selector) ([]map[string]any, error)
}

// ObjectRef identifies an object.
type ObjectRef struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        types.UID
}

func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return fmt.Sprintf("%s/%s/%s", r.APIVersion, r.Kind, r.Name)
	}
	return fmt.Sprintf("%s/%s/%s/%s", r.APIVersion, r.Kind, r.Namespace, r.Name)
}

// RefOf returns the identity of an object from its own fields.
func RefOf(obj map[string]any) ObjectRef {
	meta, _ := obj["metadata"].(map[string]any)
	ref := ObjectRef{}
	ref.APIVersion, _ = obj["apiVersion"].(string)
	ref.Kind, _ = obj["kind"].(string)
	ref.Namespace, _ = meta["namespace"].(string)
	ref.Name, _ = meta["name"].(string)
	uid, _ := meta["uid"].(string)
	ref.UID = types.UID(uid)
	return ref
}

// Objects is a fixed set of objects that implements ClusterObjects, for the
// CLI (a suite's cloneSourceResource documents) and for tests.
type Objects struct {
	items []map[string]any
}

// NewObjects returns the objects as a ClusterObjects. List results come
// in namespace, then name order, as an API server lists them.
func NewObjects(objs ...map[string]any) *Objects {
	items := append([]map[string]any(nil), objs...)
	sort.SliceStable(items, func(i, j int) bool {
		a, b := RefOf(items[i]), RefOf(items[j])
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return &Objects{items: items}
}

// Get implements ClusterObjects.
func (o *Objects) Get(_ context.Context, apiVersion, kind, namespace, name string) (map[string]any, error) {
	for _, obj := range o.items {
		ref := RefOf(obj)
		if sameType(ref, apiVersion, kind) && ref.Namespace == namespace && ref.Name == name {
			return obj, nil
		}
	}
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group, Resource: strings.ToLower(kind)}, name)
}

// List implements ClusterObjects.
func (o *Objects) List(_ context.Context, apiVersion, kind, namespace string, selector labels.Selector) ([]map[string]any, error) {
	if selector == nil {
		selector = labels.Everything()
	}
	var out []map[string]any
	for _, obj := range o.items {
		ref := RefOf(obj)
		if !sameType(ref, apiVersion, kind) || (namespace != "" && ref.Namespace != namespace) {
			continue
		}
		if selector.Matches(labels.Set(stringLabels(obj))) {
			out = append(out, obj)
		}
	}
	return out, nil
}

// sameType compares an object's type with a wanted one; an empty wanted
// apiVersion matches any version.
func sameType(ref ObjectRef, apiVersion, kind string) bool {
	return ref.Kind == kind && (apiVersion == "" || ref.APIVersion == apiVersion)
}

func stringLabels(obj map[string]any) map[string]string {
	meta, _ := obj["metadata"].(map[string]any)
	raw, _ := meta["labels"].(map[string]any)
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// parseKind splits a cloneList kind: "Kind", "version/Kind" or
// "group/version/Kind" into apiVersion and kind.
func parseKind(s string) (apiVersion, kind string, err error) {
	parts := strings.Split(s, "/")
	for _, p := range parts {
		if p == "" {
			return "", "", fmt.Errorf("kind %q: want Kind, version/Kind or group/version/Kind", s)
		}
	}
	switch len(parts) {
	case 1:
		return "", parts[0], nil
	case 2:
		return parts[0], parts[1], nil
	case 3:
		return parts[0] + "/" + parts[1], parts[2], nil
	}
	return "", "", fmt.Errorf("kind %q: want Kind, version/Kind or group/version/Kind", s)
}
