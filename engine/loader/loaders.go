package loader

import (
	"context"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Loaders resolve context entries and namespace labels. Each is optional: a
// context entry whose loader is nil gives an error result naming the entry.
type Loaders struct {
	ConfigMaps ConfigMapLoader
	APICalls   APICaller
	Images     ImageDataLoader
	// ImageVerifier checks signatures and attestations for verifyImages
	// rules; without one such a rule ends in error.
	ImageVerifier ImageVerifier
	GlobalContext GlobalContext
	Namespaces    NamespaceLabelsLoader
	// Objects supplies existing objects: mutate-existing targets and the
	// sources of generate clone and cloneList rules.
	Objects ObjectLoader
	// Params serves the params of validate.cel rules with a paramKind
	// (the cluster's informers of param kinds); when nil, Objects does
	// (the CLI's objects).
	Params ObjectLoader
	// Resources serves resource.* in CEL policies.
	Resources ResourceLoader
	// Authorizer answers the checks of the CEL `authorizer` variable
	// (Kubernetes' authz library, as in ValidatingAdmissionPolicy) for
	// request.userInfo or a service account; when nil the variable is
	// unbound and a rule reading it ends in error. An error it returns
	// makes the check's errored() true and allowed() false.
	Authorizer authorizer.UnconditionalAuthorizer
}

// ObjectQuery selects existing objects. Namespace and Name may hold the
// wildcards * and ?; empty means any. Selector, when set, is a label
// selector. The engine filters what a loader returns again, so a loader
// may return more than asked (e.g. every object of the kind).
type ObjectQuery struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	Selector   *metav1.LabelSelector
}

// ObjectLoader lists existing objects as unstructured content.
type ObjectLoader interface {
	Objects(ctx context.Context, q ObjectQuery) ([]map[string]any, error)
}

// ConfigMapLoader returns a ConfigMap as unstructured content (apiVersion,
// kind, metadata, data), for `context: [{configMap: {name, namespace}}]`.
type ConfigMapLoader interface {
	ConfigMap(ctx context.Context, namespace, name string) (map[string]any, error)
}

// APICall is one `apiCall` context entry after variable substitution.
type APICall struct {
	// URLPath is a Kubernetes API path ("/api/v1/namespaces"); empty when URL
	// (a service call) is set.
	URLPath string
	// URL, CABundle and Headers come from apiCall.service.
	URL      string
	CABundle string
	// Headers are sent with a service call, in order, after variable
	// substitution of their values.
	Headers []APICallHeader
	// Method is GET or POST.
	Method string
	// Data is the POST body built from apiCall.data.
	Data map[string]any
	// Library marks a call of the CEL http library (http.Get, http.Post,
	// http.Client(caPEM).Get, ...) rather than an apiCall context entry:
	// the caller answers {body: <the decoded JSON answer, null when it
	// is not JSON>, statusCode: <int>}, a non-2xx status being no error,
	// and may refuse addresses policies must not reach (cloud metadata,
	// loopback). The engine shapes the answer as Kyverno's library does.
	Library bool
	// Namespace is, for a Library call or a service URL, the namespace of
	// the namespaced policy making it; empty for a cluster-wide policy.
	// Kyverno lets a namespaced policy call http.* only when allowed
	// (--allowHTTPInNamespacedPolicies), and charter holds its apiCall
	// service URLs to the same: the caller decides.
	Namespace string
}

// APICallHeader is one HTTP header of a service call.
type APICallHeader struct {
	Key, Value string
}

// APICaller performs an apiCall context entry and returns the decoded JSON
// response.
type APICaller interface {
	Call(ctx context.Context, call APICall) (any, error)
}

// ImageDataLoader returns the registry's data for an image reference, for
// `imageRegistry` context entries ({image, resolvedImage, registry,
// repository, identifier, manifest, configData}) and the CEL libraries'
// image.GetMetadata and getImageData ({image, resolvedImage, registry,
// repository, identifier, tag, digest, imageIndex, manifest, config}); a
// loader may answer both with the union. creds are those of the asking
// entry or policy, as for image verification.
type ImageDataLoader interface {
	ImageData(ctx context.Context, reference string, creds ImageCredentials) (map[string]any, error)
}

// GlobalContext returns the data of a GlobalContextEntry by name, or of
// one of its projections by "<entry>.<projection>". An entry that does
// not exist is an error wrapping ErrGlobalContextEntryNotFound (the CEL
// globalContext.Get reads it as null); any other error (an entry that
// cannot load) is a rule error.
type GlobalContext interface {
	GlobalContextEntry(ctx context.Context, name string) (any, error)
}

// NamespacedGlobalContext is a GlobalContext that decides which entries a
// namespaced policy may read: an entry holds whatever charter loaded with
// its own identity (any namespace's objects, any API answer), so the
// cluster's store serves a namespaced policy only the entries that opt
// in. The engine asks it for every read of a namespaced policy, with the
// policy's namespace; a GlobalContext without it (the CLI's mocks) is
// read as is.
type NamespacedGlobalContext interface {
	GlobalContext
	GlobalContextEntryForNamespace(ctx context.Context, name, namespace string) (any, error)
}

// ErrGlobalContextEntryNotFound is a GlobalContextEntry that does not
// exist.
var ErrGlobalContextEntryNotFound = errors.New("global context entry not found")

// NamespaceLabelsLoader returns the labels of a namespace.
type NamespaceLabelsLoader interface {
	NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error)
}

// ResourceLoader serves the resource.* library of CEL policies: objects by
// API version and resource (plural) name, as Kyverno's CEL context reads
// them. Resource returns nil and no error when the object does not exist.
type ResourceLoader interface {
	Resource(ctx context.Context, apiVersion, resource, namespace, name string) (map[string]any, error)
	// Resources lists the objects of a resource; namespace "" means all.
	Resources(ctx context.Context, apiVersion, resource, namespace string) ([]map[string]any, error)
}

// NamespaceObjectLoader returns a whole Namespace object. When the
// Namespaces loader implements it, CEL expressions see that object as
// namespaceObject (annotations included); otherwise namespaceObject holds
// the namespace's name and labels.
type NamespaceObjectLoader interface {
	NamespaceObject(ctx context.Context, namespace string) (map[string]any, error)
}

// ResourceCreator is what a ResourceLoader also implements to serve
// resource.Post: create obj as a resource of apiVersion (in namespace,
// "" for a cluster-scoped one) and return what the API server answered.
// policyNamespace is the namespace of the namespaced policy that asks (""
// for a cluster-scoped policy): a creator acts for such a policy with the
// rights of its namespace, never with charter's own. Without it
// resource.Post is an error.
type ResourceCreator interface {
	CreateResource(ctx context.Context, policyNamespace, apiVersion, resource, namespace string, obj map[string]any) (map[string]any, error)
}

// ResourceMapper is what a ResourceLoader also implements to serve
// resource.ToGVR: the resource of a kind, from the cluster's discovery.
type ResourceMapper interface {
	ResourceFor(apiVersion, kind string) (schema.GroupVersionResource, error)
}
