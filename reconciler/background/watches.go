package background

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/reconciler/internal/runner"
)

// Indexes of the downstream informers.
// An object is indexed under every policyid.Of its labels may name
// (downstreamOwners); ownsDownstream decides among them.
const (
	// byRule: policy ID and rule name.
	byRule = "rule"
	// bySource: the uid of the clone source.
	bySource = "source"
	// byTrigger: policy ID, rule name and trigger uid.
	byTrigger = "trigger"
)

// watches are the leader's informers on downstream objects (by their
// generate.kyverno.io/policy-name label) and on clone sources: a
// downstream object edited or deleted, or a source changed, queues the
// rule for its trigger again. Only updates and deletes after the initial
// list count; the policy sync at leader start covers the rest.
type watches struct {
	ctx    context.Context
	cancel context.CancelFunc
	c      *Controller
	queue  *runner.Queue[workItem]

	mu         sync.Mutex
	downstream map[schema.GroupVersionResource]cache.SharedIndexInformer
	sources    map[sourceKey]cache.SharedIndexInformer
}

type sourceKey struct {
	gvr       schema.GroupVersionResource
	namespace string
}

// downstreamSettle is how long the work a downstream object's change
// queues waits: long enough for a policy edit made just before it to
// reach the compiled policies (the policy cache gathers changes for up to
// a second), so the work acts on the policy as it is now (fromDownstream).
const downstreamSettle = 2 * time.Second

func newWatches(ctx context.Context, c *Controller, queue *runner.Queue[workItem]) *watches {
	ctx, cancel := context.WithCancel(ctx)
	w := &watches{ctx: ctx, cancel: cancel, c: c, queue: queue,
		downstream: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		sources:    map[sourceKey]cache.SharedIndexInformer{}}
	c.watch.Store(w)
	return w
}

func (w *watches) stop() {
	w.cancel()
	w.c.watch.CompareAndSwap(w, nil)
}

// ensureDownstream watches the kinds a generate rule writes and waits for
// their first list, so downstreamOf knows what exists.
func (w *watches) ensureDownstream(p kyvernov1.PolicyInterface, rule *kyvernov1.Rule) {
	for _, kind := range generatedKinds(p, rule) {
		for _, t := range w.c.kinds.Resolve(kind) {
			w.mu.Lock()
			inf, ok := w.downstream[t.GVR]
			if !ok {
				inf = metadatainformer.NewFilteredMetadataInformer(w.c.meta, t.GVR, metav1.NamespaceAll, 0,
					cache.Indexers{byRule: indexRule, bySource: indexSource, byTrigger: indexTrigger},
					func(o *metav1.ListOptions) { o.LabelSelector = generate.LabelPolicyName }).Informer()
				_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
					UpdateFunc: func(oldObj, newObj any) {
						o, n := metaOf(oldObj), metaOf(newObj)
						if o != nil && n != nil && o.ResourceVersion != n.ResourceVersion {
							w.requeueDownstream(n, "")
						}
					},
					DeleteFunc: func(obj any) {
						if m := metaOf(obj); m != nil {
							w.requeueDownstream(m, "")
						}
					},
				})
				w.downstream[t.GVR] = inf
				go inf.RunWithContext(w.ctx)
			}
			w.mu.Unlock()
			cache.WaitForCacheSync(w.ctx.Done(), inf.HasSynced)
		}
	}
}

// ensureSource watches the namespace of a clone source for changes to it.
func (w *watches) ensureSource(gvr schema.GroupVersionResource, namespace string) {
	key := sourceKey{gvr, namespace}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.sources[key]; ok {
		return
	}
	inf := metadatainformer.NewFilteredMetadataInformer(w.c.meta, gvr, namespace, 0, cache.Indexers{}, nil).Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, n := metaOf(oldObj), metaOf(newObj)
			if o != nil && n != nil && o.ResourceVersion != n.ResourceVersion {
				w.requeueClones(n.UID, false)
			}
		},
		DeleteFunc: func(obj any) {
			if m := metaOf(obj); m != nil {
				w.requeueClones(m.UID, true)
			}
		},
	})
	w.sources[key] = inf
	go inf.RunWithContext(w.ctx)
}

// requeueDownstream queues the rule that generated a downstream object,
// for its trigger: the rule of the policy its LabelPolicyKind names, or,
// without that label, the rule of each policy its labels may name that
// has it (each brings back only its own objects; ownsDownstream keeps
// them off an object that is not provably theirs). Only a rule that
// synchronizes: without synchronize, a downstream object deleted or
// edited, or its clone source changed, stays as it is, as in Kyverno
// (its chainsaw tests generating-policies/*/nosync/nosync-delete-downstream).
//
// sourceGone, when not empty, is the uid of the deleted clone source of
// m: a GeneratingPolicy's item carries it.
func (w *watches) requeueDownstream(m *metav1.PartialObjectMetadata, sourceGone types.UID) {
	ids, item, ok := downstreamOwners(m.Labels)
	if !ok {
		return
	}
	compiled := w.c.compiled.Load()
	for _, id := range ids {
		p := compiled.byID[id]
		if r := ruleOf(p, item.rule); r != nil && r.HasGenerate() && r.Generation.Synchronize {
			item.policy = id
			item.fromDownstream = true
			item.sourceGone = ""
			if gpolSynchronized(p, r) {
				item.sourceGone = sourceGone
			}
			w.queue.AddAfter(item, downstreamSettle)
		}
	}
}

