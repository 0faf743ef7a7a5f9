package gitsync

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// RequestedAtAnnotation, set to a new value (a timestamp, by convention),
// asks for an immediate sync; the receiver sets it on a push. The value
// handled last is echoed in status.lastHandledReconcileAt.
const RequestedAtAnnotation = gitopsv1alpha1.ReconcileRequestAnnotation

// requestedAt returns the sync request of obj: RequestedAtAnnotation, or
// the older spelling of it when only that one is set.
func requestedAt(obj client.Object) string {
	ann := obj.GetAnnotations()
	if v := ann[RequestedAtAnnotation]; v != "" {
		return v
	}
	return ann[gitopsv1alpha1.LegacyReconcileRequestAnnotation]
}

// syncRequested passes updates that change the sync request annotation, so
// status-only updates do not retrigger a reconcile but a request does.
type syncRequested struct{ predicate.Funcs }

func (syncRequested) Update(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return false
	}
	v := requestedAt(e.ObjectNew)
	return v != "" && v != requestedAt(e.ObjectOld)
}
