package review

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/match"
)

// WithObject returns the view of the same request with a new object, as
// the next mutation sees it; the namespace's labels, once looked up, are
// shared.
func (in *View) WithObject(obj map[string]any) *View {
	out := new(View)
	out.InitWithObject(in, obj)
	return out
}

// InitWithObject makes v the view of from's request with a new object
// (WithObject, in place).
func (v *View) InitWithObject(from *View, obj map[string]any) {
	req := *from.Req
	req.Object = obj
	v.Init(from.Ctx, &req, from.Opts)
	if from.nsLabelsLoaded {
		v.nsLabels, v.nsLabelsLoaded = from.nsLabels, true
	}
}

// View is a Request with everything every kind reads of it worked out
// once and shared by every policy of one evaluation: identity, match
// input, the namespace's labels (looked up on first use), and the state
// the kinds keep of the request, built on first use.
type View struct {
	Ctx  context.Context
	Req  *Request
	Opts *Options
	// Op is the request's operation, CREATE when it names none.
	Op kyvernov1.AdmissionOperation
	// Object is the new object, or the old one on DELETE.
	Object map[string]any
	GVK    schema.GroupVersionKind
	Res    match.Resource
	// Scope is the namespace the request acts in for namespaced policies
	// (ScopeNamespace), "" for a cluster-scoped object.
	Scope string

	nsLabels       map[string]string
	nsLabelsLoaded bool
	// CEL holds the CEL variables of the request (engine/celruntime's
	// Inputs), built on first use.
	CEL any
	// VPol is the state of the ValidatingPolicy being evaluated, one for
	// all of them.
	VPol any
	// IVPol is what the request's ImageValidatingPolicies share, built on
	// first use.
	IVPol any
}

// NewView works out the view of a request evaluated with opts.
func NewView(ctx context.Context, req *Request, opts *Options) *View {
	v := new(View)
	v.Init(ctx, req, opts)
	return v
}

// Init makes in the view of a request (NewView, in place: a View embedded
// in a larger view costs no allocation of its own). in must not be copied
// after: its Res reads the namespace's labels through it.
func (in *View) Init(ctx context.Context, req *Request, opts *Options) {
	*in = View{Ctx: ctx, Req: req, Opts: opts, Op: req.Operation}
	if in.Op == "" {
		in.Op = kyvernov1.Create
	}
	in.Object = req.Object
	if in.Object == nil {
		in.Object = req.OldObject
	}
	in.GVK = req.Kind
	if in.GVK.Kind == "" && in.Object != nil {
		apiVersion, _ := in.Object["apiVersion"].(string)
		kind, _ := in.Object["kind"].(string)
		in.GVK = schema.FromAPIVersionAndKind(apiVersion, kind)
	}
	meta, _ := in.Object["metadata"].(map[string]any)
	name, namespace := RequestIdentity(req, meta)
	in.nsLabels, in.nsLabelsLoaded = req.NamespaceLabels, req.NamespaceLabels != nil
	in.Scope = ScopeNamespace(req, in.GVK)
	in.Res = match.Resource{
		Kind:            in.GVK,
		SubResource:     req.SubResource,
		Name:            name,
		Namespace:       namespace,
		Labels:          StringMap(meta["labels"]),
		Annotations:     StringMap(meta["annotations"]),
		NamespaceLabels: in.NamespaceLabels,
		Operation:       in.Op,
		UserInfo:        req.UserInfo,
		Roles:           req.Roles,
		ClusterRoles:    req.ClusterRoles,
	}
}

// RequestIdentity is the name and namespace a request's object is
// matched by: the request's, or where it names none, the object's
// metadata's.
func RequestIdentity(req *Request, meta map[string]any) (name, namespace string) {
	name, namespace = req.Name, req.Namespace
	if name == "" {
		name, _ = meta["name"].(string)
	}
	if namespace == "" {
		namespace, _ = meta["namespace"].(string)
	}
	return name, namespace
}

// StringMap is the string values of a map of an object (labels,
// annotations); nil when it has none.
func StringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, val := range m {
		if s, ok := val.(string); ok {
			out[k] = s
		}
	}
	return out
}

// NamespaceLabels returns the labels of the request's namespace, looking
// them up through the loader on first use. A lookup failure counts as no
// labels, so namespaceSelectors do not match.
func (in *View) NamespaceLabels() map[string]string {
	if !in.nsLabelsLoaded {
		in.nsLabelsLoaded = true
		if l := in.Opts.Loaders.Namespaces; l != nil && in.Res.Namespace != "" {
			in.nsLabels, _ = l.NamespaceLabels(in.Ctx, in.Res.Namespace)
		}
	}
	return in.nsLabels
}

// ResourceRef names the request's object.
func (in *View) ResourceRef() ResourceRef {
	apiVersion, _ := in.Object["apiVersion"].(string)
	if apiVersion == "" {
		apiVersion = in.GVK.GroupVersion().String()
	}
	return ResourceRef{APIVersion: apiVersion, Kind: in.GVK.Kind, Namespace: in.Res.Namespace, Name: in.Res.Name}
}

// InScope reports whether a policy acting in scope ("" for a cluster-wide
// policy) may act on an object in namespace ("" for a cluster-scoped
// object). Every namespaced policy kind decides through it.
func InScope(scope, namespace string) bool {
	return scope == "" || (namespace != "" && namespace == scope)
}

// ScopeNamespace is the namespace a request acts in, as namespaced
// policies are scoped: the namespace of the object and of the old object,
// which must agree, falling back to the request's namespace for objects
// that carry none (a subresource's options, a CREATE decoded before the
// API server defaulted it). A Namespace object, like every cluster-scoped
// object, acts in none: "" (the API server puts a Namespace's own name in
// the request's namespace field on some operations).
func ScopeNamespace(req *Request, gvk schema.GroupVersionKind) string {
	if gvk.Group == "" && gvk.Kind == "Namespace" {
		return ""
	}
	ns := ""
	for _, obj := range []map[string]any{req.Object, req.OldObject} {
		if obj == nil {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		own, _ := meta["namespace"].(string)
		if own == "" {
			own = req.Namespace
		}
		if own == "" || (ns != "" && own != ns) {
			return ""
		}
		ns = own
	}
	if ns == "" {
		ns = req.Namespace
	}
	return ns
}

// NamespaceLabelsOrName returns the namespace's labels, with the
// kubernetes.io/metadata.name label every namespace has; an unknown
// namespace has that label only.
func (in *View) NamespaceLabelsOrName() map[string]string {
	l := in.NamespaceLabels()
	if l["kubernetes.io/metadata.name"] == in.Res.Namespace {
		return l
	}
	out := make(map[string]string, len(l)+1)
	for k, v := range l {
		out[k] = v
	}
	out["kubernetes.io/metadata.name"] = in.Res.Namespace
	return out
}

// Resource returns the request's resource: the one given, else the one
// the object's kind names by Kubernetes' conventions.
func (in *View) Resource() schema.GroupVersionResource {
	if in.Req.Resource.Resource != "" {
		return in.Req.Resource
	}
	return schema.GroupVersionResource{Group: in.GVK.Group, Version: in.GVK.Version, Resource: match.ResourceForKind(in.GVK.Kind)}
}
