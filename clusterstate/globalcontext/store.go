// Package globalcontext keeps the data of GlobalContextEntries
// (kyverno.io/v2alpha1) in memory, for the engine's `globalReference`
// context entries and the CEL globalContext library:
//
//   - spec.kubernetesResource: an informer of that resource (one
//     namespace or all), so a policy reads the current objects with no
//     LIST per request; the data is the list of the objects;
//   - spec.apiCall: the call is made every refreshInterval (retried up to
//     retryLimit times) and its last answer kept.
//
// spec.projections are JMESPath results over the data, read as
// "<entry>.<projection>". An entry that cannot load (invalid spec, a
// resource charter may not list or watch, an unknown resource, an API
// call that fails) is an error to whoever reads it, never empty data, so
// an Enforce rule reading it denies. Status tells the entry's state for
// the GlobalContextEntry reconciler to write.
//
// Every charter process that evaluates policies runs one Store (every
// replica, leader or not).
package globalcontext

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/tools/cache"

	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
	"github.com/charter-dev/charter/engine/jmespath"
	"github.com/charter-dev/charter/engine/loader"
)

// Resource is the GlobalContextEntry API resource.
var Resource = kyvernov2alpha1.GroupVersion.WithResource("globalcontextentries")

// recheckInterval is how often an entry that could not load is tried
// again: a ClusterRole granting its resource, or a CRD serving it, may be
// applied any time.
const recheckInterval = 15 * time.Second

// firstLoadWait bounds how long a read waits for an entry's first load
// (informer sync, first API call) before it errs.
const firstLoadWait = 5 * time.Second

// Status is what a Store knows of one entry, for its status.
type Status struct {
	// Generation is the entry's generation the rest is about.
	Generation int64
	// Loaded is true once the first load ended, well or not.
	Loaded bool
	// Ready is true while reads get data.
	Ready bool
	// Stalled is true when the entry cannot load until its spec or
	// charter's rights change.
	Stalled bool
	// Reason and Message say why it is not Ready (Reason is one of
	// kyvernov2alpha1's Reason constants).
	Reason, Message string
	// LastRefresh is when the data was last loaded.
	LastRefresh time.Time
}

// Fault is why an entry cannot be read; its Error names the entry.
type Fault struct {
	Entry   string
	Reason  string
	Message string
}

func (f *Fault) Error() string {
	return fmt.Sprintf("global context entry %q is not ready (%s): %s", f.Entry, f.Reason, f.Message)
}

// APICaller makes an apiCall entry's call: a urlPath against the API
// server, a service URL within the process's HTTP limits.
type APICaller interface {
	Call(ctx context.Context, call loader.APICall) (any, error)
}

// Store is the process's GlobalContextEntry data. It implements
// loader.GlobalContext.
type Store struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	access authorizationclient.SelfSubjectAccessReviewInterface
	calls  APICaller
	jp     *jmespath.Interpreter
	log    logr.Logger
	// retryBackoff is the first wait between tries of a failing API
	// call; it doubles each try.
	retryBackoff time.Duration

	mu      sync.Mutex
	entries map[string]*entry
	// openToNamespaced holds the entries labelled
	// ReadableByNamespacedPoliciesLabel=true. A label change moves no
	// generation, so it is kept apart from the entries, which reload
	// only when their spec changes.
	openToNamespaced map[string]bool
	ctx              context.Context // Start's; nil before
	onChange         []func(name string)
}

// New returns a Store reading GlobalContextEntries and the resources they
// name through dyn, checking its rights through access and making API
// calls through calls. Add it to the manager.
func New(dyn dynamic.Interface, mapper meta.RESTMapper, access authorizationclient.SelfSubjectAccessReviewInterface, calls APICaller, log logr.Logger) *Store {
	return &Store{dyn: dyn, mapper: mapper, access: access, calls: calls, jp: jmespath.New(), log: log,
		retryBackoff: time.Second, entries: map[string]*entry{}, openToNamespaced: map[string]bool{}}
}

var _ loader.NamespacedGlobalContext = (*Store)(nil)

// NeedLeaderElection is false: every replica evaluates policies.
func (s *Store) NeedLeaderElection() bool { return false }

