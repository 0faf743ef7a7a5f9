// Package apply applies a checked revision with server-side apply, staged
// and dry-run first, and prunes the objects that left it.
//
// The whole revision is dry-run before anything is written, so an object
// the API server rejects stops the revision with nothing changed. The one
// exception is an object that needs a Namespace or CRD declared in the same
// revision: its dry-run can only succeed once those exist, so it is dry-run
// again after the first stage, before any later stage is written.
package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
	"github.com/charter-dev/charter/reconciler/gitsync/inventory"
)

// LegacyFieldManager is the field manager every repository applied with
// before each got its own (FieldManagerOf). A repository takes over the
// fields it still holds on objects of its own inventory, so objects an
// older charter applied keep being updated and pruned by the repository
// that owns them.
const LegacyFieldManager = "charter"

// maxFieldManager is the longest field manager the API server accepts.
const maxFieldManager = 128

// FieldManagerOf is the server-side apply field manager of one
// PolicyRepository, charter/<namespace>/<name>: each repository owns the
// fields it applies, so one repository can neither take over nor prune
// what another manager (a person, the platform, another repository)
// placed. A name too long for the API server keeps what fits and ends in
// a hash of the whole.
func FieldManagerOf(owner client.ObjectKey) string {
	m := "charter/" + owner.Namespace + "/" + owner.Name
	if len(m) <= maxFieldManager {
		return m
	}
	sum := sha256.Sum256([]byte(m))
	suffix := "-" + hex.EncodeToString(sum[:8])
	return m[:maxFieldManager-len(suffix)] + suffix
}

// PruneAnnotation set to PruneDisabled on an object keeps it when it leaves
// the repository.
const (
	PruneAnnotation = "gitops.charter.dev/prune"
	PruneDisabled   = "disabled"
)

// Owner labels mark every applied object with the PolicyRepository that
// applied it; prune deletes only objects that still carry its labels.
const (
	OwnerNameLabel      = "gitops.charter.dev/name"
	OwnerNamespaceLabel = "gitops.charter.dev/namespace"
)

// Stages, in apply order.
const (
	StageClusterDefinitions = iota // Namespaces and CRDs
	StageExceptions                // PolicyExceptions, before the policies they exempt from
	StagePolicies                  // ClusterPolicies and Policies
	StageRest                      // everything else
)

// StageOf returns the stage an object is applied in.
func StageOf(u *unstructured.Unstructured) int {
	gvk := u.GroupVersionKind()
	switch {
	case gvk.Group == "" && gvk.Kind == "Namespace",
		gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition":
		return StageClusterDefinitions
	case gvk.Group == "kyverno.io" && gvk.Kind == "PolicyException":
		return StageExceptions
	case gvk.Group == "kyverno.io" && (gvk.Kind == "ClusterPolicy" || gvk.Kind == "Policy"):
		return StagePolicies
	default:
		return StageRest
	}
}

// Action is what applying did to an object.
type Action string

// Actions.
const (
	Created    Action = "created"
	Configured Action = "configured"
	Unchanged  Action = "unchanged"
	Deleted    Action = "deleted"
	Skipped    Action = "skipped"
)

// Change is one object's outcome.
type Change struct {
	// Object is "Kind/name" or "Kind/namespace/name".
	Object string
	Action Action
}

// ChangeSet lists the outcomes in apply order.
type ChangeSet []Change

// Changed reports whether anything was created, configured or deleted.
func (cs ChangeSet) Changed() bool {
	for _, c := range cs {
		if c.Action == Created || c.Action == Configured || c.Action == Deleted {
			return true
		}
	}
	return false
}

// Summary counts the outcomes, e.g. "2 created, 1 configured, 5 unchanged".
func (cs ChangeSet) Summary() string {
	counts := map[Action]int{}
	for _, c := range cs {
		counts[c.Action]++
	}
	var parts []string
	for _, a := range []Action{Created, Configured, Deleted, Unchanged, Skipped} {
		if counts[a] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[a], a))
		}
	}
	if len(parts) == 0 {
		return "no objects"
	}
	return strings.Join(parts, ", ")
}

