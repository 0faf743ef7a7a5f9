// Package impersonate gives charter's background and cleanup controllers
// the client with which they act for a namespaced policy (a kyverno.io
// Policy or CleanupPolicy, a Namespaced*Policy of policies.kyverno.io): a
// client that impersonates a ServiceAccount of the policy's namespace, so
// that Kubernetes RBAC, escalation checks included, decides what the
// policy may write, as Flux's kustomize-controller does with
// --default-service-account. Cluster-scoped policies keep charter's own
// identity; a namespaced policy never falls back to it.
package impersonate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// DefaultServiceAccount is the ServiceAccount, in each namespace, that
// charter impersonates for the namespaced policies there (serve
// --namespaced-policy-service-account). Not "default": that one is every
// Pod's that names none, and what it is granted every such Pod holds.
const DefaultServiceAccount = "charter-policy"

// Clients hands out the impersonating clients, one per namespace.
type Clients struct {
	cfg *rest.Config
	// own reads ServiceAccounts with charter's identity: whether the one
	// to impersonate exists.
	own            kubernetes.Interface
	serviceAccount string

	mu          sync.Mutex
	byNamespace map[string]dynamic.Interface
}

// New returns the clients of cfg that impersonate the ServiceAccount
// serviceAccount of a policy's namespace. cfg is charter's own; it must be
// allowed to impersonate ServiceAccounts and to get them.
func New(cfg *rest.Config, serviceAccount string) (*Clients, error) {
	if serviceAccount == "" {
		return nil, errors.New("impersonate: the ServiceAccount name of namespaced policies is required")
	}
	own, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("impersonate: %w", err)
	}
	return &Clients{cfg: rest.CopyConfig(cfg), own: own, serviceAccount: serviceAccount, byNamespace: map[string]dynamic.Interface{}}, nil
}

// ServiceAccount is the name of the ServiceAccount impersonated in every
// namespace.
func (c *Clients) ServiceAccount() string { return c.serviceAccount }

// For returns the client that acts for the namespaced policies of
// namespace. Every request it makes first checks that the ServiceAccount
// exists (a missing one fails as Forbidden, naming it), and every error it
// returns is an *Error naming the ServiceAccount.
func (c *Clients) For(namespace string) (dynamic.Interface, error) {
	if namespace == "" {
		return nil, errors.New("impersonate: a namespaced policy has a namespace")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.byNamespace[namespace]; ok {
		return d, nil
	}
	cfg := rest.CopyConfig(c.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: UserName(namespace, c.serviceAccount)}
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("impersonate: %w", err)
	}
	out := &client{Interface: d, account: account{own: c.own, namespace: namespace, name: c.serviceAccount}}
	c.byNamespace[namespace] = out
	return out, nil
}

// ParseServiceAccount reads "namespace/name", as the flags naming one
// ServiceAccount for every policy take it.
func ParseServiceAccount(s string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("ServiceAccount %q: want namespace/name", s)
	}
	return namespace, name, nil
}

// Config is cfg acting as the ServiceAccount "namespace/name" (the API
// server adds its ServiceAccount groups), for clients that only read as
// it: a ServiceAccount that does not exist is refused by RBAC like one
// without rights.
func Config(cfg *rest.Config, serviceAccount string) (*rest.Config, error) {
	ns, name, err := ParseServiceAccount(serviceAccount)
	if err != nil {
		return nil, err
	}
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{UserName: UserName(ns, name)}
	return out, nil
}

// UserName is the user name of a ServiceAccount; the API server gives an
// impersonated one its ServiceAccount groups too.
func UserName(namespace, name string) string {
	return serviceaccount.MakeUsername(namespace, name)
}

// Error is a request made as a namespaced policy's ServiceAccount that
// failed: the ServiceAccount does not exist (Missing), the API server
// refused it (Forbidden: RBAC decided), or anything else. It unwraps to
// the API server's error, so apierrors.IsForbidden and the like still
// answer.
type Error struct {
	// Namespace and Name are the ServiceAccount's.
	Namespace, Name string
	// Missing: the ServiceAccount does not exist, so nothing was sent.
	Missing bool
	Err     error
}

func (e *Error) Error() string {
	if e.Missing {
		return fmt.Sprintf("ServiceAccount %s/%s does not exist: charter acts for the namespaced policies of %s as that ServiceAccount, never as itself; create it and bind it what the policies need",
			e.Namespace, e.Name, e.Namespace)
	}
	return fmt.Sprintf("as ServiceAccount %s/%s (charter acts for the namespaced policies of %s as it): %v", e.Namespace, e.Name, e.Namespace, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ServiceAccount is "namespace/name".
func (e *Error) ServiceAccount() string { return e.Namespace + "/" + e.Name }

// As finds the *Error in err's tree, if any.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// account is the ServiceAccount a client impersonates.
type account struct {
	own             kubernetes.Interface
	namespace, name string
}

// check fails with a Forbidden *Error when the ServiceAccount does not
// exist. It is asked before every request, not remembered: a deleted
// ServiceAccount stops acting at once.
func (a account) check(ctx context.Context, gr schema.GroupResource, name string) error {
	_, err := a.own.CoreV1().ServiceAccounts(a.namespace).Get(ctx, a.name, metav1.GetOptions{})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return &Error{Namespace: a.namespace, Name: a.name, Missing: true, Err: &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
			Details: &metav1.StatusDetails{Group: gr.Group, Kind: gr.Resource, Name: name},
			Message: fmt.Sprintf("ServiceAccount %s/%s does not exist", a.namespace, a.name),
		}}}
	default:
		return fmt.Errorf("reading ServiceAccount %s/%s, which charter impersonates for the namespaced policies of %s: %w", a.namespace, a.name, a.namespace, err)
	}
}

