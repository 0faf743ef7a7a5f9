// Package params serves the params of validate.cel rules with a paramKind
// from informers, as a ValidatingAdmissionPolicy's params are: one
// informer per param kind the installed policies name, started when a
// policy first names the kind and stopped when none does any more, so
// admission and background scans never LIST per request.
//
// A kind charter may not list and watch gets no informer: its policies
// are not Ready (Fault names the verb, group and resource) and their rules
// end in error, never in a silent pass.
package params

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/tools/cache"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate/internal/listeners"
	"github.com/charter-dev/charter/engine/loader"
)

// recheckInterval is how often a forbidden or unknown kind is looked at
// again: a ClusterRole granting it may be applied any time.
const recheckInterval = 15 * time.Second

// syncWait bounds how long an evaluation waits for a new informer's
// first LIST before its rule ends in error.
const syncWait = 10 * time.Second

// Informers is the process's set of param informers. It implements
// loader.ObjectLoader for loader.Loaders.Params.
type Informers struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	access authorizationclient.SelfSubjectAccessReviewInterface
	log    logr.Logger

	mu sync.Mutex
	// want are the kinds the installed policies name.
	want  map[schema.GroupVersionKind]bool
	kinds map[schema.GroupVersionKind]*kindInformer
	// ctx is Start's; nil before Start.
	ctx      context.Context
	poke     chan struct{}
	onChange []func()
	// onParam are told of every change of a param object.
	onParam listeners.Set[func(schema.GroupVersionKind, metav1.Object)]
}

// kindInformer is the informer of one param kind, or why it has none.
type kindInformer struct {
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	// fault says why the kind has no informer (forbidden, unknown kind).
	fault error
}

// New returns an empty set; add it to the manager (every replica runs it)
// and call Watch with every new set of installed policies.
func New(dyn dynamic.Interface, mapper meta.RESTMapper, access authorizationclient.SelfSubjectAccessReviewInterface, log logr.Logger) *Informers {
	return &Informers{dyn: dyn, mapper: mapper, access: access, log: log,
		want: map[schema.GroupVersionKind]bool{}, kinds: map[schema.GroupVersionKind]*kindInformer{}, poke: make(chan struct{}, 1)}
}

// ForbiddenError is a param kind charter may not read.
type ForbiddenError struct {
	Verb, Group, Resource string
}

func (e *ForbiddenError) Error() string {
	group := e.Group
	if group == "" {
		group = `"" (core)`
	}
	return fmt.Sprintf("forbidden: charter may not %s %s of API group %s, which a paramKind names; grant it with a ClusterRole labelled "+
		"rbac.charter.dev/aggregate-to-admission: \"true\" and rbac.charter.dev/aggregate-to-reports: \"true\"", e.Verb, e.Resource, group)
}

// KindsOf returns the param kinds of the policies' validate.cel rules.
func KindsOf(policies []kyvernov1.PolicyInterface) map[schema.GroupVersionKind]bool {
	kinds := map[schema.GroupVersionKind]bool{}
	for _, p := range policies {
		for _, gvk := range paramKinds(p) {
			kinds[gvk] = true
		}
	}
	return kinds
}

// KindsOfPolicy returns the param kinds of a policy's validate.cel rules
// (with repeats).
func KindsOfPolicy(p kyvernov1.PolicyInterface) []schema.GroupVersionKind { return paramKinds(p) }

// Reads reports whether a policy's validate.cel rules may read obj, an
// object of the param kind gvk: a rule's paramKind is gvk and its
// paramRef may select obj (its name, namespace and selector, as set; a
// namespaced Policy reads its own namespace only). A paramRef without a
// namespace reads the request's, so it may select obj in any namespace.
// nil obj (unknown) may be read.
func Reads(p kyvernov1.PolicyInterface, gvk schema.GroupVersionKind, obj metav1.Object) bool {
	if obj == nil {
		return true
	}
	if ns := p.GetNamespace(); ns != "" && obj.GetNamespace() != "" && obj.GetNamespace() != ns {
		return false
	}
	for i := range p.GetSpec().Rules {
		v := p.GetSpec().Rules[i].Validation
		if v == nil || v.CEL == nil || v.CEL.ParamKind == nil {
			continue
		}
		if gv, err := schema.ParseGroupVersion(v.CEL.ParamKind.APIVersion); err != nil || gv.WithKind(v.CEL.ParamKind.Kind) != gvk {
			continue
		}
		if refSelects(v.CEL.ParamRef, obj) {
			return true
		}
	}
	return false
}

