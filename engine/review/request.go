package review

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// Request is what a policy is evaluated against: an admission request, or a
// resource seen by a background scan (Operation CREATE, no user).
//
// Objects are the unstructured content of the resource (what
// unstructured.Unstructured.Object holds); the engine never modifies them.
type Request struct {
	// Operation is CREATE, UPDATE, DELETE or CONNECT. Empty means CREATE.
	Operation kyvernov1.AdmissionOperation

	// Object is the new object; nil on DELETE.
	Object map[string]any
	// OldObject is the object before the change; set on UPDATE and DELETE.
	OldObject map[string]any

	// Kind of the object. When empty it is taken from the object's apiVersion
	// and kind.
	Kind schema.GroupVersionKind
	// Resource is the requested resource (e.g. apps/v1 deployments); optional.
	Resource schema.GroupVersionResource
	// SubResource is the requested subresource ("exec", "scale", "status"), if
	// any. A rule kind "Pod/exec" matches only requests for that subresource.
	SubResource string

	// Namespace of the request. When empty it is taken from the object.
	Namespace string
	// Name of the object. When empty it is taken from the object.
	Name string
	// NamespaceLabels are the labels of the request's namespace, used by
	// namespaceSelector in match/exclude and failureActionOverrides. When nil
	// and Loaders.Namespaces is set, they are looked up on first need.
	NamespaceLabels map[string]string

	// UserInfo is the requesting user; empty for background scans.
	UserInfo authenticationv1.UserInfo
	// Roles ("namespace:name") and ClusterRoles bound to the user.
	Roles        []string
	ClusterRoles []string

	// DryRun reports an admission dry run.
	DryRun bool
}

// RequestForObject builds a CREATE request for an unstructured object, the
// usual input of the CLI and of background scans.
func RequestForObject(obj *unstructured.Unstructured) *Request {
	return &Request{Operation: kyvernov1.Create, Object: obj.Object}
}

// ResourceRef names the resource a response is about.
type ResourceRef struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
}

// String returns "Kind/namespace/name", the form Kyverno's messages use.
func (r ResourceRef) String() string { return r.Kind + "/" + r.Namespace + "/" + r.Name }