// OnChange registers fn, called with an entry's name after its Status
// changed (the reconciler's trigger).
func (s *Store) OnChange(fn func(name string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChange = append(s.onChange, fn)
}

func (s *Store) changed(name string) {
	s.mu.Lock()
	fns := append([]func(string){}, s.onChange...)
	s.mu.Unlock()
	for _, fn := range fns {
		fn(name)
	}
}

// Start watches GlobalContextEntries and loads each until ctx ends.
func (s *Store) Start(ctx context.Context) error {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	inf := dynamicinformer.NewFilteredDynamicInformer(s.dyn, Resource, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.set(obj) },
		UpdateFunc: func(_, obj any) { s.set(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				s.delete(u.GetName())
			}
		},
	}); err != nil {
		return fmt.Errorf("globalcontext: %w", err)
	}
	go inf.RunWithContext(ctx)
	tick := time.NewTicker(recheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			s.mu.Lock()
			for _, e := range s.entries {
				e.stop()
			}
			s.mu.Unlock()
			return nil
		case <-tick.C:
			s.retryFaulted(ctx)
		}
	}
}

// set (re)loads an entry whose generation changed.
func (s *Store) set(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	var gce kyvernov2alpha1.GlobalContextEntry
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &gce)
	s.mu.Lock()
	s.openToNamespaced[u.GetName()] = u.GetLabels()[ReadableByNamespacedPoliciesLabel] == "true"
	old := s.entries[u.GetName()]
	if old != nil && old.generation == u.GetGeneration() {
		s.mu.Unlock()
		return
	}
	if old != nil {
		old.stop()
	}
	e := &entry{name: u.GetName(), generation: u.GetGeneration(), loaded: make(chan struct{})}
	s.entries[e.name] = e
	ctx := s.ctx
	s.mu.Unlock()
	if err != nil {
		e.fail(kyvernov2alpha1.ReasonInvalidSpec, fmt.Sprintf("decoding: %v", err), true)
	} else {
		e.spec = gce.Spec
		s.open(ctx, e)
	}
	s.changed(e.name)
}

func (s *Store) delete(name string) {
	s.mu.Lock()
	e := s.entries[name]
	delete(s.entries, name)
	delete(s.openToNamespaced, name)
	s.mu.Unlock()
	if e != nil {
		e.stop()
		s.changed(name)
	}
}

// retryFaulted opens again the entries that could not load for want of
// rights or an unknown resource, or whose watch failed.
func (s *Store) retryFaulted(ctx context.Context) {
	s.mu.Lock()
	var todo []*entry
	for name, e := range s.entries {
		if e.retryable() {
			fresh := &entry{name: name, generation: e.generation, spec: e.spec, loaded: make(chan struct{})}
			e.stop()
			s.entries[name] = fresh
			todo = append(todo, fresh)
		}
	}
	s.mu.Unlock()
	for _, e := range todo {
		before := e.status()
		s.open(ctx, e)
		if e.status() != before {
			s.changed(e.name)
		}
	}
}

// open validates the entry's spec and starts its source.
func (s *Store) open(ctx context.Context, e *entry) {
	projections, faults := compile(s.jp, e.name, &e.spec)
	if len(faults) > 0 {
		e.fail(kyvernov2alpha1.ReasonInvalidSpec, strings.Join(faults, "; "), true)
		return
	}
	e.projections = projections
	if ctx == nil {
		ctx = context.Background()
	}
	ectx, cancel := context.WithCancel(ctx)
	e.mu.Lock()
	e.cancel = cancel
	e.mu.Unlock()
	switch {
	case e.spec.KubernetesResource != nil:
		s.openResource(ectx, e)
	case e.spec.APICall != nil:
		go s.poll(ectx, e)
	}
}

// Check returns what is wrong with the spec of the entry named name, each
// fault "<field>: <what>", as the Store reports it (reason InvalidSpec)
// and policy admission refuses it; nil when it is valid.
func Check(name string, spec *kyvernov2alpha1.GlobalContextEntrySpec) []string {
	_, faults := compile(jmespath.New(), name, spec)
	return faults
}

// compile validates the spec and compiles its projections.
func compile(jp *jmespath.Interpreter, name string, spec *kyvernov2alpha1.GlobalContextEntrySpec) ([]projection, []string) {
	faults := spec.ValidateNamed(name)
	var projections []projection
	for i, p := range spec.Projections {
		if p.JMESPath == "" {
			continue // Validate said so
		}
		q, err := jp.Compile(p.JMESPath)
		if err != nil {
			faults = append(faults, fmt.Sprintf("spec.projections[%d].jmesPath: %q: %v", i, p.JMESPath, err))
			continue
		}
		projections = append(projections, projection{name: p.Name, query: q})
	}
	return projections, faults
}

// ForbiddenError is a resource charter may not read.
type ForbiddenError struct {
	Verb, Group, Resource, Namespace string
}

