package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine"
)

// admissionReview is the wire form of an incoming admission.k8s.io/v1
// AdmissionReview. It mirrors admissionv1.AdmissionReview but lets the
// caller choose how the objects decode (T): the resource handlers decode
// them straight into the unstructured maps the engine reads, so the body
// is parsed once, with no RawExtension in between.
type admissionReview[T any] struct {
	APIVersion string               `json:"apiVersion"`
	Kind       string               `json:"kind"`
	Request    *admissionRequest[T] `json:"request"`
}

// admissionRequest mirrors admissionv1.AdmissionRequest.
type admissionRequest[T any] struct {
	UID                types.UID                    `json:"uid"`
	Kind               metav1.GroupVersionKind      `json:"kind"`
	Resource           metav1.GroupVersionResource  `json:"resource"`
	SubResource        string                       `json:"subResource,omitempty"`
	RequestKind        *metav1.GroupVersionKind     `json:"requestKind,omitempty"`
	RequestResource    *metav1.GroupVersionResource `json:"requestResource,omitempty"`
	RequestSubResource string                       `json:"requestSubResource,omitempty"`
	Name               string                       `json:"name,omitempty"`
	Namespace          string                       `json:"namespace,omitempty"`
	Operation          admissionv1.Operation        `json:"operation"`
	UserInfo           authenticationv1.UserInfo    `json:"userInfo"`
	Object             T                            `json:"object,omitempty"`
	OldObject          T                            `json:"oldObject,omitempty"`
	DryRun             *bool                        `json:"dryRun,omitempty"`
	// Options are the create, update or patch options of the request; only
	// the field manager is read (loop protection of the background
	// controller's own writes).
	Options *requestOptions `json:"options,omitempty"`
}

type requestOptions struct {
	FieldManager string `json:"fieldManager,omitempty"`
}

func (r *admissionRequest[T]) dryRun() bool { return r.DryRun != nil && *r.DryRun }

// fieldManager is the request's field manager, "" when it has none
// (DELETE, CONNECT, or none given).
func (r *admissionRequest[T]) fieldManager() string {
	if r.Options == nil {
		return ""
	}
	return r.Options.FieldManager
}

// unstructuredReview decodes objects for the engine.
type unstructuredReview = admissionReview[map[string]any]

// rawReview keeps objects as bytes, for handlers that decode them into
// typed API objects.
type rawReview = admissionReview[json.RawMessage]

// httpError is a request the server refuses before it is an admission
// decision: the API server sees a failed call and applies the webhook's
// failurePolicy.
type httpError struct {
	code   int
	reason string
}

func (e *httpError) Error() string { return e.reason }

func badRequest(format string, a ...any) *httpError {
	return &httpError{code: http.StatusBadRequest, reason: fmt.Sprintf(format, a...)}
}

// bufferPool recycles request and response buffers across requests.
var bufferPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuffer() *bytes.Buffer {
	b := bufferPool.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putBuffer(b *bytes.Buffer) {
	// Do not keep the rare huge buffer alive for every later request.
	if b.Cap() <= 1<<20 {
		bufferPool.Put(b)
	}
}

// decodeReview reads an AdmissionReview of at most limit bytes from the
// request. Every way it can be malformed is an *httpError naming what is
// wrong; nothing here panics on any input.
func decodeReview[T any](r *http.Request, limit int64, into *admissionReview[T]) error {
	if r.Method != http.MethodPost {
		return &httpError{code: http.StatusMethodNotAllowed, reason: fmt.Sprintf("method %s not allowed: an AdmissionReview is POSTed", r.Method)}
	}
	switch ct := r.Header.Get("Content-Type"); ct {
	case "application/json":
		// What the API server sends, taken without ParseMediaType, which
		// builds a map of the parameters every time.
	case "":
		return &httpError{code: http.StatusUnsupportedMediaType, reason: "missing content type: expected application/json"}
	default:
		mediaType, _, err := mime.ParseMediaType(ct)
		if err != nil || mediaType != "application/json" {
			return &httpError{code: http.StatusUnsupportedMediaType, reason: fmt.Sprintf("content type %q not supported: expected application/json", ct)}
		}
	}
	buf := getBuffer()
	defer putBuffer(buf)
	if _, err := buf.ReadFrom(http.MaxBytesReader(nil, r.Body, limit)); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &httpError{code: http.StatusRequestEntityTooLarge, reason: fmt.Sprintf("request body larger than %d bytes", limit)}
		}
		return badRequest("reading request body: %v", err)
	}
	return parseReview(buf.Bytes(), into)
}

