package clusterstate

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate/cleanuppolicies"
	"github.com/charter-dev/charter/clusterstate/globalcontext"
	"github.com/charter-dev/charter/clusterstate/impersonate"
	"github.com/charter-dev/charter/clusterstate/loaders"
	"github.com/charter-dev/charter/clusterstate/params"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine/loader"
)

// State is the cluster state one process shares between its controllers.
type State struct {
	// Policies is the process's one watch of installed policies and
	// exceptions; it also serves namespace labels.
	Policies *policycache.Cache
	// CleanupPolicies reads CleanupPolicies and ClusterCleanupPolicies
	// and tells of their changes.
	CleanupPolicies *cleanuppolicies.Source
	// Params are the informers of the param kinds installed policies
	// name (validate.cel paramKind); New adds them to the manager.
	Params *params.Informers
	// GlobalContext holds the GlobalContextEntries' data (an informer per
	// kubernetesResource entry, a poller per apiCall entry); New adds it
	// to the manager. Loaders.GlobalContext reads it.
	GlobalContext *globalcontext.Store
	// Loaders are what the engine reads as it evaluates: namespace labels
	// and params from informers, ConfigMaps, API calls and the objects of
	// CEL policies' resource library from the API server on every
	// evaluation (see package loaders).
	Loaders loader.Loaders
	// Authorizer answers the CEL `authorizer` of policies with
	// SubjectAccessReviews (WithCELAuthorizer; nil without). It is not in
	// Loaders: only admission hands it to the engine, as
	// ValidatingAdmissionPolicy binds authorizer at admission only (a
	// background scan has no requesting user).
	Authorizer authorizer.UnconditionalAuthorizer
	// HTTPLimits are what the CEL http library of policies may call
	// (WithHTTPLimits), which Loaders.APICalls enforces.
	HTTPLimits loaders.HTTPLimits
}

// New builds the process's State on the manager's shared informers and
// adds its policy cache to the manager (it runs on every replica, leader
// or not). The manager's scheme must know the kyverno.io types.
//
// An exception from a namespace WithExceptionNamespaces does not trust gets
// a Warning event (reason ExceptionIgnored) saying why, once per
// generation of the exception, from the process built WithExceptionEvents
// (see there).
func New(mgr manager.Manager, log logr.Logger, opts ...Option) (*State, error) {
	sch := mgr.GetScheme()
	if !sch.Recognizes(kyvernov1.GroupVersion.WithKind("ClusterPolicy")) || !sch.Recognizes(kyvernov2.GroupVersion.WithKind("PolicyException")) ||
		!sch.Recognizes(policiesv1.GroupVersion.WithKind(policiesv1.PolicyExceptionKind)) {
		return nil, errors.New("clusterstate: the manager's scheme lacks the kyverno.io/v1 and v2 or policies.kyverno.io/v1 types")
	}
	s, err := NewForCache(mgr.GetConfig(), mgr.GetCache(), log, opts...)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(s.Policies); err != nil {
		return nil, fmt.Errorf("clusterstate: %w", err)
	}
	if err := mgr.Add(s.Params); err != nil {
		return nil, fmt.Errorf("clusterstate: %w", err)
	}
	if err := mgr.Add(s.GlobalContext); err != nil {
		return nil, fmt.Errorf("clusterstate: %w", err)
	}
	if o := newOptions(opts); o.exceptionEvents {
		events := &ignoredExceptionEvents{cache: s.Policies, recorder: mgr.GetEventRecorder("charter")}
		s.Policies.OnIgnoredException(events.report)
		if err := mgr.Add(events); err != nil {
			return nil, fmt.Errorf("clusterstate: %w", err)
		}
	}
	return s, nil
}

// ignoredExceptionEvents emits the ExceptionIgnored events of a process,
// from its leader only: every charter process watches the same exceptions
// and would otherwise emit the same event (nine in a default install). On
// its election it emits for the exceptions ignored so far, as the cache
// reported them to it while another replica led; a new leader after a
// failover so repeats the events of the exceptions ignored at that time,
// once.
type ignoredExceptionEvents struct {
	cache    *policycache.Cache
	recorder events.EventRecorder
	leading  atomic.Bool
}

