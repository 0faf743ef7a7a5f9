package metrics

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/charter-dev/charter/engine"
)

// seriesCache maps label values, as a comparable key, to the children of
// the vectors they select. It holds no more entries than the vectors hold
// series, so it grows no further than the exposition does.
type seriesCache[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

func (c *seriesCache[K, V]) load(k K) (V, bool) {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	return v, ok
}

// store keeps v for k unless another caller got there first, and returns
// the one kept, so every caller shares the same children.
func (c *seriesCache[K, V]) store(k K, v V) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok {
		return old
	}
	if c.m == nil {
		c.m = map[K]V{}
	}
	c.m[k] = v
	return v
}

// requestKey selects the series of kyverno_admission_requests_total and
// kyverno_admission_review_duration_seconds.
type requestKey struct {
	req     Request
	allowed bool
}

type requestSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

func (r *Recorder) requestSeriesFor(k requestKey) *requestSeries {
	if s, ok := r.requestSeries.load(k); ok {
		return s
	}
	values := []string{k.req.Kind, k.req.Namespace, strings.ToLower(k.req.Operation), strconv.FormatBool(k.allowed), k.req.Webhook}
	return r.requestSeries.store(k, &requestSeries{
		requests: r.requests.WithLabelValues(values...),
		duration: r.duration.WithLabelValues(values...),
	})
}

// resultKey selects the series of kyverno_policy_results_total and
// kyverno_policy_execution_duration_seconds.
type resultKey struct {
	policy                     policyLabelValues
	kind, namespace, operation string
	rule                       string
	result                     engine.RuleStatus
	ruleType                   engine.RuleType
	cause                      cause
	dryRun                     bool
}

func (k *resultKey) labelValues() []string {
	return []string{k.policy.mode, k.policy.typ, k.policy.background, k.policy.namespace, k.policy.name,
		k.kind, k.namespace, strings.ToLower(k.operation), k.rule, string(k.result), ruleType(k.ruleType),
		k.cause.String(), strconv.FormatBool(k.dryRun)}
}

// resultSeries holds the results counter of a label tuple and, once a
// timed result was recorded for it, its execution histogram: results
// recorded without timing leave no empty histogram behind.
type resultSeries struct {
	results   prometheus.Counter
	execution atomic.Pointer[prometheus.Observer]
	// cel are, for a series of kyverno_policy_results_total, the series
	// of each CEL family its results also count in (observeCEL).
	cel [celFamilies]atomic.Pointer[resultSeries]
}

func (r *Recorder) resultSeriesFor(k resultKey) *resultSeries {
	if s, ok := r.resultSeries.load(k); ok {
		return s
	}
	return r.resultSeries.store(k, &resultSeries{results: r.results.WithLabelValues(k.labelValues()...)})
}

func (s *resultSeries) executionSeries(r *Recorder, k resultKey) prometheus.Observer {
	return s.observer(r.execution, k.labelValues)
}

// observer returns the series' child of vec, made from values on first
// use.
func (s *resultSeries) observer(vec *prometheus.HistogramVec, values func() []string) prometheus.Observer {
	if o := s.execution.Load(); o != nil {
		return *o
	}
	// Racing callers get the same child from the vector; either store wins.
	o := vec.WithLabelValues(values()...)
	s.execution.Store(&o)
	return o
}
