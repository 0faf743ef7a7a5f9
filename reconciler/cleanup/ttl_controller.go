package cleanup

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/charter-dev/charter/engine/ttl"
	"github.com/charter-dev/charter/reconciler/internal/runner"
)

// Event reasons of the TTL controller.
const (
	ReasonTTLExpired = "TTLExpired"
	ReasonInvalidTTL = "InvalidTTL"
)

// ttlKey names one labelled object: the watch of its type and its store
// key ("namespace/name", or "name").
type ttlKey struct {
	w   *ttlWatch
	key string
}

// ttlWatch is the reflector of one watched type and what it found.
type ttlWatch struct {
	t     apiType
	name  string // controller_name of its metrics
	store *ttlStore
	stop  context.CancelFunc
}

// ttlController deletes objects whose cleanup.kyverno.io/ttl expired. Each
// labelled object waits in a delaying queue until its deadline; the
// informers only tell it when labels come, change or go.
type ttlController struct {
	o        *Options
	meta     metadata.Interface
	disco    discovery.DiscoveryInterface
	kube     kubernetes.Interface
	recorder events.EventRecorder
	m        *metrics
	now      func() time.Time

	queue *runner.Queue[ttlKey]
	poke  chan struct{}

	mu      sync.Mutex
	watched map[schema.GroupVersionResource]*ttlWatch
	// reported holds the invalid values already reported, by object, so
	// an object gets one event per bad value, not one per resync.
	reported map[types.UID]string
}

func newTTLController(o *Options, meta metadata.Interface, disco discovery.DiscoveryInterface, kube kubernetes.Interface, recorder events.EventRecorder, m *metrics) *ttlController {
	return &ttlController{
		o: o, meta: meta, disco: disco, kube: kube, recorder: recorder, m: m, now: time.Now,
		poke:     make(chan struct{}, 1),
		watched:  map[schema.GroupVersionResource]*ttlWatch{},
		reported: map[types.UID]string{},
	}
}