// parseReview decodes and checks the AdmissionReview envelope.
func parseReview[T any](body []byte, into *admissionReview[T]) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("empty request body: expected an AdmissionReview")
	}
	if err := unmarshalReview(body, into); err != nil {
		return badRequest("malformed AdmissionReview: %v", err)
	}
	if into.APIVersion != admissionv1.SchemeGroupVersion.String() || into.Kind != "AdmissionReview" {
		return badRequest("expected apiVersion %s kind AdmissionReview, got apiVersion %q kind %q",
			admissionv1.SchemeGroupVersion, into.APIVersion, into.Kind)
	}
	req := into.Request
	if req == nil {
		return badRequest("AdmissionReview has no request")
	}
	if req.UID == "" {
		return badRequest("AdmissionReview request has no uid")
	}
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect:
	default:
		return badRequest("AdmissionReview request %s has unknown operation %q", req.UID, req.Operation)
	}
	if req.Kind.Kind == "" {
		return badRequest("AdmissionReview request %s has no kind", req.UID)
	}
	return nil
}

// unmarshalReview is json.Unmarshal, through decodeUnstructuredReview for
// the resource handlers' reviews whenever it can decode the body.
func unmarshalReview[T any](body []byte, into *admissionReview[T]) error {
	if u, ok := any(into).(*unstructuredReview); ok {
		if decodeUnstructuredReview(body, u) {
			return nil
		}
		*u = unstructuredReview{}
	}
	return json.Unmarshal(body, into)
}

// reviewResponse is the reply: the AdmissionReview envelope with only the
// response. The API server reads nothing else, and not echoing the request
// halves the bytes written.
type reviewResponse struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Response   *admissionv1.AdmissionResponse `json:"response"`
}

