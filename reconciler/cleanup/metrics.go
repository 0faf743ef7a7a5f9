package cleanup

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// metrics are Kyverno's cleanup and TTL series (background-cleanup.md
// §6.4, §7.5), registered once per process with controller-runtime's
// registry, which charter serve exposes. Unlike Kyverno, the TTL deleted
// counter counts deletions, not objects scheduled for deletion.
type metrics struct {
	deleted    *prometheus.CounterVec
	errors     *prometheus.CounterVec
	ttlDeleted *prometheus.CounterVec
	ttlErrors  *prometheus.CounterVec
	ttlInfo    *prometheus.GaugeVec
	// ttlTracked is charter's own: the labelled objects the TTL
	// controller holds a deadline for.
	ttlTracked prometheus.Gauge
	// reconciles, requeues and drops are Kyverno's per-controller
	// counters (controller_name "cleanup-controller", or the watched
	// type "[<group>/]<version>/<resource>" for the TTL controller).
	// charter never drops a key: the drop counter stays at zero.
	reconciles *prometheus.CounterVec
	requeues   *prometheus.CounterVec
	drops      *prometheus.CounterVec
}

// policyControllerName is the controller_name of the cleanup policy
// controller, as Kyverno names it.
const policyControllerName = "cleanup-controller"

// Metric names others read (make bench-cleanup).
const (
	TTLTrackedMetric = "charter_cleanup_ttl_tracked_objects"
	TTLDeletedMetric = "kyverno_ttl_controller_deletedobjects_total"
)

var policyLabels = []string{"policy_type", "policy_namespace", "policy_name", "resource_kind", "resource_namespace", "deletion_propagation"}
var ttlLabels = []string{"resource_namespace", "resource_group", "resource_version", "resource_resource"}

var processMetrics = sync.OnceValues(func() (*metrics, error) {
	m := &metrics{
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kyverno_cleanup_controller_deletedobjects_total",
			Help: "Objects deleted by cleanup policies."}, policyLabels),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kyverno_cleanup_controller_errors_total",
			Help: "Failed lists and deletes of cleanup policies."}, policyLabels),
		ttlDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: TTLDeletedMetric,
			Help: "Objects deleted because their cleanup.kyverno.io/ttl expired."}, ttlLabels),
		ttlErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kyverno_ttl_controller_errors_total",
			Help: "Failed deletes of expired TTL objects."}, ttlLabels),
		ttlInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kyverno_ttl_controller_info",
			Help: "1 for each resource type watched for cleanup.kyverno.io/ttl."}, []string{"resource_group", "resource_version", "resource_resource"}),
		ttlTracked: prometheus.NewGauge(prometheus.GaugeOpts{Name: TTLTrackedMetric,
			Help: "Objects labelled cleanup.kyverno.io/ttl that the TTL controller tracks."}),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kyverno_controller_reconcile_total",
			Help: "Keys a controller reconciled."}, []string{"controller_name"}),
		requeues: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kyverno_controller_requeue_total",
			Help: "Keys a controller requeued after an error."}, []string{"controller_name", "num_requeues"}),
		drops: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kyverno_controller_drop_total",
			Help: "Keys a controller gave up on (charter never does)."}, []string{"controller_name"}),
	}
	for _, c := range []prometheus.Collector{m.deleted, m.errors, m.ttlDeleted, m.ttlErrors, m.ttlInfo, m.ttlTracked, m.reconciles, m.requeues, m.drops} {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return nil, err
			}
		}
	}
	m.drops.WithLabelValues(policyControllerName)
	return m, nil
})

// ttlControllerName is the controller_name of the TTL controller of a
// type, as Kyverno names it: "[<group>/]<version>/<resource>".
func ttlControllerName(t apiType) string {
	if t.GVR.Group == "" {
		return t.GVR.Version + "/" + t.GVR.Resource
	}
	return t.GVR.Group + "/" + t.GVR.Version + "/" + t.GVR.Resource
}
