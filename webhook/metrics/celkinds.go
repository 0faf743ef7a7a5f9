package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
)

// Kyverno's CEL engines count their policies' results per kind
// (admission-reports.md §4): kyverno_validating_policy_*,
// kyverno_image_validating_policy_*, kyverno_mutating_policy_* and
// kyverno_generating_policy_*, one sample per policy result, with the
// cause and result as plain labels. charter records those for
// ValidatingPolicy, ImageValidatingPolicy, MutatingPolicy and
// GeneratingPolicy (and their namespaced kinds) wherever it records their
// kyverno_policy_results_total samples, which it keeps too, so one query
// still sees every policy of the cluster. GeneratingPolicies are
// evaluated by the background controller only (admission just queues
// their UpdateRequests), so their results all have the cause
// background_scan, as in Kyverno (ObserveGenerating).

// celFamily selects the per-kind metrics of a policies.kyverno.io kind;
// noFamily for ClusterPolicy, Policy and the kinds not evaluated here.
type celFamily uint8

const (
	noFamily celFamily = iota
	validatingFamily
	imageValidatingFamily
	mutatingFamily
	generatingFamily
	celFamilies
)

// celFamilyPrefix are the metric name prefixes, by family.
var celFamilyPrefix = [celFamilies]string{
	validatingFamily:      "kyverno_validating_policy",
	imageValidatingFamily: "kyverno_image_validating_policy",
	mutatingFamily:        "kyverno_mutating_policy",
	generatingFamily:      "kyverno_generating_policy",
}

// Per-kind results counters; each has an _execution_duration_seconds
// histogram beside it (kyverno_validating_policy_execution_duration_seconds,
// ...).
const (
	ValidatingPolicyResultsTotal      = "kyverno_validating_policy_results_total"
	ImageValidatingPolicyResultsTotal = "kyverno_image_validating_policy_results_total"
	MutatingPolicyResultsTotal        = "kyverno_mutating_policy_results_total"
	GeneratingPolicyResultsTotal      = "kyverno_generating_policy_results_total"
	executionDurationSuffix           = "_execution_duration_seconds"
)

var celLabels = []string{"policy_validation_mode", "policy_background_mode", "policy_name", "policy_namespace",
	"resource_kind", "resource_namespace", "resource_request_operation", "execution_cause", "result"}

func familyOf(kind string) celFamily {
	switch kind {
	case policiesv1.ValidatingPolicyKind, policiesv1.NamespacedValidatingPolicyKind:
		return validatingFamily
	case policiesv1.ImageValidatingPolicyKind, policiesv1.NamespacedImageValidatingPolicyKind:
		return imageValidatingFamily
	case policiesv1.MutatingPolicyKind, policiesv1.NamespacedMutatingPolicyKind:
		return mutatingFamily
	case policiesv1.GeneratingPolicyKind, policiesv1.NamespacedGeneratingPolicyKind:
		return generatingFamily
	}
	return noFamily
}

// celCollectors are the counter and histogram of every family.
type celCollectors struct {
	results   [celFamilies]*prometheus.CounterVec
	execution [celFamilies]*prometheus.HistogramVec
}

func newCELCollectors() *celCollectors {
	c := &celCollectors{}
	for f := validatingFamily; f < celFamilies; f++ {
		kind := strings.ReplaceAll(strings.TrimPrefix(celFamilyPrefix[f], "kyverno_"), "_", " ")
		c.results[f] = prometheus.NewCounterVec(prometheus.CounterOpts{Name: celFamilyPrefix[f] + "_results_total", ConstLabels: scope,
			Help: "Results of " + kind + " kinds, one per policy evaluated."}, celLabels)
		c.execution[f] = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: celFamilyPrefix[f] + executionDurationSuffix, ConstLabels: scope,
			Buckets: buckets, Help: "Time to evaluate a " + kind + "."}, celLabels)
	}
	return c
}

func (c *celCollectors) collectors() []prometheus.Collector {
	var out []prometheus.Collector
	for f := validatingFamily; f < celFamilies; f++ {
		out = append(out, c.results[f], c.execution[f])
	}
	return out
}

// celKey selects the series of a family's counter and histogram.
type celKey struct {
	family                                 celFamily
	mode, background, policyNS, policyName string
	kind, namespace, operation             string
	cause                                  cause
	result                                 engine.RuleStatus
}

func (k *celKey) labelValues() []string {
	return []string{k.mode, k.background, k.policyName, k.policyNS, k.kind, k.namespace, strings.ToLower(k.operation), k.cause.String(), string(k.result)}
}

func (r *Recorder) celSeriesFor(k celKey) *resultSeries {
	if s, ok := r.celSeries.load(k); ok {
		return s
	}
	return r.celSeries.store(k, &resultSeries{results: r.cel.results[k.family].WithLabelValues(k.labelValues()...)})
}

// observeCEL records one result of a policies.kyverno.io policy in its
// kind's family. series is the result's series in kyverno_policy_results_total,
// which keeps the family's series it maps to: found once, not looked up
// again for every result (a ValidatingPolicy records both on every
// request).
func (r *Recorder) observeCEL(family celFamily, key *resultKey, series *resultSeries, share float64, timed bool) {
	s := series.cel[family].Load()
	var k celKey
	if s == nil || timed && s.execution.Load() == nil {
		k = celKey{family: family, mode: key.policy.mode, background: key.policy.background, policyNS: key.policy.namespace,
			policyName: key.policy.name, kind: key.kind, namespace: key.namespace, operation: key.operation, cause: key.cause, result: key.result}
	}
	if s == nil {
		s = r.celSeriesFor(k)
		series.cel[family].Store(s)
	}
	s.results.Inc()
	if timed {
		s.observer(r.cel.execution[family], k.labelValues).Observe(share)
	}
}