// wrap makes err an *Error of the account.
func (a account) wrap(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := As(err); ok {
		return err
	}
	return &Error{Namespace: a.namespace, Name: a.name, Err: err}
}

// client is a dynamic client that impersonates account.
type client struct {
	dynamic.Interface
	account account
}

func (c *client) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	ri := c.Interface.Resource(gvr)
	return namespaceable{resource: resource{ri: ri, gr: gvr.GroupResource(), account: c.account}, all: ri}
}

type namespaceable struct {
	resource
	all dynamic.NamespaceableResourceInterface
}

func (n namespaceable) Namespace(namespace string) dynamic.ResourceInterface {
	return resource{ri: n.all.Namespace(namespace), gr: n.gr, account: n.account}
}

// resource checks the account before each request and names it in each
// error.
type resource struct {
	ri      dynamic.ResourceInterface
	gr      schema.GroupResource
	account account
}

func (r resource) Create(ctx context.Context, obj *unstructured.Unstructured, options metav1.CreateOptions, subresources ...string) (*unstructured.Unstructured, error) {
	if err := r.account.check(ctx, r.gr, obj.GetName()); err != nil {
		return nil, err
	}
	out, err := r.ri.Create(ctx, obj, options, subresources...)
	return out, r.account.wrap(err)
}

func (r resource) Update(ctx context.Context, obj *unstructured.Unstructured, options metav1.UpdateOptions, subresources ...string) (*unstructured.Unstructured, error) {
	if err := r.account.check(ctx, r.gr, obj.GetName()); err != nil {
		return nil, err
	}
	out, err := r.ri.Update(ctx, obj, options, subresources...)
	return out, r.account.wrap(err)
}

func (r resource) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured, options metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	if err := r.account.check(ctx, r.gr, obj.GetName()); err != nil {
		return nil, err
	}
	out, err := r.ri.UpdateStatus(ctx, obj, options)
	return out, r.account.wrap(err)
}

func (r resource) Delete(ctx context.Context, name string, options metav1.DeleteOptions, subresources ...string) error {
	if err := r.account.check(ctx, r.gr, name); err != nil {
		return err
	}
	return r.account.wrap(r.ri.Delete(ctx, name, options, subresources...))
}

func (r resource) DeleteCollection(ctx context.Context, options metav1.DeleteOptions, listOptions metav1.ListOptions) error {
	if err := r.account.check(ctx, r.gr, ""); err != nil {
		return err
	}
	return r.account.wrap(r.ri.DeleteCollection(ctx, options, listOptions))
}

func (r resource) Get(ctx context.Context, name string, options metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error) {
	if err := r.account.check(ctx, r.gr, name); err != nil {
		return nil, err
	}
	out, err := r.ri.Get(ctx, name, options, subresources...)
	return out, r.account.wrap(err)
}

func (r resource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if err := r.account.check(ctx, r.gr, ""); err != nil {
		return nil, err
	}
	out, err := r.ri.List(ctx, opts)
	return out, r.account.wrap(err)
}

func (r resource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if err := r.account.check(ctx, r.gr, ""); err != nil {
		return nil, err
	}
	out, err := r.ri.Watch(ctx, opts)
	return out, r.account.wrap(err)
}

func (r resource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, options metav1.PatchOptions, subresources ...string) (*unstructured.Unstructured, error) {
	if err := r.account.check(ctx, r.gr, name); err != nil {
		return nil, err
	}
	out, err := r.ri.Patch(ctx, name, pt, data, options, subresources...)
	return out, r.account.wrap(err)
}

func (r resource) Apply(ctx context.Context, name string, obj *unstructured.Unstructured, options metav1.ApplyOptions, subresources ...string) (*unstructured.Unstructured, error) {
	if err := r.account.check(ctx, r.gr, name); err != nil {
		return nil, err
	}
	out, err := r.ri.Apply(ctx, name, obj, options, subresources...)
	return out, r.account.wrap(err)
}

func (r resource) ApplyStatus(ctx context.Context, name string, obj *unstructured.Unstructured, options metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	if err := r.account.check(ctx, r.gr, name); err != nil {
		return nil, err
	}
	out, err := r.ri.ApplyStatus(ctx, name, obj, options)
	return out, r.account.wrap(err)
}
