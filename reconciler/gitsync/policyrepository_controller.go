package gitsync

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/egress"
	"github.com/charter-dev/charter/reconciler/gitsync/apply"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
	"github.com/charter-dev/charter/reconciler/gitsync/check"
	"github.com/charter-dev/charter/reconciler/gitsync/inventory"
	"github.com/charter-dev/charter/reconciler/gitsync/source"
)

// Event reasons.
const (
	EventNewRevision = "NewRevision"
	EventApplied     = "Applied"
	EventPruned      = "Pruned"
	EventFailed      = "Failed"
	// EventPolicyWarning holds the warnings Kyverno gives when it admits
	// a policy of the revision, one event per policy (related to it).
	EventPolicyWarning = "PolicyWarning"
)

// PolicyRepositoryReconciler syncs PolicyRepositories.
//
// A repository in charter's namespace writes with charter's own identity
// (rbac.go says what that may write); any other writes as its
// ServiceAccount, impersonated, or, without one, only namespaced objects
// of its own namespace (Tenancy).
type PolicyRepositoryReconciler struct {
	client.Client
	Scheme *runtime.Scheme
	// Config is the client's configuration, from which clients that
	// impersonate a repository's ServiceAccount are made.
	Config *rest.Config
	// Cluster answers the pre-apply check's questions to the cluster (the
	// kinds policies name: policycheck.InCluster), as policy admission
	// asks them; nil leaves them to policy admission.
	Cluster policycheck.Cluster
	// Tenancy decides who each repository writes as.
	Tenancy  Tenancy
	Recorder events.EventRecorder
	// Cache holds the checkouts.
	Cache *source.Cache
	// Secrets reads credential and key Secrets; the Client when nil. Setup
	// gives it the manager's uncached reader: a sync reads one or two
	// Secrets, which does not justify holding every Secret of the cluster
	// in an informer.
	Secrets client.Reader
	// Installed reads the installed policies a revision updates, for the
	// update check of their generate rules (check.Updates); the Client when
	// nil. Setup gives it the manager's uncached reader, as for Secrets.
	Installed client.Reader
	// Tests runs the suites of repositories with spec.test; without it such
	// a repository applies nothing (see testRevision).
	Tests TestRunner
	// MinInterval is the shortest interval and retry interval a
	// repository syncs at, whatever its spec asks (serve
	// --gitsync-min-interval); no floor when zero.
	MinInterval time.Duration
	// Egress guards the registries of oci:// repositories and the
	// transparency logs their signatures are checked in (serve's
	// registry guard, --egress-allow); egress's defaults when nil.
	Egress *egress.Guard
	// RegistryTransport, when set, carries oci:// repositories' registry
	// requests instead of Egress's transport: the caller answers for
	// what it reaches (tests and the benchmark count bytes with it).
	RegistryTransport http.RoundTripper
	// PublicTrust is where keyless verification reads Sigstore's Fulcio
	// roots and Rekor and CT log keys (serve --sigstore-tuf-mirror and
	// --sigstore-tuf-root); Sigstore's public TUF repository, through
	// Egress, when nil.
	PublicTrust imageverify.PublicTrust
	// Signatures verifies OCI artifacts' cosign signatures;
	// NewSignatureVerifier(Secrets, Egress, PublicTrust) when nil.
	Signatures *imageverify.Verifier

	verifierOnce, transportOnce sync.Once
}

func (r *PolicyRepositoryReconciler) installed() client.Reader {
	if r.Installed != nil {
		return r.Installed
	}
	return r.Client
}

func (r *PolicyRepositoryReconciler) secrets() client.Reader {
	if r.Secrets != nil {
		return r.Secrets
	}
	return r.Client
}