func (e *ForbiddenError) Error() string {
	group := e.Group
	if group == "" {
		group = `"" (core)`
	}
	where := "in every namespace"
	if e.Namespace != "" {
		where = "in namespace " + e.Namespace
	}
	return fmt.Sprintf("charter may not %s %s of API group %s %s; grant it with a ClusterRole labelled "+
		"rbac.charter.dev/aggregate-to-admission: \"true\" (and aggregate-to-reports, -background, -cleanup for the other controllers)",
		e.Verb, e.Resource, group, where)
}

// openResource checks the rights to list and watch the resource and
// starts its informer.
func (s *Store) openResource(ctx context.Context, e *entry) {
	r := e.spec.KubernetesResource
	gvr := schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
	where := fmt.Sprintf("spec.kubernetesResource %s", gvrString(gvr))
	if _, err := s.mapper.KindFor(gvr); err != nil {
		e.fail(kyvernov2alpha1.ReasonUnknownResource, fmt.Sprintf("%s: the API server does not serve it: %v", where, err), true)
		return
	}
	for _, verb := range []string{"list", "watch"} {
		review, err := s.access.Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource, Namespace: r.Namespace},
		}}, metav1.CreateOptions{})
		if err != nil {
			e.fail(kyvernov2alpha1.ReasonForbidden, fmt.Sprintf("%s: checking access: %v", where, err), true)
			return
		}
		if !review.Status.Allowed {
			e.fail(kyvernov2alpha1.ReasonForbidden, (&ForbiddenError{Verb: verb, Group: gvr.Group, Resource: gvr.Resource, Namespace: r.Namespace}).Error(), true)
			return
		}
	}
	ns := r.Namespace
	if ns == "" {
		ns = metav1.NamespaceAll
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(s.dyn, gvr, ns, 0, cache.Indexers{}, nil).Informer()
	// A watch that fails (rights revoked, CRD removed) makes the entry an
	// error until the recheck opens it again.
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		reason := kyvernov2alpha1.ReasonCacheSyncFailed
		if apierrors.IsForbidden(err) {
			reason = kyvernov2alpha1.ReasonForbidden
		}
		if e.fail(reason, fmt.Sprintf("%s: watch failed: %v", where, err), true) {
			s.changed(e.name)
		}
	})
	dirty := func() { e.markDirty() }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { dirty() }, UpdateFunc: func(_, _ any) { dirty() }, DeleteFunc: func(any) { dirty() },
	}); err != nil {
		e.fail(kyvernov2alpha1.ReasonCacheSyncFailed, fmt.Sprintf("%s: %v", where, err), false)
		return
	}
	e.mu.Lock()
	e.informer = inf
	e.mu.Unlock()
	go inf.RunWithContext(ctx)
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return
		}
		e.markDirty()
		_, _ = e.data("")
		s.changed(e.name)
	}()
}

func gvrString(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Version + "/" + gvr.Resource
	}
	return gvr.Group + "/" + gvr.Version + "/" + gvr.Resource
}