// ObjectError is an object the API server refused.
type ObjectError struct {
	File   string
	Object string
	Err    error
}

func (e *ObjectError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("%s: %v", e.Object, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", e.File, e.Object, e.Err)
}

func (e *ObjectError) Unwrap() error { return e.Err }

// Error is a revision the API server refused. DryRun says nothing was
// written.
type Error struct {
	DryRun bool
	Errs   []*ObjectError
}

func (e *Error) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, oe := range e.Errs {
		msgs[i] = oe.Error()
	}
	what := "apply"
	if e.DryRun {
		what = "dry-run"
	}
	return fmt.Sprintf("%s failed: %s", what, strings.Join(msgs, "; "))
}

// Invalid reports whether the server refused the objects themselves
// (invalid, unknown field), which retrying cannot fix. A kind the server
// does not serve is not one: its CRD may be installed by someone else.
func (e *Error) Invalid() bool {
	for _, oe := range e.Errs {
		if !apierrors.IsInvalid(oe.Err) && !apierrors.IsBadRequest(oe.Err) {
			return false
		}
	}
	return true
}

// Forbidden reports whether the server refused an object to the identity
// that applies it (RBAC): granting that identity more, not retrying the
// same request, fixes it.
func (e *Error) Forbidden() bool {
	for _, oe := range e.Errs {
		if apierrors.IsForbidden(oe.Err) {
			return true
		}
	}
	return false
}

// Applier applies revisions for one PolicyRepository.
type Applier struct {
	Client client.Client
	// Owner is the PolicyRepository; its name and namespace label every
	// applied object.
	Owner client.ObjectKey
	// FieldManager applies the revision; FieldManagerOf(Owner) when empty.
	FieldManager string
	// Force takes over the fields other managers hold, and objects that
	// exist and are not in Inventory (spec.force). Without it such an
	// object stops the revision with a *ConflictError.
	Force bool
	// Inventory lists the objects the repository applied last
	// (status.inventory). An object of the revision that another manager
	// holds is updated only if it is listed here and labelled with the
	// repository (or with Force); such an object is applied with force,
	// which corrects drift and takes over what LegacyFieldManager holds
	// of it.
	Inventory *gitopsv1alpha1.ResourceInventory
	// CRDTimeout bounds the wait for CRDs of the revision to be
	// established; 30s when zero.
	CRDTimeout time.Duration
	// Concurrency is how many requests run at once within a stage;
	// DefaultConcurrency when zero. Objects of one stage do not depend on
	// each other, and a revision of hundreds of policies applied one
	// request at a time spends most of its time waiting on round trips.
	Concurrency int
}

// DefaultConcurrency is the Applier's default of requests in flight.
const DefaultConcurrency = 8

func (a *Applier) manager() string {
	if a.FieldManager != "" {
		return a.FieldManager
	}
	return FieldManagerOf(a.Owner)
}

// inventoried reports whether u is in the repository's inventory.
func (a *Applier) inventoried(u *unstructured.Unstructured) bool {
	if a.Inventory == nil {
		return false
	}
	id := inventory.Ref(u).ID
	return slices.ContainsFunc(a.Inventory.Entries, func(e gitopsv1alpha1.ResourceRef) bool { return e.ID == id })
}