// refSelects reports whether a paramRef may select obj; what cannot be
// told (no paramRef, an invalid selector) may.
func refSelects(ref *admissionregistrationv1.ParamRef, obj metav1.Object) bool {
	switch {
	case ref == nil:
		return true
	case ref.Namespace != "" && obj.GetNamespace() != "" && ref.Namespace != obj.GetNamespace():
		return false
	case ref.Name != "":
		return ref.Name == obj.GetName()
	case ref.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
		return err != nil || sel.Matches(labels.Set(obj.GetLabels()))
	}
	return true
}

func paramKinds(p kyvernov1.PolicyInterface) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for i := range p.GetSpec().Rules {
		v := p.GetSpec().Rules[i].Validation
		if v == nil || v.CEL == nil || v.CEL.ParamKind == nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(v.CEL.ParamKind.APIVersion)
		if err != nil {
			continue // the policy does not compile; its status says so
		}
		out = append(out, gv.WithKind(v.CEL.ParamKind.Kind))
	}
	return out
}

// Watch sets the kinds to keep informers for; Start's loop starts and
// stops them. It never blocks.
func (s *Informers) Watch(kinds map[schema.GroupVersionKind]bool) {
	s.mu.Lock()
	s.want = kinds
	s.mu.Unlock()
	s.trigger()
}

func (s *Informers) trigger() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// OnChange registers fn, called after the set of informers or faults
// changed (the policy status controller's Trigger).
func (s *Informers) OnChange(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChange = append(s.onChange, fn)
}

// OnParamChange registers fn, called with the kind and the object (nil
// when unknown) of a param object created, updated or deleted after its
// informer's first list, once the informer's store holds the change: a
// background scan that reads the kind's params from then on sees it. The
// objects of a kind's first list (a policy began to name the kind) are no
// change. Every object of the kind is told of, also those no paramRef
// names (Reads tells them apart). A listener that stops removes itself.
func (s *Informers) OnParamChange(fn func(schema.GroupVersionKind, metav1.Object)) (remove func()) {
	return s.onParam.Add(fn)
}

// paramChanged tells every OnParamChange subscriber of a change of a
// kind's params.
func (s *Informers) paramChanged(gvk schema.GroupVersionKind, obj metav1.Object) {
	for _, fn := range s.onParam.All() {
		fn(gvk, obj)
	}
}

// NeedLeaderElection is false: every replica evaluates params.
func (s *Informers) NeedLeaderElection() bool { return false }

// Start keeps the informers in line with Watch until ctx ends.
func (s *Informers) Start(ctx context.Context) error {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	tick := time.NewTicker(recheckInterval)
	defer tick.Stop()
	for {
		s.reconcile(ctx)
		select {
		case <-ctx.Done():
			s.mu.Lock()
			for _, k := range s.kinds {
				if k.stop != nil {
					k.stop()
				}
			}
			s.mu.Unlock()
			return nil
		case <-s.poke:
		case <-tick.C:
		}
	}
}

// reconcile starts the informers of wanted kinds (after checking charter
// may list and watch them), stops those of kinds no policy names, and
// looks again at kinds that were forbidden or unknown.
func (s *Informers) reconcile(ctx context.Context) {
	s.mu.Lock()
	want := s.want
	var todo []schema.GroupVersionKind
	changed := false
	for gvk, k := range s.kinds {
		if !want[gvk] {
			if k.stop != nil {
				k.stop()
			}
			delete(s.kinds, gvk)
			changed = true
		}
	}
	for gvk := range want {
		if k, ok := s.kinds[gvk]; !ok || k.fault != nil {
			todo = append(todo, gvk)
		}
	}
	s.mu.Unlock()
	for _, gvk := range todo {
		k := s.open(ctx, gvk)
		s.mu.Lock()
		old, had := s.kinds[gvk]
		if s.want[gvk] {
			s.kinds[gvk] = k
			changed = changed || !had || fmt.Sprint(old.fault) != fmt.Sprint(k.fault)
		} else if k.stop != nil {
			k.stop()
		}
		s.mu.Unlock()
	}
	if changed {
		s.mu.Lock()
		fns := append([]func(){}, s.onChange...)
		s.mu.Unlock()
		for _, fn := range fns {
			fn()
		}
	}
}