// sourceGoneIf is uid when the source was deleted, else "".
func sourceGoneIf(deleted bool, uid types.UID) types.UID {
	if deleted {
		return uid
	}
	return ""
}

// requeueClones queues the rules whose copies came from a source. When
// the source was deleted, a GeneratingPolicy's copies are queued to be
// deleted (sourceGone): its run would only fail to read the source, and
// Kyverno deletes a synchronized GeneratingPolicy's clones with their
// source (its chainsaw test generating-policies/clone/sync/sync-delete-source).
// A ClusterPolicy's clone rule runs again and finds its source gone.
func (w *watches) requeueClones(uid types.UID, deleted bool) {
	w.mu.Lock()
	infs := make([]cache.SharedIndexInformer, 0, len(w.downstream))
	for _, inf := range w.downstream {
		infs = append(infs, inf)
	}
	w.mu.Unlock()
	for _, inf := range infs {
		objs, _ := inf.GetIndexer().ByIndex(bySource, string(uid))
		for _, o := range objs {
			if m := metaOf(o); m != nil {
				w.requeueDownstream(m, sourceGoneIf(deleted, uid))
			}
		}
	}
}

// downstreamOf returns the work that re-syncs every downstream object of
// a rule of p.
func (w *watches) downstreamOf(p kyvernov1.PolicyInterface, rule string) []workItem {
	id := policyid.Of(p)
	w.mu.Lock()
	infs := make([]cache.SharedIndexInformer, 0, len(w.downstream))
	for _, inf := range w.downstream {
		infs = append(infs, inf)
	}
	w.mu.Unlock()
	var out []workItem
	for _, inf := range infs {
		objs, _ := inf.GetIndexer().ByIndex(byRule, id+"\x00"+rule)
		for _, o := range objs {
			if m := metaOf(o); m != nil && w.c.ownsDownstream(m.Labels, p, rule) {
				if item, ok := workOf(m.Labels); ok {
					item.policy = id
					out = append(out, item)
				}
			}
		}
	}
	return out
}

// downstreamObject is an object a rule generated, as a watch knows it.
type downstreamObject struct {
	gvr  schema.GroupVersionResource
	meta *metav1.PartialObjectMetadata
}

// downstreamFor returns the objects a rule of p generated for one
// trigger, among the kinds watched.
func (w *watches) downstreamFor(p kyvernov1.PolicyInterface, rule string, trigger types.UID) []downstreamObject {
	id := policyid.Of(p)
	w.mu.Lock()
	infs := make(map[schema.GroupVersionResource]cache.SharedIndexInformer, len(w.downstream))
	for gvr, inf := range w.downstream {
		infs[gvr] = inf
	}
	w.mu.Unlock()
	var out []downstreamObject
	for gvr, inf := range infs {
		objs, _ := inf.GetIndexer().ByIndex(byTrigger, id+"\x00"+rule+"\x00"+string(trigger))
		for _, o := range objs {
			if m := metaOf(o); m != nil && w.c.ownsDownstream(m.Labels, p, rule) {
				out = append(out, downstreamObject{gvr: gvr, meta: m})
			}
		}
	}
	return out
}

// workOf is the work of the rule that generated an object, from its
// labels. Its policy is the key the labels name, which the caller turns
// into an policyid.Of (downstreamOwners).
func workOf(l map[string]string) (workItem, bool) {
	name, rule := l[generate.LabelPolicyName], l[generate.LabelRuleName]
	if name == "" || rule == "" || l[generate.LabelTriggerUID] == "" {
		return workItem{}, false
	}
	key := name
	if ns := l[generate.LabelPolicyNamespace]; ns != "" {
		key = ns + "/" + name
	}
	return workItem{typ: kyvernov2.Generate, policy: key, rule: rule, trigger: triggerFromLabels(l)}, true
}

func indexRule(obj any) ([]string, error) {
	m := metaOf(obj)
	if m == nil {
		return nil, nil
	}
	ids, item, _ := downstreamOwners(m.Labels)
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id + "\x00" + item.rule
	}
	return out, nil
}

func indexTrigger(obj any) ([]string, error) {
	m := metaOf(obj)
	if m == nil {
		return nil, nil
	}
	ids, item, _ := downstreamOwners(m.Labels)
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id + "\x00" + item.rule + "\x00" + string(item.trigger.UID)
	}
	return out, nil
}

func indexSource(obj any) ([]string, error) {
	m := metaOf(obj)
	if m == nil || m.Labels[generate.LabelSourceUID] == "" {
		return nil, nil
	}
	return []string{m.Labels[generate.LabelSourceUID]}, nil
}

func metaOf(obj any) *metav1.PartialObjectMetadata {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, _ := obj.(*metav1.PartialObjectMetadata)
	return m
}

// listMetadata lists the objects of a resource, in a namespace or ("")
// everywhere, as metadata.
func (c *Controller) listMetadata(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]metav1.PartialObjectMetadata, error) {
	var out []metav1.PartialObjectMetadata
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := c.meta.Resource(gvr).Namespace(namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, list.Items...)
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}