// Apply dry-runs, then applies objs in stages. When the dry-run fails,
// nothing is written.
func (a *Applier) Apply(ctx context.Context, objs []build.Object) (ChangeSet, error) {
	staged := make([][]build.Object, StageRest+1)
	namespaces, crdKinds := map[string]bool{}, map[schema.GroupKind]bool{}
	for _, o := range objs {
		o = build.Object{Unstructured: o.DeepCopy(), File: o.File}
		a.label(o.Unstructured)
		s := StageOf(o.Unstructured)
		staged[s] = append(staged[s], o)
		if s == StageClusterDefinitions {
			if o.GetKind() == "Namespace" {
				namespaces[o.GetName()] = true
			} else if gk, ok := crdGroupKind(o.Unstructured); ok {
				crdKinds[gk] = true
			}
		}
	}

	// Dry-run everything; keep aside what waits on this revision's own
	// Namespaces and CRDs.
	dryRV := map[string]string{}
	// forced are the repository's own objects that someone else changed
	// since: they are applied with force (drift correction).
	forced := map[string]bool{}
	var deferred []build.Object
	var errs []*ObjectError
	all := slices.Concat(staged...)
	for i, r := range a.dryRunAll(ctx, all, forced) {
		o := all[i]
		switch {
		case r.err == nil:
			dryRV[key(o.Unstructured)] = r.rv
		case dependsOnRevision(r.err, o.Unstructured, namespaces, crdKinds):
			deferred = append(deferred, o)
		default:
			errs = append(errs, &ObjectError{File: o.File, Object: key(o.Unstructured), Err: r.err})
		}
	}
	if len(errs) > 0 {
		return nil, &Error{DryRun: true, Errs: errs}
	}

	var changes ChangeSet
	apply := func(stage []build.Object) error {
		var failed []*ObjectError
		for i, r := range a.patchAll(ctx, stage, false, forced) {
			o := stage[i]
			if r.err != nil {
				failed = append(failed, &ObjectError{File: o.File, Object: key(o.Unstructured), Err: r.err})
				continue
			}
			changes = append(changes, Change{Object: key(o.Unstructured), Action: actionOf(dryRV[key(o.Unstructured)], r.rv)})
		}
		if len(failed) > 0 {
			return &Error{Errs: failed}
		}
		return nil
	}
	if err := apply(staged[StageClusterDefinitions]); err != nil {
		return changes, err
	}
	if len(crdKinds) > 0 {
		if err := a.waitEstablished(ctx, staged[StageClusterDefinitions]); err != nil {
			return changes, err
		}
	}
	for i, r := range a.dryRunAll(ctx, deferred, forced) {
		o := deferred[i]
		if r.err != nil {
			errs = append(errs, &ObjectError{File: o.File, Object: key(o.Unstructured), Err: r.err})
			continue
		}
		dryRV[key(o.Unstructured)] = r.rv
	}
	if len(errs) > 0 {
		return changes, &Error{DryRun: true, Errs: errs}
	}
	for _, stage := range staged[StageClusterDefinitions+1:] {
		if err := apply(stage); err != nil {
			return changes, err
		}
	}
	return changes, nil
}

// dryRunAll dry-runs objs and checks that none takes over what is not
// the repository's. An object that conflicts with another manager's
// fields, or that exists and another manager holds, becomes a
// *ConflictError unless Force, or unless it is the repository's own: in
// its inventory and, live, labelled with it (status.inventory alone is
// not proof: whoever may write a repository's status could list anything
// there). The repository's own objects are dry-run again with force and
// recorded in forced, so that their apply sets back what someone changed
// by hand (drift) or what an older charter holds under
// LegacyFieldManager.
func (a *Applier) dryRunAll(ctx context.Context, objs []build.Object, forced map[string]bool) []patchResult {
	results := a.patchAll(ctx, objs, true, forced)
	for i, r := range results {
		o := objs[i]
		if a.Force {
			continue
		}
		switch {
		case r.err != nil && apierrors.IsConflict(r.err):
			if !a.owns(ctx, o.Unstructured) {
				r.err = conflictOf(r.err)
				break
			}
			forced[key(o.Unstructured)] = true
			rv, managed, err := a.patch(ctx, o, true, true)
			r = patchResult{rv: rv, managed: managed, err: err}
		case r.err == nil && r.rv != "":
			if others := a.othersOf(r.managed); len(others) > 0 && !a.owns(ctx, o.Unstructured) {
				r.err = &ConflictError{Existing: true, Managers: others}
			}
		}
		results[i] = r
	}
	return results
}