// Reconcile syncs one PolicyRepository.
func (r *PolicyRepositoryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	obj := &gitopsv1alpha1.PolicyRepository{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Deleting a PolicyRepository leaves what it applied in place: policies
	// are cluster guard rails, and losing them because a custom resource
	// went away would be the surprise to avoid.
	if !obj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if obj.Spec.Suspend {
		logger.V(1).Info("suspended; nothing fetched or applied")
		// observedGeneration reaching the generation that suspended it
		// says the suspension was seen: no sync starts after it (kstatus'
		// signal that a controller has read a spec).
		if obj.Status.ObservedGeneration != obj.Generation {
			base := obj.DeepCopy()
			obj.Status.ObservedGeneration = obj.Generation
			return ctrl.Result{}, r.patchStatus(ctx, base, obj)
		}
		return ctrl.Result{}, nil
	}

	base := obj.DeepCopy()
	start := time.Now()
	result := r.sync(ctx, obj)
	obj.Status.ObservedGeneration = obj.Generation
	if v := requestedAt(obj); v != "" {
		obj.Status.LastHandledReconcileAt = v
	}
	if err := r.patchStatus(ctx, base, obj); err != nil {
		return ctrl.Result{}, err
	}
	logger.V(1).Info("reconciled", "revision", obj.Status.LastAttemptedRevision, "took", time.Since(start).String(), "requeueAfter", result.RequeueAfter.String())
	return result, nil
}

func (r *PolicyRepositoryReconciler) patchStatus(ctx context.Context, base, obj *gitopsv1alpha1.PolicyRepository) error {
	if equality.Semantic.DeepEqual(base.Status, obj.Status) {
		return nil
	}
	return client.IgnoreNotFound(r.Status().Patch(ctx, obj, client.MergeFrom(base)))
}

// sync runs one attempt and records its outcome in obj's status. It never
// deletes anything unless a revision was fetched, checked and applied.
func (r *PolicyRepositoryReconciler) sync(parent context.Context, obj *gitopsv1alpha1.PolicyRepository) ctrl.Result {
	ctx, cancel := context.WithTimeout(parent, obj.Spec.GetTimeout())
	defer cancel()
	every, clamped := r.intervals(obj)
	interval, retry := ctrl.Result{RequeueAfter: every.interval}, ctrl.Result{RequeueAfter: every.retry}
	// A new spec or an explicit request re-runs even a revision known bad.
	forced := obj.Generation != obj.Status.ObservedGeneration || requestedAt(obj) != obj.Status.LastHandledReconcileAt
	// The outcome of the previous attempt, before this one marks progress.
	var before metav1.Condition
	if c := apimeta.FindStatusCondition(obj.Status.Conditions, gitopsv1alpha1.ConditionReady); c != nil {
		before = *c
	}

	if err := r.Tenancy.checkURL(obj); err != nil {
		r.fail(obj, before, true, gitopsv1alpha1.ReasonNotPermitted, err)
		return retry
	}
	// Who the revision writes as: an oci:// repository also reads its
	// registry with that ServiceAccount's imagePullSecrets.
	w := r.Tenancy.writerOf(obj)
	src, err := r.sourceOf(ctx, obj, w)
	if err != nil {
		var serr *specError
		r.fail(obj, before, errors.As(err, &serr), fetchReasonOf(obj), err)
		return retry
	}
	revision, err := src.resolve(ctx)
	if err != nil {
		r.fail(obj, before, false, src.fetchFailed(), err)
		return retry
	}
	if revision == obj.Status.LastAttemptedRevision && stalledOnContent(obj) && !forced {
		// The commit itself is broken and commits do not change: trying it
		// again cannot help. Poll at the retry interval, not the interval,
		// so a newer revision (the fix) preempts the broken one as soon as
		// it is pushed.
		return retry
	}
	if revision != obj.Status.LastAttemptedRevision {
		r.event(obj, corev1.EventTypeNormal, EventNewRevision, "Fetch", "new revision %s", revision)
	}
	obj.Status.LastAttemptedRevision = revision
	markProgressing(obj, "syncing revision "+revision)

	dir, err := src.fetch(ctx)
	if err != nil {
		// A commit over the limits stays over them, an artifact charter
		// does not extract stays so under its digest.
		terminal, reason, err := fetchError(src, revision, err)
		r.fail(obj, before, terminal, reason, err)
		return retry
	}
	if err := r.verify(ctx, obj, src, dir); err != nil {
		// A commit or artifact with a bad signature stays bad; a missing
		// secret may appear, an unreachable registry answer.
		// Both are rechecked at the retry interval: verifying a cached
		// checkout is cheap, and adding the signer's key to the Secret
		// must be enough to recover.
		r.fail(obj, before, isVerificationVerdict(err), gitopsv1alpha1.ReasonVerificationFailed, err)
		return retry
	}

	objs, err := build.Build(ctx, dir, obj.Spec.Path)
	if err != nil {
		r.fail(obj, before, true, gitopsv1alpha1.ReasonBuildFailed, fmt.Errorf("revision %s: %w", revision, err))
		return retry
	}
	if len(objs) == 0 && inventory.Len(obj.Status.Inventory) > 0 {
		r.fail(obj, before, true, gitopsv1alpha1.ReasonBuildFailed, fmt.Errorf(
			"revision %s renders no objects from %q; refusing to prune all %d objects of %s",
			revision, obj.Spec.Path, inventory.Len(obj.Status.Inventory), obj.Status.LastAppliedRevision))
		return retry
	}
	var warnings []check.Fault
	// Where the revision may write is checked first: what lies outside
	// is refused before the cluster is asked anything about it.
	if w.ownNamespaceOnly {
		if err := checkOwnNamespace(r.RESTMapper(), obj.Namespace, w.why, objs, nil); err != nil {
			r.fail(obj, before, true, gitopsv1alpha1.ReasonNotPermitted, fmt.Errorf("revision %s: %w", revision, err))
			return retry
		}
	}
	checks := []check.Option{check.AllowNamespacedCalls(r.Tenancy.AllowNamespacedCalls), check.Warnings(&warnings), check.Cluster(r.Cluster)}
	if obj.Namespace != r.Tenancy.Namespace && w.serviceAccount != "" {
		// A tenant's repository is told what the cluster answers only of
		// what its ServiceAccount may write (writableBy).
		checks = append(checks, check.AskAbout(r.writableBy(ctx, obj.Namespace, w.serviceAccount)))
	}
	if err := check.Objects(objs, r.Scheme, checks...); err != nil {
		r.fail(obj, before, true, gitopsv1alpha1.ReasonValidationFailed, fmt.Errorf("revision %s: %w", revision, err))
		return retry
	}
	if err := check.Updates(ctx, objs, r.Scheme, r.installed(), checks...); err != nil {
		// An update policy admission would refuse stalls the revision; a
		// failed read is retried.
		var invalid *check.Error
		r.fail(obj, before, errors.As(err, &invalid), gitopsv1alpha1.ReasonValidationFailed, fmt.Errorf("revision %s: %w", revision, err))
		return retry
	}
	if obj.Spec.Test {
		if err := r.testRevision(ctx, dir, obj.Spec.Path); err != nil {
			r.fail(obj, before, true, gitopsv1alpha1.ReasonTestFailed, fmt.Errorf("revision %s: %w", revision, err))
			return retry
		}
	}

	// Where the revision may prune: checked in full, and dry-run as its
	// identity, before anything is written.
	applied := make([]*unstructured.Unstructured, len(objs))
	for i := range objs {
		applied[i] = objs[i].Unstructured
	}
	current := inventory.New(applied)
	var stale []gitopsv1alpha1.ResourceRef
	if obj.Spec.IsPrune() {
		stale = inventory.Stale(obj.Status.Inventory, current)
	}
	if w.ownNamespaceOnly {
		if err := checkOwnNamespace(r.RESTMapper(), obj.Namespace, w.why, nil, stale); err != nil {
			r.fail(obj, before, true, gitopsv1alpha1.ReasonNotPermitted, fmt.Errorf("revision %s: %w", revision, err))
			return retry
		}
	}
	cl, who := client.Client(r.Client), "charter"
	if w.serviceAccount != "" {
		who = "ServiceAccount " + obj.Namespace + "/" + w.serviceAccount
		if cl, err = impersonating(r.Config, r.Client, obj.Namespace, w.serviceAccount); err != nil {
			r.fail(obj, before, false, gitopsv1alpha1.ReasonApplyFailed, fmt.Errorf("impersonating %s: %w", who, err))
			return retry
		}
	}
	applier := &apply.Applier{Client: cl, Owner: client.ObjectKeyFromObject(obj), Force: obj.Spec.Force, Inventory: obj.Status.Inventory}
	if err := applier.CheckPrune(ctx, stale); err != nil {
		r.applyFailed(obj, before, revision, who, err)
		return retry
	}
	changes, err := applier.Apply(ctx, objs)
	if err != nil {
		r.applyFailed(obj, before, revision, who, err)
		return retry
	}

	if obj.Spec.IsPrune() {
		pruned, err := applier.Prune(ctx, stale)
		if d := deleted(pruned); len(d) > 0 {
			r.event(obj, corev1.EventTypeNormal, EventPruned, "Prune", "pruned %s", strings.Join(d, ", "))
		}
		if err != nil {
			// Keep the stale entries so the next attempt prunes them.
			current.Entries = append(current.Entries, stale...)
			obj.Status.Inventory = inventory.Dedup(current)
			r.fail(obj, before, false, gitopsv1alpha1.ReasonPruneFailed, fmt.Errorf("revision %s applied, prune failed: %w", revision, err))
			return retry
		}
		changes = append(changes, pruned...)
	}

	obj.Status.Inventory = current
	if obj.Status.LastAppliedRevision != revision || changes.Changed() {
		r.event(obj, corev1.EventTypeNormal, EventApplied, "Apply", "applied revision %s: %s", revision, changes.Summary())
	}
	if obj.Status.LastAppliedRevision != revision {
		// As kubectl apply shows the policy webhook's warnings: once,
		// when the revision is applied, not at every resync.
		// The recorder merges events of one reason, action and related
		// object into a series that keeps the first note: each policy's
		// warnings are one event, related to the policy.
		if r.Recorder != nil {
			for _, pw := range warningsByPolicy(warnings) {
				r.Recorder.Eventf(obj, pw.ref, corev1.EventTypeWarning, EventPolicyWarning, "Check", "revision %s: %s", revision, pw.note)
			}
		}
	}
	obj.Status.LastAppliedRevision = revision
	if c := obj.Status.Conversion; c == nil || c.Revision != revision {
		obj.Status.Conversion = conversionOf(objs, revision)
	}
	markReady(obj, fmt.Sprintf("applied revision %s (%d objects)%s%s", revision, len(objs), clamped, warnedAbout(warnings)))
	return interval
}

// maxReadyWarnings is how many policy warnings the Ready message quotes;
// the events hold them all.
const maxReadyWarnings = 3

// warnedAbout is the Ready message's note of a revision's policy warnings.
func warnedAbout(warnings []check.Fault) string {
	if len(warnings) == 0 {
		return ""
	}
	quoted := make([]string, 0, maxReadyWarnings)
	for _, w := range warnings[:min(len(warnings), maxReadyWarnings)] {
		quoted = append(quoted, w.String())
	}
	more := ""
	if n := len(warnings) - len(quoted); n > 0 {
		more = fmt.Sprintf("; and %d more", n)
	}
	return fmt.Sprintf("; %d policy warnings (events %s): %s%s", len(warnings), EventPolicyWarning, strings.Join(quoted, "; "), more)
}

// policyWarnings are the warnings of one policy of a revision.
type policyWarnings struct {
	ref  *corev1.ObjectReference
	note string
}

// warningsByPolicy groups warnings by the policy they are about, in the
// order the policies first appear: "file: Kind "name": w1; w2".
func warningsByPolicy(warnings []check.Fault) []policyWarnings {
	var out []policyWarnings
	at := map[corev1.ObjectReference]int{}
	for _, w := range warnings {
		var key corev1.ObjectReference
		if w.Ref != nil {
			key = *w.Ref
		}
		i, seen := at[key]
		if !seen {
			i = len(out)
			at[key] = i
			out = append(out, policyWarnings{ref: w.Ref, note: w.String()})
			continue
		}
		out[i].note += "; " + w.Message
	}
	return out
}

// syncIntervals are how often a repository syncs.
type syncIntervals struct{ interval, retry time.Duration }

// intervals returns obj's interval and retry interval, raised to
// MinInterval, and, when one was raised, the note that says so in the
// Ready message.
func (r *PolicyRepositoryReconciler) intervals(obj *gitopsv1alpha1.PolicyRepository) (syncIntervals, string) {
	every := syncIntervals{interval: obj.Spec.GetInterval(), retry: obj.Spec.GetRetryInterval()}
	var raised []string
	if every.interval < r.MinInterval {
		raised = append(raised, fmt.Sprintf("spec.interval %s", every.interval))
		every.interval = r.MinInterval
	}
	if every.retry < r.MinInterval {
		if obj.Spec.RetryInterval != nil {
			raised = append(raised, fmt.Sprintf("spec.retryInterval %s", every.retry))
		}
		every.retry = r.MinInterval
	}
	if len(raised) == 0 {
		return every, ""
	}
	return every, fmt.Sprintf("; %s is below charter's minimum interval %s (serve --gitsync-min-interval): syncing every %s", strings.Join(raised, " and "), r.MinInterval, r.MinInterval)
}

// applyFailed records a revision the API server refused. A refusal in the
// dry-run wrote nothing: an object that would take over what another
// field manager holds, an invalid object or a write the identity may
// not make (RBAC) stalls, naming the file, the object and the server's
// words (verb, resource, namespace); it is tried again at the retry
// interval, since granting the ServiceAccount more is a fix that changes
// neither the commit nor the spec. Anything else retries.
func (r *PolicyRepositoryReconciler) applyFailed(obj *gitopsv1alpha1.PolicyRepository, before metav1.Condition, revision, who string, err error) {
	var aerr *apply.Error
	switch {
	case errors.As(err, &aerr) && aerr.DryRun && aerr.Conflict():
		r.fail(obj, before, true, gitopsv1alpha1.ReasonConflict, fmt.Errorf("revision %s, applied as field manager %s: %w", revision, apply.FieldManagerOf(client.ObjectKeyFromObject(obj)), err))
	case errors.As(err, &aerr) && aerr.DryRun && aerr.Forbidden():
		r.fail(obj, before, true, gitopsv1alpha1.ReasonForbidden, fmt.Errorf("revision %s, applied as %s: %w", revision, who, err))
	case errors.As(err, &aerr) && aerr.DryRun && aerr.Invalid():
		r.fail(obj, before, true, gitopsv1alpha1.ReasonValidationFailed, fmt.Errorf("revision %s: %w", revision, err))
	default:
		r.fail(obj, before, false, gitopsv1alpha1.ReasonApplyFailed, fmt.Errorf("revision %s: %w", revision, err))
	}
}

// fail records a failed attempt. Terminal failures (the revision itself is
// wrong) stall; others retry. What is applied stays as it is.
// before is the Ready condition the previous attempt left.
func (r *PolicyRepositoryReconciler) fail(obj *gitopsv1alpha1.PolicyRepository, before metav1.Condition, terminal bool, reason string, err error) {
	msg := err.Error()
	// One event per distinct failure: a revision retried every few
	// seconds must not flood the namespace with copies of the same one.
	if before.Status != metav1.ConditionFalse || before.Reason != reason || before.Message != msg {
		r.event(obj, corev1.EventTypeWarning, EventFailed, reason, "%s", msg)
	}
	if terminal {
		markStalled(obj, reason, msg)
	} else {
		markRetrying(obj, reason, msg)
	}
}

func (r *PolicyRepositoryReconciler) event(obj *gitopsv1alpha1.PolicyRepository, typ, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, typ, reason, action, note, args...)
	}
}