// run discovers the types to watch, now and then every DiscoveryInterval
// or when a CRD changes, and deletes expired objects until ctx ends.
func (c *ttlController) run(ctx context.Context) error {
	// An expired object whose delete fails is retried with backoff until
	// it is gone.
	c.queue = runner.New(runner.Options[ttlKey]{Name: "cleanup-ttl", Workers: c.o.TTLWorkers, MaxDelay: c.o.MaxRetryDelay})
	defer c.queue.ShutDown()
	defer c.stopAll()

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.queue.Run(ctx, c.handle) })
	stopCRDs := c.watchCRDs(ctx)
	defer stopCRDs()

	ticker := time.NewTicker(c.o.DiscoveryInterval)
	defer ticker.Stop()
	for {
		if err := c.discover(ctx); err != nil {
			c.o.Log.Error(err, "TTL: discovering the kinds to watch; the kinds watched so far stay watched")
		}
		select {
		case <-ctx.Done():
			c.queue.ShutDown()
			return nil
		case <-ticker.C:
		case <-c.poke:
			// Give the API server a moment to serve a new CRD's
			// resource in discovery.
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// watchCRDs pokes discovery whenever a CRD is added, changed (e.g.
// becomes Established) or deleted.
func (c *ttlController) watchCRDs(ctx context.Context) func() {
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	inf := metadatainformer.NewFilteredMetadataInformer(c.meta, crds, "", 0, cache.Indexers{}, nil).Informer()
	poke := func() {
		select {
		case c.poke <- struct{}{}:
		default:
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	})
	ictx, cancel := context.WithCancel(ctx)
	go inf.RunWithContext(ictx)
	return cancel
}

// discover starts an informer for every deletable type the controller may
// list, watch and delete cluster-wide, and stops those of types that are
// gone.
func (c *ttlController) discover(ctx context.Context) error {
	types, err := discoverDeletable(c.disco)
	if err != nil {
		return err
	}
	want := make(map[schema.GroupVersionResource]apiType, len(types))
	for _, t := range types {
		want[t.GVR] = t
	}
	c.mu.Lock()
	var gone []*ttlWatch
	for gvr, w := range c.watched {
		if _, ok := want[gvr]; !ok {
			gone = append(gone, w)
			delete(c.watched, gvr)
		}
	}
	var fresh []apiType
	for gvr, t := range want {
		if _, ok := c.watched[gvr]; !ok {
			fresh = append(fresh, t)
		}
	}
	c.mu.Unlock()
	for _, w := range gone {
		w.stop()
		w.store.forget()
		c.m.ttlInfo.DeleteLabelValues(w.t.GVR.Group, w.t.GVR.Version, w.t.GVR.Resource)
		c.o.Log.Info("TTL: no longer watching", "resource", w.t.GVR.String())
	}
	for _, t := range fresh {
		allowed, err := c.mayDelete(ctx, t.GVR)
		if err != nil {
			return err
		}
		if !allowed {
			continue
		}
		c.watch(ctx, t)
	}
	return nil
}

// mayDelete asks the API server whether charter may list, watch and
// delete the resource in every namespace: a TTL charter cannot act on
// everywhere is not watched at all.
func (c *ttlController) mayDelete(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
	for _, verb := range []string{"list", "watch", "delete"} {
		r, err := c.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("asking whether charter may %s %s: %w", verb, gvr.String(), err)
		}
		if !r.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}

func (c *ttlController) watch(ctx context.Context, t apiType) {
	w := &ttlWatch{t: t, name: ttlControllerName(t)}
	w.store = &ttlStore{
		items:   map[string]ttlEntry{},
		tracked: c.m.ttlTracked,
		changed: func(key string) { c.queue.Add(ttlKey{w: w, key: key}) },
		removed: func(uid types.UID) {
			c.mu.Lock()
			delete(c.reported, uid)
			c.mu.Unlock()
		},
	}
	r := cache.NewReflectorWithOptions(w.store.listWatch(c.meta, t.GVR), &metav1.PartialObjectMetadata{}, w.store,
		cache.ReflectorOptions{Name: "cleanup-ttl " + t.GVR.String()})
	ictx, cancel := context.WithCancel(ctx)
	w.stop = cancel
	c.mu.Lock()
	c.watched[t.GVR] = w
	c.mu.Unlock()
	c.m.ttlInfo.WithLabelValues(t.GVR.Group, t.GVR.Version, t.GVR.Resource).Set(1)
	go r.RunWithContext(ictx)
}

func (c *ttlController) stopAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for gvr, w := range c.watched {
		w.stop()
		w.store.forget()
		c.m.ttlInfo.DeleteLabelValues(gvr.Group, gvr.Version, gvr.Resource)
		delete(c.watched, gvr)
	}
}

// handle reconciles one object and counts it in Kyverno's controller
// metrics.
func (c *ttlController) handle(ctx context.Context, key ttlKey) (time.Duration, error) {
	name := key.w.name
	c.m.reconciles.WithLabelValues(name).Inc()
	if err := c.reconcile(ctx, key); err != nil {
		c.m.requeues.WithLabelValues(name, strconv.Itoa(c.queue.Retries(key)+1)).Inc()
		c.o.Log.Error(err, "TTL: deleting an expired object; retrying", "resource", key.w.t.GVR.String(), "object", key.key)
		return 0, err
	}
	return 0, nil
}

// reconcile deletes the object if its TTL has expired, else waits for
// the deadline.
func (c *ttlController) reconcile(ctx context.Context, key ttlKey) error {
	w := key.w
	c.mu.Lock()
	current := c.watched[w.t.GVR] == w
	c.mu.Unlock()
	if !current {
		return nil
	}
	e, ok := w.store.get(key.key)
	namespace, name := splitKey(key.key)
	if !ok || e.deleting || e.value == "" || c.isExcluded(w.t, namespace, name) {
		return nil
	}
	parsed, err := ttl.Parse(e.value)
	if err != nil {
		c.reportInvalid(w.t, namespace, name, e, err)
		return nil
	}
	deadline := parsed.Deadline(e.created.Time)
	if wait := deadline.Sub(c.now()); wait > 0 {
		c.queue.AddAfter(key, wait)
		return nil
	}
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &e.uid}}
	switch p := metav1.DeletionPropagation(e.propagation); p {
	case metav1.DeletePropagationForeground, metav1.DeletePropagationBackground, metav1.DeletePropagationOrphan:
		opts.PropagationPolicy = &p
	}
	gvr := w.t.GVR
	labels := []string{namespace, gvr.Group, gvr.Version, gvr.Resource}
	err = c.meta.Resource(gvr).Namespace(namespace).Delete(ctx, name, opts)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone already, or replaced by a new object of the same name,
		// which has its own deadline.
		return nil
	case err != nil:
		c.m.ttlErrors.WithLabelValues(labels...).Inc()
		return err
	}
	c.m.ttlDeleted.WithLabelValues(labels...).Inc()
	c.recorder.Eventf(objectRef(w.t, namespace, name, e.uid), nil, corev1.EventTypeNormal, ReasonTTLExpired, "Delete",
		"deleted: %s %q expired at %s", ttl.Label, e.value, deadline.UTC().Format(time.RFC3339))
	c.o.Log.V(1).Info("TTL expired: deleted", "resource", gvr.String(), "object", key.key)
	return nil
}

// isExcluded reports whether the object is in an excluded namespace, or
// is an excluded Namespace.
func (c *ttlController) isExcluded(t apiType, namespace, name string) bool {
	if t.GVR.Group == "" && t.GVR.Resource == "namespaces" {
		return c.o.excluded(name)
	}
	return c.o.excluded(namespace)
}

// reportInvalid emits one Warning event per object and invalid value:
// the object is kept, never given a guessed deadline.
func (c *ttlController) reportInvalid(t apiType, namespace, name string, e ttlEntry, err error) {
	c.mu.Lock()
	seen := c.reported[e.uid] == e.value
	c.reported[e.uid] = e.value
	c.mu.Unlock()
	if seen {
		return
	}
	c.recorder.Eventf(objectRef(t, namespace, name, e.uid), nil, corev1.EventTypeWarning, ReasonInvalidTTL, "Keep", "not deleted: %v", err)
}

func objectRef(t apiType, namespace, name string, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: t.GVR.GroupVersion().String(), Kind: t.Kind,
		Namespace: namespace, Name: name, UID: uid}
}