// poll makes the entry's API call now and every refresh interval.
func (s *Store) poll(ctx context.Context, e *entry) {
	c := e.spec.APICall
	call := loader.APICall{URLPath: c.URLPath, Method: strings.ToUpper(string(c.Method))}
	if call.Method == "" {
		call.Method = "GET"
	}
	if c.Service != nil {
		call.URL, call.CABundle = c.Service.URL, c.Service.CABundle
		for _, h := range c.Service.Headers {
			call.Headers = append(call.Headers, loader.APICallHeader{Key: h.Key, Value: h.Value})
		}
	}
	if len(c.Data) > 0 {
		call.Data = map[string]any{}
		for _, d := range c.Data {
			var v any
			if d.Value != nil {
				if err := json.Unmarshal(d.Value.Raw, &v); err != nil {
					e.fail(kyvernov2alpha1.ReasonInvalidSpec, fmt.Sprintf("spec.apiCall.data[%s]: %v", d.Key, err), true)
					s.changed(e.name)
					return
				}
			}
			call.Data[d.Key] = v
		}
	}
	where := "spec.apiCall " + call.Method + " "
	if call.URL != "" {
		where += call.URL
	} else {
		where += call.URLPath
	}
	tick := time.NewTicker(c.RefreshEvery())
	defer tick.Stop()
	for {
		data, err := s.callWithRetries(ctx, call, c.Retries())
		if ctx.Err() != nil {
			return
		}
		before := e.status()
		if err != nil {
			e.fail(kyvernov2alpha1.ReasonAPICallFailed, fmt.Sprintf("%s: %v", where, err), false)
		} else {
			e.setData(data)
		}
		if after := e.status(); after != before {
			s.changed(e.name)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *Store) callWithRetries(ctx context.Context, call loader.APICall, tries int) (any, error) {
	wait := s.retryBackoff
	var err error
	for i := 0; i < tries; i++ {
		var data any
		if data, err = s.calls.Call(ctx, call); err == nil {
			return data, nil
		}
		if i == tries-1 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
	return nil, fmt.Errorf("%d tries: %w", tries, err)
}

// ReadableByNamespacedPoliciesLabel, set to "true" on a
// GlobalContextEntry, lets namespaced policies (Policy,
// NamespacedValidatingPolicy, ...) read it. Without it only cluster-wide
// policies may: an entry holds what charter loaded with its own identity,
// from every namespace or any API path, which a tenant's policy could
// otherwise echo in a message or report.
const ReadableByNamespacedPoliciesLabel = "charter.dev/readable-by-namespaced-policies"

// NotReadableError is a namespaced policy's read of an entry that does not
// carry ReadableByNamespacedPoliciesLabel=true.
type NotReadableError struct {
	Entry, Namespace string
}

func (e *NotReadableError) Error() string {
	return fmt.Sprintf("global context entry %q is not readable by namespaced policies (this policy is in namespace %q): only an entry labelled %s: \"true\" is",
		e.Entry, e.Namespace, ReadableByNamespacedPoliciesLabel)
}

// GlobalContextEntry implements loader.GlobalContext: key is an entry's
// name, or "<entry>.<projection>" for one of its projections.
func (s *Store) GlobalContextEntry(ctx context.Context, key string) (any, error) {
	return s.read(ctx, key, "")
}

// GlobalContextEntryForNamespace implements loader.NamespacedGlobalContext:
// an entry without ReadableByNamespacedPoliciesLabel=true is a
// NotReadableError; one that does not exist is not found, as for every
// policy.
func (s *Store) GlobalContextEntryForNamespace(ctx context.Context, key, namespace string) (any, error) {
	return s.read(ctx, key, namespace)
}

// read reads an entry for a policy of namespace ("" for a cluster-wide
// one).
func (s *Store) read(ctx context.Context, key, namespace string) (any, error) {
	name, proj, _ := strings.Cut(key, ".")
	s.mu.Lock()
	e := s.entries[name]
	open := s.openToNamespaced[name]
	s.mu.Unlock()
	if e == nil {
		return nil, fmt.Errorf("%w: %q", loader.ErrGlobalContextEntryNotFound, name)
	}
	if namespace != "" && !open {
		return nil, &NotReadableError{Entry: name, Namespace: namespace}
	}
	if !e.isLoaded() {
		wctx, cancel := context.WithTimeout(ctx, firstLoadWait)
		defer cancel()
		select {
		case <-e.loaded:
		case <-wctx.Done():
			return nil, &Fault{Entry: name, Reason: kyvernov2alpha1.ReasonLoading, Message: "not loaded yet"}
		}
	}
	before := e.status()
	v, err := e.data(proj)
	if e.status() != before {
		s.changed(name)
	}
	return v, err
}

// Status returns what the Store knows of the entry, and false when it has
// not seen it.
func (s *Store) Status(name string) (Status, bool) {
	s.mu.Lock()
	e := s.entries[name]
	s.mu.Unlock()
	if e == nil {
		return Status{}, false
	}
	if e.spec.KubernetesResource != nil && e.isLoaded() {
		_, _ = e.data("") // builds pending changes, so projection faults show
	}
	return e.status(), true
}

// EntryReady reports whether the entry exists and its reads get data
// (policycheck.GlobalContextEntries: policy admission warns of a rule
// reading an entry that is not, as Kyverno does).
func (s *Store) EntryReady(name string) bool {
	st, ok := s.Status(name)
	return ok && st.Ready
}

// projection is a compiled spec.projections entry.
type projection struct {
	name  string
	query *jmespath.Query
}

// entry is one GlobalContextEntry's data.
type entry struct {
	name        string
	generation  int64
	spec        kyvernov2alpha1.GlobalContextEntrySpec
	projections []projection
	// loaded is closed once the first load ended, well or not.
	loaded chan struct{}

	mu       sync.Mutex
	cancel   context.CancelFunc
	informer cache.SharedIndexInformer
	// dirty: the informer saw a change the values do not hold yet.
	dirty bool
	// values are the data under "" and each projection's result.
	values map[string]any
	fault  *Fault
	// stalled: the fault needs a spec or rights change.
	stalled     bool
	lastRefresh time.Time
	closedOnce  sync.Once
}

func (e *entry) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel != nil {
		e.cancel()
	}
}

func (e *entry) markLoaded() { e.closedOnce.Do(func() { close(e.loaded) }) }

func (e *entry) isLoaded() bool {
	select {
	case <-e.loaded:
		return true
	default:
		return false
	}
}

// fail records a fault; it reports whether it is new.
func (e *entry) fail(reason, msg string, stalled bool) bool {
	e.mu.Lock()
	isNew := e.fault == nil || e.fault.Reason != reason || e.fault.Message != msg
	e.fault = &Fault{Entry: e.name, Reason: reason, Message: msg}
	e.stalled = stalled
	e.mu.Unlock()
	e.markLoaded()
	return isNew
}

// retryable: a fault the recheck may clear (rights, unknown resource,
// failed watch); an invalid spec waits for a new generation, a failing
// API call for its next refresh.
func (e *entry) retryable() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fault == nil {
		return false
	}
	switch e.fault.Reason {
	case kyvernov2alpha1.ReasonForbidden, kyvernov2alpha1.ReasonUnknownResource, kyvernov2alpha1.ReasonCacheSyncFailed:
		return true
	}
	return false
}

func (e *entry) markDirty() {
	e.mu.Lock()
	e.dirty = true
	e.mu.Unlock()
}

// setData stores the data (an API call's answer, an informer's
// objects) and its projections.
func (e *entry) setData(data any) {
	values, fault := e.project(data)
	e.mu.Lock()
	if fault != nil {
		e.fault, e.stalled = fault, false
	} else {
		e.values, e.fault, e.stalled = values, nil, false
		// An informer's data is current as long as its watch runs: its
		// refresh time is when it synced, not each change it saw.
		if e.informer == nil || e.lastRefresh.IsZero() {
			e.lastRefresh = time.Now()
		}
	}
	e.mu.Unlock()
	e.markLoaded()
}

// project computes the values of the data: "" and each projection.
func (e *entry) project(data any) (map[string]any, *Fault) {
	values := map[string]any{"": data}
	for _, p := range e.projections {
		v, err := p.query.Search(data)
		if err != nil {
			return nil, &Fault{Entry: e.name, Reason: kyvernov2alpha1.ReasonProjectionFailed,
				Message: fmt.Sprintf("spec.projections %s: %q: %v", p.name, p.query.Expression(), err)}
		}
		values[p.name] = v
	}
	return values, nil
}

// data returns the value of the projection ("" for the whole data),
// first rebuilding the values from the informer when it saw changes.
func (e *entry) data(proj string) (any, error) {
	e.mu.Lock()
	inf, dirty := e.informer, e.dirty
	e.mu.Unlock()
	if inf != nil && dirty && inf.HasSynced() {
		e.mu.Lock()
		e.dirty = false
		e.mu.Unlock()
		e.setData(objectsOf(inf))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fault != nil {
		return nil, e.fault
	}
	if e.values == nil {
		return nil, &Fault{Entry: e.name, Reason: kyvernov2alpha1.ReasonLoading, Message: "not loaded yet"}
	}
	v, ok := e.values[proj]
	if !ok {
		return nil, fmt.Errorf("global context entry %q has no projection %q", e.name, proj)
	}
	return v, nil
}

// objectsOf lists the informer's objects, sorted by namespace and name so
// a policy sees the same order on every replica.
func objectsOf(inf cache.SharedIndexInformer) []any {
	items := inf.GetStore().List()
	objs := make([]*unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		if u, ok := it.(*unstructured.Unstructured); ok {
			objs = append(objs, u)
		}
	}
	sort.Slice(objs, func(i, j int) bool {
		if objs[i].GetNamespace() != objs[j].GetNamespace() {
			return objs[i].GetNamespace() < objs[j].GetNamespace()
		}
		return objs[i].GetName() < objs[j].GetName()
	})
	out := make([]any, len(objs))
	for i, u := range objs {
		out[i] = u.Object
	}
	return out
}

func (e *entry) status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := Status{Generation: e.generation, Loaded: e.isLoaded(), LastRefresh: e.lastRefresh}
	switch {
	case e.fault != nil:
		st.Reason, st.Message, st.Stalled = e.fault.Reason, e.fault.Message, e.stalled
	case e.values != nil || (e.informer != nil && e.dirty):
		st.Ready, st.Reason = true, kyvernov2alpha1.ReasonSucceeded
	default:
		st.Reason, st.Message = kyvernov2alpha1.ReasonLoading, "loading"
	}
	return st
}

// IsFault reports whether err is an entry that cannot be read.
func IsFault(err error) bool {
	var f *Fault
	return errors.As(err, &f)
}