// report is the cache's OnIgnoredException listener.
func (e *ignoredExceptionEvents) report(ig policycache.IgnoredException) {
	if e.leading.Load() {
		e.emit(ig)
	}
}

func (e *ignoredExceptionEvents) emit(ig policycache.IgnoredException) {
	e.recorder.Eventf(ig.Exception, nil, corev1.EventTypeWarning, ReasonExceptionIgnored, "Ignore", "%s", ig.Reason)
}

// Start runs while this replica leads: at each term (the process
// campaigns again after a lost Lease), it catches up as a new leader
// would, and stops emitting at the term's end.
func (e *ignoredExceptionEvents) Start(ctx context.Context) error {
	e.cache.CatchUpIgnored(func(ignored []policycache.IgnoredException) {
		e.leading.Store(true)
		for _, ig := range ignored {
			e.emit(ig)
		}
	})
	<-ctx.Done()
	e.leading.Store(false)
	return nil
}

// NeedLeaderElection is true: one replica emits.
func (e *ignoredExceptionEvents) NeedLeaderElection() bool { return true }

// ReasonExceptionIgnored is the reason of the event on a PolicyException
// from a namespace charter does not trust.
const ReasonExceptionIgnored = "ExceptionIgnored"

// Option configures a State.
type Option func(*options)

type options struct {
	cache           []policycache.Option
	http            loaders.HTTPLimits
	exceptionEvents bool
	paramsConfig    *rest.Config
	globalConfig    *rest.Config
	authorizer      *loaders.AuthorizerOptions
	policySA        string
}

// WithNamespacedPolicyServiceAccount makes resource.Post of a namespaced
// policy create as the ServiceAccount name of the policy's namespace,
// impersonated (serve --namespaced-policy-service-account), so that RBAC
// decides what a tenant's policy may create. Without it such a Post is
// refused: charter's own rights are never used for it.
func WithNamespacedPolicyServiceAccount(name string) Option {
	return func(o *options) { o.policySA = name }
}

// WithCELAuthorizer builds State.Authorizer, which asks the API server
// (SubjectAccessReview create, with the manager's identity) and caches its
// answers as o says.
func WithCELAuthorizer(o loaders.AuthorizerOptions) Option {
	return func(opts *options) { opts.authorizer = &o }
}

// WithGlobalContextConfig reads GlobalContextEntries and the resources
// they name, and checks the rights to, as cfg's identity rather than the
// manager's (tests of a restricted identity).
func WithGlobalContextConfig(cfg *rest.Config) Option {
	return func(o *options) { o.globalConfig = cfg }
}

// WithParamsConfig reads params, and checks the rights to read them, as
// cfg's identity rather than the manager's (tests of a restricted
// identity).
func WithParamsConfig(cfg *rest.Config) Option {
	return func(o *options) { o.paramsConfig = cfg }
}