// open checks access to the kind and starts its informer.
func (s *Informers) open(ctx context.Context, gvk schema.GroupVersionKind) *kindInformer {
	mapping, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return &kindInformer{fault: fmt.Errorf("paramKind %s %s: %w", gvk.GroupVersion(), gvk.Kind, err)}
	}
	gvr := mapping.Resource
	for _, verb := range []string{"list", "watch"} {
		review, err := s.access.Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource},
		}}, metav1.CreateOptions{})
		if err != nil {
			return &kindInformer{fault: fmt.Errorf("paramKind %s %s: checking access: %w", gvk.GroupVersion(), gvk.Kind, err)}
		}
		if !review.Status.Allowed {
			return &kindInformer{fault: &ForbiddenError{Verb: verb, Group: gvr.Group, Resource: gvr.Resource}}
		}
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(s.dyn, gvr, metav1.NamespaceAll, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
	// Handlers run after the store holds the change (client-go updates
	// the indexer before it notifies).
	changed := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, _ := obj.(metav1.Object)
		s.paramChanged(gvk, m)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				changed(obj)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*unstructured.Unstructured)
			n, ok2 := newObj.(*unstructured.Unstructured)
			if !ok1 || !ok2 || o.GetResourceVersion() != n.GetResourceVersion() {
				changed(newObj)
			}
		},
		DeleteFunc: changed,
	}); err != nil {
		return &kindInformer{fault: fmt.Errorf("paramKind %s %s: watching: %w", gvk.GroupVersion(), gvk.Kind, err)}
	}
	ictx, stop := context.WithCancel(ctx)
	go inf.RunWithContext(ictx)
	s.log.V(1).Info("param informer started", "resource", gvr.String())
	return &kindInformer{informer: inf, stop: stop}
}

var _ loader.ObjectLoader = (*Informers)(nil)

// Objects implements loader.ObjectLoader from the kind's informer: the
// object named, the objects of a namespace, or all of them. A kind
// without an informer is an error (forbidden, unknown, or not watched).
func (s *Informers) Objects(ctx context.Context, q loader.ObjectQuery) ([]map[string]any, error) {
	gv, err := schema.ParseGroupVersion(q.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("apiVersion %q: %w", q.APIVersion, err)
	}
	gvk := gv.WithKind(q.Kind)
	s.mu.Lock()
	k := s.kinds[gvk]
	s.mu.Unlock()
	switch {
	case k == nil:
		return nil, fmt.Errorf("params of %s %s are not watched yet", q.APIVersion, q.Kind)
	case k.fault != nil:
		return nil, k.fault
	}
	if !k.informer.HasSynced() {
		wctx, cancel := context.WithTimeout(ctx, syncWait)
		defer cancel()
		if !cache.WaitForCacheSync(wctx.Done(), k.informer.HasSynced) {
			return nil, fmt.Errorf("params of %s %s: informer not synced", q.APIVersion, q.Kind)
		}
	}
	store := k.informer.GetIndexer()
	var items []any
	switch {
	case q.Name != "" && q.Namespace != "" && !strings.ContainsAny(q.Name+q.Namespace, "*?"):
		item, ok, err := store.GetByKey(q.Namespace + "/" + q.Name)
		if err != nil {
			return nil, err
		}
		if !ok {
			// A cluster-scoped kind's key has no namespace.
			if item, ok, err = store.GetByKey(q.Name); err != nil || !ok {
				return nil, err
			}
		}
		items = []any{item}
	case q.Namespace != "" && !strings.ContainsAny(q.Namespace, "*?"):
		if items, err = store.ByIndex(cache.NamespaceIndex, q.Namespace); err != nil {
			return nil, err
		}
		cluster, err := store.ByIndex(cache.NamespaceIndex, "")
		if err != nil {
			return nil, err
		}
		items = append(items, cluster...)
	default:
		items = store.List()
	}
	out := make([]map[string]any, 0, len(items))
	for _, item := range items {
		if u, ok := item.(*unstructured.Unstructured); ok && (q.Name == "" || u.GetName() == q.Name || strings.ContainsAny(q.Name, "*?")) {
			out = append(out, u.Object)
		}
	}
	return out, nil
}

// Fault returns why some param kind of p cannot be read (each once,
// sorted), and false while a kind p names was not looked at yet.
func (s *Informers) Fault(p kyvernov1.PolicyInterface) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, gvk := range paramKinds(p) {
		k, ok := s.kinds[gvk]
		if !ok {
			return "", false
		}
		if k.fault != nil {
			seen[k.fault.Error()] = true
		}
	}
	msgs := slices.Sorted(maps.Keys(seen))
	return strings.Join(msgs, "; "), true
}
