// Package leadership runs a process's leader-only work under Leases that
// are campaigned for again when lost, so that losing one (a renewal that
// missed its deadline under load, an API server restarted) pauses that
// work only, never the process: admission, which every replica serves,
// goes on answering.
package leadership

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaseOptions name a controller's Lease and time its election. Zero
// durations default from RetryPeriod (2s): LeaseDuration 6×RetryPeriod
// and RenewDeadline 5×RetryPeriod, as charter serve's manager has them.
type LeaseOptions struct {
	// Enabled false runs the work at once, without a Lease
	// (--leader-elect=false).
	Enabled                                   bool
	Namespace                                 string
	Name                                      string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Log                                       logr.Logger
}

// Lease runs work while this process holds a Lease of the controller's
// own, beside the manager's: each leader-only controller (cleanup,
// background) holds its own Lease, as Kyverno's controllers do, so the
// replica that leads cleanup need not be the one that leads reports, and
// one controller's lost lease never stops another. Work's context ends
// when the lease is lost, and the process campaigns again once work has
// returned. It is a manager.Runnable that does not need the manager's own
// election.
type Lease struct {
	cfg  *rest.Config
	o    LeaseOptions
	work func(ctx context.Context) error
}

// NewLease returns a Lease for work.
func NewLease(cfg *rest.Config, o LeaseOptions, work func(ctx context.Context) error) *Lease {
	if o.RetryPeriod <= 0 {
		o.RetryPeriod = 2 * time.Second
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 6 * o.RetryPeriod
	}
	if o.RenewDeadline <= 0 {
		o.RenewDeadline = 5 * o.RetryPeriod
	}
	return &Lease{cfg: cfg, o: o, work: work}
}

// NeedLeaderElection is false: the Lease elects on its own.
func (r *Lease) NeedLeaderElection() bool { return false }

// Start campaigns for the Lease until ctx ends, and runs the work while
// it holds it (at once, without a Lease, when not Enabled).
func (r *Lease) Start(ctx context.Context) error {
	if !r.o.Enabled {
		return r.work(ctx)
	}
	cs, err := kubernetes.NewForConfig(leaseConfig(r.cfg))
	if err != nil {
		return fmt.Errorf("leader election %s: %w", r.o.Name, err)
	}
	host, _ := os.Hostname()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, r.o.Namespace, r.o.Name, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		return fmt.Errorf("leader election %s: %w", r.o.Name, err)
	}
	for ctx.Err() == nil {
		// OnStartedLeading runs in a goroutine of the elector's; it only
		// hands the leading context over, and the work runs here, so a
		// round of work has returned before the next campaign starts.
		leading := make(chan context.Context, 1)
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   r.o.LeaseDuration,
			RenewDeadline:   r.o.RenewDeadline,
			RetryPeriod:     r.o.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            r.o.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(c context.Context) { leading <- c },
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election %s: %w", r.o.Name, err)
		}
		elected := make(chan struct{})
		runCtx, stopRun := context.WithCancel(ctx)
		go func() {
			// Run returns when the lease is lost or runCtx ends, and
			// cancels the leading context then.
			le.Run(runCtx)
			close(elected)
		}()
		select {
		case c := <-leading:
			r.o.Log.Info("leading", "lease", r.o.Namespace+"/"+r.o.Name)
			err := r.work(c)
			// Work that returned on its own gives the lease up.
			stopRun()
			<-elected
			r.o.Log.Info("stopped leading", "lease", r.o.Namespace+"/"+r.o.Name)
			if err != nil && ctx.Err() == nil && c.Err() == nil {
				return err
			}
		case <-elected:
		}
		stopRun()
	}
	return nil
}

// leaseConfig is the configuration of a Lease's client: the process's,
// with a connection and a rate limit of its own. client-go shares one
// transport, so one HTTP/2 connection, among the clients of a process
// whose TLS settings are equal, unless a client dials for itself; under
// load (admission writing UpdateRequests and reports, scans listing) a
// renewal would wait behind the process's other requests and miss its
// deadline. A renewal is one request a retry period.
func leaseConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	c.RateLimiter, c.QPS, c.Burst = nil, 5, 10
	return c
}