// WithHTTPLimits bounds what policies' outbound calls (apiCall service
// URLs, the CEL http library, GlobalContextEntry apiCalls) may reach
// (default: loaders.DefaultHTTPBlocklist, no allowlist).
func WithHTTPLimits(l loaders.HTTPLimits) Option {
	return func(o *options) { o.http = l }
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithExceptionEvents makes this process emit the ExceptionIgnored events,
// from the replica that wins the manager's leader election (every replica
// when the manager does not elect). Give it to one kind of process only,
// the one that writes policy status (admission): each charter process
// watches the same exceptions.
func WithExceptionEvents() Option {
	return func(o *options) { o.exceptionEvents = true }
}

// WithExceptionNamespaces makes the process honour PolicyExceptions from
// these namespaces only (default: every namespace); see
// policycache.ExceptionNamespaces.
func WithExceptionNamespaces(ns policycache.ExceptionNamespaces) Option {
	return func(o *options) { o.cache = append(o.cache, policycache.WithExceptionNamespaces(ns)) }
}

// NewForCache builds a State on informers the caller runs, for programs
// without a manager (benchmarks); the caller starts s.Policies too.
func NewForCache(cfg *rest.Config, informers crcache.Cache, log logr.Logger, opts ...Option) (*State, error) {
	o := newOptions(opts)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("clusterstate: client: %w", err)
	}
	cache := policycache.New(informers, log.WithName("policycache"), o.cache...)
	apiCalls := loaders.NewAPICalls(kube)
	apiCalls.HTTPLimits = o.http
	paramInformers, err := newParams(cfg, o.paramsConfig, log)
	if err != nil {
		return nil, err
	}
	cache.OnInstalledChange(func(in *policycache.Installed) { paramInformers.Watch(params.KindsOf(in.Policies)) })
	// A param a policy may read changed: the cache gathers such changes
	// with the policy changes and publishes one snapshot for them.
	paramInformers.OnParamChange(cache.ParamChanged)
	global, err := newGlobalContext(cfg, o.globalConfig, apiCalls, log)
	if err != nil {
		return nil, err
	}
	// resource.Get and resource.List of CEL policies read live objects,
	// at admission as in a background scan (Kyverno's resource library).
	objects, err := newDynamicClients(cfg, nil, "resource library")
	if err != nil {
		return nil, err
	}
	var forNamespace func(string) (dynamic.Interface, error)
	if o.policySA != "" {
		clients, err := impersonate.New(cfg, o.policySA)
		if err != nil {
			return nil, fmt.Errorf("clusterstate: %w", err)
		}
		forNamespace = clients.For
	}
	var authz authorizer.UnconditionalAuthorizer
	if o.authorizer != nil {
		if authz, err = loaders.NewAuthorizer(kube.AuthorizationV1(), *o.authorizer); err != nil {
			return nil, fmt.Errorf("clusterstate: %w", err)
		}
	}
	return &State{
		Authorizer:      authz,
		Policies:        cache,
		CleanupPolicies: cleanuppolicies.New(informers),
		Params:          paramInformers,
		GlobalContext:   global,
		Loaders: loader.Loaders{
			GlobalContext: global,
			Namespaces:    cache,
			ConfigMaps:    loaders.ConfigMaps{Client: kube},
			APICalls:      apiCalls,
			Params:        paramInformers,
			Resources:     loaders.Objects{Client: objects.dyn, Mapper: objects.mapper, ForNamespace: forNamespace},
		},
		HTTPLimits: o.http,
	}, nil
}

// newParams builds the param informers, as override's identity when set.
func newParams(cfg, override *rest.Config, log logr.Logger) (*params.Informers, error) {
	c, err := newDynamicClients(cfg, override, "params")
	if err != nil {
		return nil, err
	}
	return params.New(c.dyn, c.mapper, c.access, log.WithName("params")), nil
}

// newGlobalContext builds the GlobalContextEntry store, as override's
// identity when set; its apiCalls pass the egress guard as policies' do.
func newGlobalContext(cfg, override *rest.Config, calls *loaders.APICalls, log logr.Logger) (*globalcontext.Store, error) {
	c, err := newDynamicClients(cfg, override, "global context")
	if err != nil {
		return nil, err
	}
	return globalcontext.New(c.dyn, c.mapper, c.access, calls, log.WithName("globalcontext")), nil
}

// dynamicClients read any resource and check the rights to.
type dynamicClients struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	access authorizationclient.SelfSubjectAccessReviewInterface
}

// newDynamicClients builds them for cfg, or override when set; what names
// the user in errors.
func newDynamicClients(cfg, override *rest.Config, what string) (dynamicClients, error) {
	if override != nil {
		cfg = override
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return dynamicClients{}, fmt.Errorf("clusterstate: %s client: %w", what, err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return dynamicClients{}, fmt.Errorf("clusterstate: %s client: %w", what, err)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return dynamicClients{}, fmt.Errorf("clusterstate: %s client: %w", what, err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return dynamicClients{}, fmt.Errorf("clusterstate: %s mapper: %w", what, err)
	}
	return dynamicClients{dyn: dyn, mapper: mapper, access: kube.AuthorizationV1().SelfSubjectAccessReviews()}, nil
}
