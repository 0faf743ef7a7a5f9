// Package globalcontext writes the status of GlobalContextEntries
// (kyverno.io/v2alpha1): Ready while policies reading the entry get its
// data, and when not, why, naming what and where (an invalid field, the
// resource charter may not list or watch, the API call that failed).
// The data itself lives in clusterstate/globalcontext, one Store per
// charter process; this reconciler reports the Store of the admission
// process, whose leader writes status.
package globalcontext

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/charter-dev/charter/api/conditions"
	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
	"github.com/charter-dev/charter/clusterstate/globalcontext"
	"github.com/charter-dev/charter/internal/leadership"
)

// loadingRequeue is how soon an entry still loading is looked at again,
// besides the Store's change notifications.
const loadingRequeue = 2 * time.Second

// changeBuffer is how many Store changes wait for the controller.
const changeBuffer = 256

// resync is how often a settled entry's status is compared with the
// Store again, in case a change notification was dropped.
const resync = time.Minute

// GlobalContextEntryReconciler writes a GlobalContextEntry's conditions
// (Ready, Reconciling, Stalled), observedGeneration and lastRefreshTime
// from what the Store knows of it.
type GlobalContextEntryReconciler struct {
	client.Client
	Store *globalcontext.Store
}

// SetupWithManager runs the reconciler on the manager's leader, on
// changes of the entries and of their state in the Store.
func (r *GlobalContextEntryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	changes := make(chan event.GenericEvent, changeBuffer)
	r.Store.OnChange(func(name string) {
		// Never block the Store. The controller reads the channel only
		// while it leads; a change dropped before that is no loss, since
		// on election the controller's informer enqueues every entry.
		select {
		case changes <- event.GenericEvent{Object: &kyvernov2alpha1.GlobalContextEntry{ObjectMeta: metav1.ObjectMeta{Name: name}}}:
		default:
		}
	})
	// Built anew at each term of leadership (a controller starts once
	// only); the Store's listener above is registered once.
	controllers, err := leadership.PerTerm(mgr, func(m ctrl.Manager) error {
		return ctrl.NewControllerManagedBy(m).
			Named("globalcontextentry").
			For(&kyvernov2alpha1.GlobalContextEntry{}).
			WatchesRawSource(source.Channel(changes, &handler.EnqueueRequestForObject{})).
			Complete(r)
	})
	if err != nil {
		return err
	}
	return mgr.Add(controllers)
}

// Reconcile writes the status of one entry.
func (r *GlobalContextEntryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var gce kyvernov2alpha1.GlobalContextEntry
	if err := r.Get(ctx, req.NamespacedName, &gce); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := gce.DeepCopy()
	st, known := r.Store.Status(gce.Name)
	result := ctrl.Result{RequeueAfter: resync}
	conds, gen := &gce.Status.Conditions, gce.Generation
	switch {
	case !known || st.Generation != gce.Generation || !st.Loaded:
		markProgressing(&gce, fmt.Sprintf("loading generation %d", gce.Generation))
		result.RequeueAfter = loadingRequeue
	case st.Ready:
		// Policies reading the entry get its data.
		conditions.MarkReady(conds, gen, kyvernov2alpha1.ReasonSucceeded, readyMessage(&gce))
	case st.Stalled:
		// The entry cannot load until its spec or charter's rights change.
		conditions.MarkStalled(conds, gen, st.Reason, st.Message)
	default:
		// A failure that may pass by itself: an API call that failed is
		// made again at the next refresh.
		conditions.MarkRetrying(conds, gen, st.Reason, st.Reason, st.Message)
	}
	if !st.LastRefresh.IsZero() && st.Generation == gce.Generation {
		t := metav1.NewTime(st.LastRefresh.Truncate(time.Second))
		gce.Status.LastRefreshTime = &t
	}
	gce.Status.ObservedGeneration = gce.Generation
	if apiequalStatus(before, &gce) {
		return result, nil
	}
	if err := r.Status().Patch(ctx, &gce, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return result, nil
}

// readyMessage says what the entry holds.
func readyMessage(gce *kyvernov2alpha1.GlobalContextEntry) string {
	if r := gce.Spec.KubernetesResource; r != nil {
		where := "every namespace"
		if r.Namespace != "" {
			where = "namespace " + r.Namespace
		}
		return fmt.Sprintf("watching %s of %s", r.Resource, where)
	}
	return fmt.Sprintf("API call answered; refreshed every %s", gce.Spec.APICall.RefreshEvery())
}

func apiequalStatus(a, b *kyvernov2alpha1.GlobalContextEntry) bool {
	if a.Status.ObservedGeneration != b.Status.ObservedGeneration || !a.Status.LastRefreshTime.Equal(b.Status.LastRefreshTime) ||
		len(a.Status.Conditions) != len(b.Status.Conditions) {
		return false
	}
	for _, c := range b.Status.Conditions {
		old := apimeta.FindStatusCondition(a.Status.Conditions, c.Type)
		if old == nil || old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message || old.ObservedGeneration != c.ObservedGeneration {
			return false
		}
	}
	return true
}

// markProgressing: the entry's current generation is loading; policies
// get no data meanwhile (Ready Unknown even when it was True: the data
// loaded belongs to another spec).
func markProgressing(obj *kyvernov2alpha1.GlobalContextEntry, msg string) {
	conds, gen := &obj.Status.Conditions, obj.Generation
	conditions.Set(conds, gen, conditions.Reconciling, metav1.ConditionTrue, kyvernov2alpha1.ReasonLoading, msg)
	conditions.Set(conds, gen, conditions.Ready, metav1.ConditionUnknown, kyvernov2alpha1.ReasonLoading, msg)
	conditions.Delete(conds, conditions.Stalled)
}