// writeResponse encodes the response into a pooled buffer and sends it.
func writeResponse(w http.ResponseWriter, resp *admissionv1.AdmissionResponse) {
	buf := getBuffer()
	defer putBuffer(buf)
	if !appendResponse(buf, resp) {
		buf.Reset()
		if err := json.NewEncoder(buf).Encode(reviewResponse{
			APIVersion: admissionv1.SchemeGroupVersion.String(),
			Kind:       "AdmissionReview",
			Response:   resp,
		}); err != nil {
			http.Error(w, "encoding AdmissionReview response: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	// Assigned rather than Set: the shared value saves an allocation per
	// response, and net/http only reads it.
	w.Header()["Content-Type"] = jsonContentType
	_, _ = w.Write(buf.Bytes())
}

var jsonContentType = []string{"application/json; charset=utf-8"}

// writeError answers a refused request with a plain-text reason.
func writeError(w http.ResponseWriter, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = &httpError{code: http.StatusInternalServerError, reason: err.Error()}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(he.code)
	_, _ = io.WriteString(w, he.reason+"\n")
}

// allowed and denied build the two kinds of decision.
func allowed(uid types.UID, warnings []string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{UID: uid, Allowed: true, Warnings: warnings}
}

// denied carries only status Failure and the message, as Kyverno does (no
// code, no reason): the API server raises the code to 400 and prefixes the
// message with the webhook's name.
func denied(uid types.UID, message string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{UID: uid, Allowed: false, Result: &metav1.Status{
		Status:  metav1.StatusFailure,
		Message: message,
	}}
}

// KindResolver maps an API resource to its kind. meta.RESTMapper
// satisfies it (the manager's RESTMapper discovers CRDs as they appear).
type KindResolver interface {
	KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error)
}

// topLevelKind is the kind the engine matches a request as. For a
// subresource request it is the parent resource's kind, as Kyverno
// matches it (admission-reports.md §0, step 2): a CONNECT to pods/exec
// carries a PodExecOptions and an UPDATE of deployments/scale a Scale,
// yet both are matched as Pod and Deployment, by kinds "Pod/exec" and
// "Deployment/scale". Requests for the resource itself carry its kind.
func topLevelKind(ar *admissionRequest[map[string]any], kinds KindResolver) (schema.GroupVersionKind, error) {
	requested := schema.GroupVersionKind{Group: ar.Kind.Group, Version: ar.Kind.Version, Kind: ar.Kind.Kind}
	if ar.SubResource == "" {
		return requested, nil
	}
	gvr := schema.GroupVersionResource{Group: ar.Resource.Group, Version: ar.Resource.Version, Resource: ar.Resource.Resource}
	if kinds == nil {
		kinds = builtinKinds{}
	}
	gvk, err := kinds.KindFor(gvr)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("resolving the kind of %s (subresource %s): %w", gvr.String(), ar.SubResource, err)
	}
	return gvk, nil
}

// builtinKinds knows the built-in resources that have subresources. It
// stands in when the server is given no KindResolver (tests, the null
// benchmark); charter serve hands it the manager's RESTMapper.
type builtinKinds struct{}

var builtinParents = map[schema.GroupResource]string{
	{Resource: "pods"}:                                                               "Pod",
	{Resource: "nodes"}:                                                              "Node",
	{Resource: "namespaces"}:                                                         "Namespace",
	{Resource: "services"}:                                                           "Service",
	{Resource: "serviceaccounts"}:                                                    "ServiceAccount",
	{Resource: "persistentvolumes"}:                                                  "PersistentVolume",
	{Resource: "persistentvolumeclaims"}:                                             "PersistentVolumeClaim",
	{Resource: "replicationcontrollers"}:                                             "ReplicationController",
	{Resource: "resourcequotas"}:                                                     "ResourceQuota",
	{Group: "apps", Resource: "deployments"}:                                         "Deployment",
	{Group: "apps", Resource: "replicasets"}:                                         "ReplicaSet",
	{Group: "apps", Resource: "statefulsets"}:                                        "StatefulSet",
	{Group: "apps", Resource: "daemonsets"}:                                          "DaemonSet",
	{Group: "batch", Resource: "jobs"}:                                               "Job",
	{Group: "batch", Resource: "cronjobs"}:                                           "CronJob",
	{Group: "autoscaling", Resource: "horizontalpodautoscalers"}:                     "HorizontalPodAutoscaler",
	{Group: "policy", Resource: "poddisruptionbudgets"}:                              "PodDisruptionBudget",
	{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}:           "CertificateSigningRequest",
	{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}:           "CustomResourceDefinition",
	{Group: "apiregistration.k8s.io", Resource: "apiservices"}:                       "APIService",
	{Group: "networking.k8s.io", Resource: "ingresses"}:                              "Ingress",
	{Group: "storage.k8s.io", Resource: "volumeattachments"}:                         "VolumeAttachment",
	{Group: "flowcontrol.apiserver.k8s.io", Resource: "flowschemas"}:                 "FlowSchema",
	{Group: "flowcontrol.apiserver.k8s.io", Resource: "prioritylevelconfigurations"}: "PriorityLevelConfiguration",
}

func (builtinKinds) KindFor(gvr schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	kind, ok := builtinParents[gvr.GroupResource()]
	if !ok {
		return schema.GroupVersionKind{}, fmt.Errorf("unknown resource %s", gvr.GroupResource())
	}
	return gvr.GroupVersion().WithKind(kind), nil
}

// engineRequest converts an admission request for the engine: the
// top-level kind, and the requester's roles when a policy of the snapshot
// asks for them. An error (discovery, RBAC informers) denies the request,
// as Kyverno's does.
func (h *handlers) engineRequest(ctx context.Context, ar *admissionRequest[map[string]any], snapshot *policycache.Snapshot) (*engine.Request, error) {
	gvk, err := topLevelKind(ar, h.opts.Kinds)
	if err != nil {
		return nil, err
	}
	req := &engine.Request{
		Operation:   kyvernov1.AdmissionOperation(ar.Operation),
		Object:      ar.Object,
		OldObject:   ar.OldObject,
		Kind:        gvk,
		Resource:    schema.GroupVersionResource{Group: ar.Resource.Group, Version: ar.Resource.Version, Resource: ar.Resource.Resource},
		SubResource: ar.SubResource,
		Namespace:   ar.Namespace,
		Name:        ar.Name,
		UserInfo:    ar.UserInfo,
		DryRun:      ar.dryRun(),
	}
	if h.opts.Roles != nil && snapshot.ReadsRoles() {
		req.Roles, req.ClusterRoles, err = h.opts.Roles.Roles(ctx, ar.UserInfo)
		if err != nil {
			return nil, fmt.Errorf("resolving the roles of user %q: %w", ar.UserInfo.Username, err)
		}
	}
	return req, nil
}