// auth reads the credentials Secret.
func (r *PolicyRepositoryReconciler) auth(ctx context.Context, obj *gitopsv1alpha1.PolicyRepository) (*source.Auth, error) {
	var data map[string][]byte
	if ref := obj.Spec.SecretRef; ref != nil {
		var secret corev1.Secret
		if err := r.secrets().Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: ref.Name}, &secret); err != nil {
			return nil, fmt.Errorf("credentials secret %s/%s: %w", obj.Namespace, ref.Name, err)
		}
		data = secret.Data
	}
	auth, err := source.NewAuth(obj.Spec.URL, data)
	if err != nil {
		return nil, fmt.Errorf("repository %s: %w", source.SanitizeURL(obj.Spec.URL), err)
	}
	return auth, nil
}

// verify checks the signature of the fetched revision when spec.verify
// asks for it, and records SourceVerified.
func (r *PolicyRepositoryReconciler) verify(ctx context.Context, obj *gitopsv1alpha1.PolicyRepository, src revisionSource, dir string) error {
	if obj.Spec.Verify == nil {
		removeCondition(obj, gitopsv1alpha1.ConditionSourceVerified)
		return nil
	}
	msg, err := src.verify(ctx, dir)
	if err != nil {
		setCondition(obj, gitopsv1alpha1.ConditionSourceVerified, "False", gitopsv1alpha1.ReasonVerificationFailed, err.Error())
		return err
	}
	setCondition(obj, gitopsv1alpha1.ConditionSourceVerified, "True", gitopsv1alpha1.ReasonSucceeded, msg)
	return nil
}

func deleted(cs apply.ChangeSet) []string {
	var out []string
	for _, c := range cs {
		if c.Action == apply.Deleted {
			out = append(out, c.Object)
		}
	}
	return out
}
