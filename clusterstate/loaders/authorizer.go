package loaders

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	authorizationcel "k8s.io/apiserver/pkg/authorization/cel"
	"k8s.io/apiserver/plugin/pkg/authorizer/webhook"
	webhookmetrics "k8s.io/apiserver/plugin/pkg/authorizer/webhook/metrics"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// AuthorizerOptions tune the SubjectAccessReview authorizer.
type AuthorizerOptions struct {
	// AllowTTL and DenyTTL are how long an allowed and a denied answer
	// are cached: a grant or a revocation takes up to that long to show.
	AllowTTL, DenyTTL time.Duration
	// Backoff retries a SubjectAccessReview that failed with a server
	// error or timeout; the request's own deadline bounds it too.
	Backoff wait.Backoff
}

// DefaultAuthorizerOptions are kube's delegating authorizer's TTLs, with
// fewer and shorter retries: a check runs inside an admission request.
var DefaultAuthorizerOptions = AuthorizerOptions{
	AllowTTL: 10 * time.Second,
	DenyTTL:  10 * time.Second,
	Backoff:  wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 3},
}

// NewAuthorizer returns the authorizer of the CEL `authorizer` variable:
// each check is a SubjectAccessReview (authorization.k8s.io/v1) for the
// user the check names, through k8s.io/apiserver's webhook authorizer,
// the one kube's delegating authorization uses: its LRU cache keeps
// allowed and denied answers apart, for AllowTTL and DenyTTL. A review
// that fails answers deny with the error, so the check's errored() is
// true and allowed() false: never an allow.
//
// The reviews are counted and timed in
// charter_cel_authorizer_requests_total and
// charter_cel_authorizer_request_duration_seconds, by HTTP status code
// ("<error>" when there was no answer); cached answers are not.
func NewAuthorizer(client authorizationv1client.AuthorizationV1Interface, o AuthorizerOptions) (authorizer.UnconditionalAuthorizer, error) {
	m, err := authorizerMetrics()
	if err != nil {
		return nil, err
	}
	// No matchConditions: nil is the CEL compiler they would need.
	var noMatchConditions authorizationcel.Compiler
	a, err := webhook.NewFromInterface(client, o.AllowTTL, o.DenyTTL, o.Backoff, authorizer.DecisionDeny, m, noMatchConditions)
	if err != nil {
		return nil, fmt.Errorf("CEL authorizer: %w", err)
	}
	return a, nil
}

// sarMetrics records the webhook authorizer's requests; its webhook and
// match-condition metrics do not apply (one authorizer, no conditions).
type sarMetrics struct {
	webhookmetrics.NoopWebhookMetrics
	authorizationcel.NoopMatcherMetrics
	total   *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

func (m sarMetrics) RecordRequestTotal(_ context.Context, code string) {
	m.total.WithLabelValues(code).Inc()
}

func (m sarMetrics) RecordRequestLatency(_ context.Context, code string, latency float64) {
	m.latency.WithLabelValues(code).Observe(latency)
}

// authorizerMetrics are the process's, registered once with
// controller-runtime's registry however many authorizers it builds.
var authorizerMetrics = sync.OnceValues(func() (webhookmetrics.AuthorizerMetrics, error) {
	m := sarMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "charter_cel_authorizer_requests_total",
			Help: "SubjectAccessReviews made for the CEL authorizer of policies, by HTTP status code."}, []string{"code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "charter_cel_authorizer_request_duration_seconds",
			Help:    "Latency of the SubjectAccessReviews made for the CEL authorizer of policies, by HTTP status code.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}}, []string{"code"}),
	}
	for _, c := range []prometheus.Collector{m.total, m.latency} {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return nil, fmt.Errorf("CEL authorizer metrics: %w", err)
			}
		}
	}
	return m, nil
})
