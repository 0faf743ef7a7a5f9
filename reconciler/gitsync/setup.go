package gitsync

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/egress"
	"github.com/charter-dev/charter/internal/leadership"
	"github.com/charter-dev/charter/reconciler/gitsync/source"
)

// ControllerName names the controller, its events and its logs.
const ControllerName = "charter-gitsync"

// Options configure Setup.
type Options struct {
	// CacheDir holds the checkouts. When empty, a new folder
	// (<temp>/charter-gitsync-*) that Setup's caller never learns and
	// nothing removes: charter serve passes one it removes on exit. A
	// folder shared by processes or users would let one remove the
	// checkout another applies, or be refused to the other user.
	CacheDir string
	// MaxConcurrentReconciles is how many repositories sync at once; 2
	// when zero.
	MaxConcurrentReconciles int
	// ReceiverAddr, when set (e.g. ":9292"), serves the push receiver at
	// /hooks/<namespace>/<name> on this address, on every replica.
	ReceiverAddr string
	// Tenancy decides who each repository writes as; its Namespace
	// (charter's) is required.
	Tenancy Tenancy
	// Tests runs the suites of repositories with spec.test.
	Tests TestRunner
	// Limits bound each checkout (size, files).
	Limits source.Limits
	// MinInterval is the shortest interval a repository syncs at.
	MinInterval time.Duration
	// Egress guards the registries of oci:// repositories (and the
	// transparency logs of their keyless signatures); egress's defaults
	// when nil. charter serve passes its registry guard.
	Egress *egress.Guard
	// PublicTrust is the Sigstore trust keyless artifact signatures are
	// checked against (serve's --sigstore-tuf-mirror/--sigstore-tuf-root);
	// Sigstore's public TUF repository when nil.
	PublicTrust imageverify.PublicTrust
	// BackgroundWriter is who carries out ClusterPolicies' generate and
	// mutate-existing rules: the pre-apply check refuses a revision whose
	// ClusterPolicy names a target it may not write, as policy admission
	// does (policycheck.WriteFaults). nil leaves that check to admission.
	// charter serve passes admission's (serve.go backgroundWriter).
	BackgroundWriter *policycheck.Writer
	// AdmissionReader is the identity serving policy admission: the
	// pre-apply check refuses a revision whose policy has a synchronized
	// generate rule naming a kind it may not list and get, as policy
	// admission does (policycheck.SyncReadFaults). nil leaves that check
	// to admission.
	AdmissionReader *policycheck.Writer
	// CleanupDeleter is who carries out ClusterCleanupPolicies: the
	// pre-apply check refuses one matching a kind it may not delete or
	// list, as policy admission does (policycheck.DeleteFaults).
	CleanupDeleter *policycheck.Writer
	// ReportsReader is who reads what validate and mutate rules match for
	// reports: the pre-apply check warns of a kind it may not read, as
	// policy admission does (policycheck.ReadWarnings).
	ReportsReader *policycheck.Writer
}

// Defaults of charter serve's gitsync limits, near Flux's
// source-controller: a policy repository is small, and a tenant's must not
// fill charter's disk or make it poll a remote as fast as it can.
const (
	DefaultMaxRepositorySize = 50 << 20
	DefaultMaxFiles          = 10000
	DefaultMinInterval       = 10 * time.Second
)

// Setup registers the PolicyRepository reconciler with mgr and, when
// opts.ReceiverAddr is set, the push receiver. The reconciler runs only on
// the elected leader when mgr has leader election on.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.Tenancy.Namespace == "" {
		return errors.New("gitsync: charter's namespace (Tenancy.Namespace) is required: its repositories are the only ones that write as charter")
	}
	if opts.CacheDir == "" {
		dir, err := os.MkdirTemp("", "charter-gitsync-")
		if err != nil {
			return fmt.Errorf("gitsync cache: %w", err)
		}
		opts.CacheDir = dir
	}
	if err := os.MkdirAll(opts.CacheDir, 0o700); err != nil {
		return fmt.Errorf("gitsync cache: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("gitsync: discovery client: %w", err)
	}
	// The pre-apply check asks the cluster what policy admission asks it
	// (webhook/admission's policyCluster): the kinds rules name, whether
	// the background controller may write ClusterPolicies' targets and the
	// cleanup controller delete what ClusterCleanupPolicies match, whether
	// the reports controller may read what rules match, which
	// GlobalContextEntries are Ready (their status: this process may not
	// load them) and whether validate.cel expressions type-check.
	cluster := policycheck.NewDiscoveryCluster(dc).WithBackgroundWriter(opts.BackgroundWriter).WithAdmissionReader(opts.AdmissionReader).WithCleanupDeleter(opts.CleanupDeleter).
		WithReportsReader(opts.ReportsReader).WithCELTypeChecks().
		WithGlobalContext(policycheck.GlobalContextStatus{Reader: mgr.GetAPIReader()})
	r := &PolicyRepositoryReconciler{
		Cluster:   cluster,
		Client:    mgr.GetClient(),
		Scheme:    mgr.GetScheme(),
		Config:    mgr.GetConfig(),
		Tenancy:   opts.Tenancy,
		Recorder:  mgr.GetEventRecorder(ControllerName),
		Cache:     &source.Cache{Dir: opts.CacheDir, Limits: opts.Limits},
		Secrets:   mgr.GetAPIReader(),
		Installed: mgr.GetAPIReader(),
		Tests:     opts.Tests,

		MinInterval: opts.MinInterval,
		Egress:      opts.Egress,
		PublicTrust: opts.PublicTrust,
	}
	if err := r.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if opts.ReceiverAddr != "" {
		if err := mgr.Add(&receiverServer{addr: opts.ReceiverAddr, handler: &Receiver{Client: mgr.GetClient(), Secrets: mgr.GetAPIReader()}}); err != nil {
			return err
		}
	}
	return nil
}

// SetupWithManager registers the reconciler. A reconcile runs on a spec
// change or a sync request; status-only updates do not trigger one.
func (r *PolicyRepositoryReconciler) SetupWithManager(mgr ctrl.Manager, opts Options) error {
	workers := opts.MaxConcurrentReconciles
	if workers <= 0 {
		workers = 2
	}
	// Built anew at each term of leadership: a controller starts once
	// only, and charter serve campaigns again after a lost Lease.
	controllers, err := leadership.PerTerm(mgr, func(m ctrl.Manager) error {
		return ctrl.NewControllerManagedBy(m).
			Named(ControllerName).
			For(&gitopsv1alpha1.PolicyRepository{}, builder.WithPredicates(
				predicate.Or(predicate.GenerationChangedPredicate{}, syncRequested{}),
			)).
			WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
			Complete(r)
	})
	if err != nil {
		return err
	}
	return mgr.Add(controllers)
}

// receiverServer serves the receiver for as long as the manager runs.
type receiverServer struct {
	addr    string
	handler http.Handler
}

// NeedLeaderElection is false: every replica accepts pushes; they only
// annotate the PolicyRepository, which the leader then syncs.
func (s *receiverServer) NeedLeaderElection() bool { return false }

func (s *receiverServer) Start(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.Handle(HookPathPrefix, s.handler)
	srv := &http.Server{Addr: s.addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

var _ manager.LeaderElectionRunnable = (*receiverServer)(nil)