// owns reports whether u is the repository's own: in its inventory, and
// live, labelled with it. An object it cannot read is not.
func (a *Applier) owns(ctx context.Context, u *unstructured.Unstructured) bool {
	if !a.inventoried(u) {
		return false
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	if err := a.Client.Get(ctx, client.ObjectKeyFromObject(u), live); err != nil {
		return false
	}
	labels := live.GetLabels()
	return labels[OwnerNameLabel] == a.Owner.Name && labels[OwnerNamespaceLabel] == a.Owner.Namespace
}

// othersOf returns the managers other than the repository's that hold
// fields of an object (status writers aside), each with the fields it
// shares with the repository's, or all of its own when it shares none.
func (a *Applier) othersOf(managed []metav1.ManagedFieldsEntry) []ManagerFields {
	var ours *fieldpath.Set
	for _, e := range managed {
		if e.Manager == a.manager() && e.Subresource == "" {
			ours = fieldSet(e.FieldsV1)
		}
	}
	var others []ManagerFields
	for _, e := range managed {
		if e.Manager == a.manager() || e.Subresource != "" {
			continue
		}
		theirs := fieldSet(e.FieldsV1)
		if ours != nil {
			if shared := theirs.Intersection(ours); !shared.Empty() {
				theirs = shared
			}
		}
		others = append(others, ManagerFields{Manager: e.Manager, Fields: leaves(theirs)})
	}
	return others
}

// label marks o as applied by the owner.
func (a *Applier) label(u *unstructured.Unstructured) {
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[OwnerNameLabel] = a.Owner.Name
	labels[OwnerNamespaceLabel] = a.Owner.Namespace
	u.SetLabels(labels)
}

// patchResult is the outcome of one patch.
type patchResult struct {
	rv      string
	managed []metav1.ManagedFieldsEntry
	err     error
}

// patchAll patches objs, up to Concurrency at a time, and returns their
// results in the order of objs. The objects forced names, and every
// object when Force, are applied with force.
func (a *Applier) patchAll(ctx context.Context, objs []build.Object, dryRun bool, forced map[string]bool) []patchResult {
	results := make([]patchResult, len(objs))
	workers := a.Concurrency
	if workers <= 0 {
		workers = DefaultConcurrency
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(objs)) {
		wg.Go(func() {
			for i := range next {
				o := objs[i]
				rv, managed, err := a.patch(ctx, o, dryRun, a.Force || forced[key(o.Unstructured)])
				results[i] = patchResult{rv: rv, managed: managed, err: err}
			}
		})
	}
	for i := range objs {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

// patch server-side applies o and returns the resulting resourceVersion
// and managed fields. It uses Patch with client.Apply rather than
// Client.Apply because only patch options carry fieldValidation: Strict
// makes the server refuse unknown fields instead of dropping them with a
// warning.
func (a *Applier) patch(ctx context.Context, o build.Object, dryRun, force bool) (string, []metav1.ManagedFieldsEntry, error) {
	u := o.DeepCopy()
	opts := []client.PatchOption{client.FieldOwner(a.manager()), client.FieldValidation("Strict")}
	if force {
		opts = append(opts, client.ForceOwnership)
	}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	//nolint:staticcheck // see above: Client.Apply has no fieldValidation.
	if err := a.Client.Patch(ctx, u, client.Apply, opts...); err != nil {
		return "", nil, err
	}
	return u.GetResourceVersion(), u.GetManagedFields(), nil
}

// actionOf infers the outcome: a dry-run of a new object has no
// resourceVersion; an apply that changed nothing keeps it.
func actionOf(dryRunRV, appliedRV string) Action {
	switch {
	case dryRunRV == "":
		return Created
	case dryRunRV != appliedRV:
		return Configured
	default:
		return Unchanged
	}
}

func dependsOnRevision(err error, u *unstructured.Unstructured, namespaces map[string]bool, crdKinds map[schema.GroupKind]bool) bool {
	if meta.IsNoMatchError(err) || isNotFoundKind(err) {
		return crdKinds[u.GroupVersionKind().GroupKind()]
	}
	if apierrors.IsNotFound(err) && u.GetNamespace() != "" {
		return namespaces[u.GetNamespace()]
	}
	return false
}

// isNotFoundKind matches the API server's 404 for a resource it does not
// serve, which the REST mapper may report instead of a no-match error.
func isNotFoundKind(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && apierrors.IsNotFound(err) && status.Status().Details == nil
}

func crdGroupKind(u *unstructured.Unstructured) (schema.GroupKind, bool) {
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
	return schema.GroupKind{Group: group, Kind: kind}, group != "" && kind != ""
}

func (a *Applier) waitEstablished(ctx context.Context, objs []build.Object) error {
	timeout := a.CRDTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := a.Client.Get(ctx, client.ObjectKey{Name: o.GetName()}, &crd); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					// Established comes before discovery serves the new
					// group; the dry-run of the kind's objects needs the
					// REST mapper to know it.
					gk, _ := crdGroupKind(o.Unstructured)
					_, err := a.Client.RESTMapper().RESTMapping(gk)
					return err == nil, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return &Error{Errs: []*ObjectError{{File: o.File, Object: key(o.Unstructured), Err: fmt.Errorf("not established: %w", err)}}}
		}
	}
	return nil
}

// Prune deletes the stale objects, last stage first. It skips objects that
// opt out with the prune annotation, that another owner took over (the
// owner labels name another repository, or another field manager holds
// fields of it, see manages), and CRDs (deleting one
// deletes every object of its kind).
func (a *Applier) Prune(ctx context.Context, stale []gitopsv1alpha1.ResourceRef) (ChangeSet, error) {
	return a.prune(ctx, stale, false)
}

// CheckPrune dry-runs what Prune would delete, so that a deletion the
// server refuses (RBAC) is found before anything of the revision is
// applied. It returns an *Error with DryRun set.
func (a *Applier) CheckPrune(ctx context.Context, stale []gitopsv1alpha1.ResourceRef) error {
	_, err := a.prune(ctx, stale, true)
	return err
}

func (a *Applier) prune(ctx context.Context, stale []gitopsv1alpha1.ResourceRef, dryRun bool) (ChangeSet, error) {
	objs := make([]*unstructured.Unstructured, 0, len(stale))
	for _, ref := range stale {
		u, err := inventory.Object(ref)
		if err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	sort.SliceStable(objs, func(i, j int) bool { return StageOf(objs[i]) > StageOf(objs[j]) })
	var changes ChangeSet
	var errs []error
	var dryRunErrs []*ObjectError
	fail := func(k string, err error) {
		if dryRun {
			dryRunErrs = append(dryRunErrs, &ObjectError{Object: "prune of " + k, Err: err})
			return
		}
		errs = append(errs, fmt.Errorf("%s: %w", k, err))
	}
	deleteOpts := []client.DeleteOption{client.PropagationPolicy("Background")}
	if dryRun {
		deleteOpts = append(deleteOpts, client.DryRunAll)
	}
	for _, u := range objs {
		k := key(u)
		if err := a.Client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				continue
			}
			fail(k, err)
			continue
		}
		labels := u.GetLabels()
		switch {
		case u.GetAnnotations()[PruneAnnotation] == PruneDisabled,
			labels[OwnerNameLabel] != a.Owner.Name || labels[OwnerNamespaceLabel] != a.Owner.Namespace,
			!a.manages(u),
			u.GetKind() == "CustomResourceDefinition":
			changes = append(changes, Change{Object: k, Action: Skipped})
			continue
		}
		if err := a.Client.Delete(ctx, u, deleteOpts...); client.IgnoreNotFound(err) != nil {
			fail(k, err)
			continue
		}
		changes = append(changes, Change{Object: k, Action: Deleted})
	}
	if len(dryRunErrs) > 0 {
		return nil, &Error{DryRun: true, Errs: dryRunErrs}
	}
	return changes, errors.Join(errs...)
}

// manages reports whether the repository alone holds u: its own field
// manager or, for objects an older charter applied, LegacyFieldManager
// (stale objects all come from the inventory) holds fields of it, and no
// other manager does (status writers aside). An object someone else
// took over, or now shares, is theirs to delete.
func (a *Applier) manages(u *unstructured.Unstructured) bool {
	ours := false
	for _, e := range u.GetManagedFields() {
		switch {
		case e.Subresource != "":
		case e.Manager == a.manager() || e.Manager == LegacyFieldManager:
			ours = true
		default:
			return false
		}
	}
	return ours
}

func key(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + "/" + u.GetName()
	}
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}
