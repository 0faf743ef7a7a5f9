// Package metrics records admission and background scan metrics under
// Kyverno's Prometheus names and labels (admission-reports.md §4), so existing dashboards and
// alerts keep working against charter.
package metrics

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
)

// Metric names, as Kyverno's Prometheus exporter spells them.
const (
	AdmissionRequestsTotal   = "kyverno_admission_requests_total"
	AdmissionReviewDuration  = "kyverno_admission_review_duration_seconds"
	PolicyResultsTotal       = "kyverno_policy_results_total"
	PolicyExecutionDuration  = "kyverno_policy_execution_duration_seconds"
	PolicyChangesTotal       = "kyverno_policy_changes_total"
	Info                     = "kyverno_info"
	AuditQueueDroppedTotal   = "charter_audit_queue_dropped_total"
	PolicyCompileErrorsTotal = "charter_policy_compile_errors"
)

// Webhook kinds, the request_webhook label.
const (
	Validating = "ValidatingWebhookConfiguration"
	Mutating   = "MutatingWebhookConfiguration"
)

// Causes of a rule's execution, the rule_execution_cause label.
const (
	CauseAdmission  = "admission_request"
	CauseBackground = "background_scan"
)

// cause selects the rule_execution_cause label in a series key; a small
// integer keeps the key cheap to hash.
type cause uint8

const (
	admissionCause cause = iota
	backgroundCause
)

func (c cause) String() string {
	if c == backgroundCause {
		return CauseBackground
	}
	return CauseAdmission
}

// buckets are Kyverno's default histogram boundaries, in seconds.
var buckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 25, 30}

// scope are the constant labels Kyverno's OpenTelemetry exporter puts on
// every series (admission-reports.md §4); queries that filter on them keep
// matching. The version and schema URL are empty in Kyverno's exposition,
// and so they are here.
var scope = prometheus.Labels{"otel_scope_name": "kyverno", "otel_scope_version": "", "otel_scope_schema_url": ""}

// withScope returns the scope labels plus extra.
func withScope(extra prometheus.Labels) prometheus.Labels {
	out := make(prometheus.Labels, len(scope)+len(extra))
	for k, v := range scope {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

var (
	requestLabels = []string{"resource_kind", "resource_namespace", "resource_request_operation", "request_allowed", "request_webhook"}
	resultLabels  = []string{"policy_validation_mode", "policy_type", "policy_background_mode", "policy_namespace", "policy_name",
		"resource_kind", "resource_namespace", "resource_request_operation", "rule_name", "rule_result", "rule_type",
		"rule_execution_cause", "dry_run"}
	changeLabels = []string{"policy_validation_mode", "policy_type", "policy_background_mode", "policy_namespace", "policy_name", "policy_change_type"}
)

// Recorder holds the collectors. A nil *Recorder records nothing, so
// callers need no checks.
type Recorder struct {
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	results       *prometheus.CounterVec
	execution     *prometheus.HistogramVec
	changes       *prometheus.CounterVec
	auditDropped  prometheus.Counter
	compileErrors prometheus.Gauge
	ruleInfo      *ruleInfoCollector
	eventDrops    *eventDropsCollector

	// The children of the vectors, by label values (series.go): looking
	// one up in a vector hashes and checks every label value, which cost
	// more than the rest of recording.
	requestSeries seriesCache[requestKey, *requestSeries]
	resultSeries  seriesCache[resultKey, *resultSeries]

	// cel are the per-kind metrics of policies.kyverno.io policies
	// (celkinds.go), celSeries their children.
	cel       *celCollectors
	celSeries seriesCache[celKey, *resultSeries]
}

// New creates the collectors and registers them with reg, along with
// kyverno_info for version.
func New(reg prometheus.Registerer, version string) (*Recorder, error) {
	r := &Recorder{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: AdmissionRequestsTotal, ConstLabels: scope,
			Help: "Admission requests received by the webhook."}, requestLabels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: AdmissionReviewDuration, ConstLabels: scope, Buckets: buckets,
			Help: "Time to answer an admission request, from the start of HTTP handling."}, requestLabels),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: PolicyResultsTotal, ConstLabels: scope,
			Help: "Rule results, one per rule evaluated."}, resultLabels),
		execution: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: PolicyExecutionDuration, ConstLabels: scope, Buckets: buckets,
			Help: "Time to evaluate a rule. The engine is timed per policy; each rule of the policy is given an equal share."}, resultLabels),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: PolicyChangesTotal, ConstLabels: scope,
			Help: "Policy creations, spec updates and deletions seen."}, changeLabels),
		auditDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: AuditQueueDroppedTotal,
			Help: "Admission results dropped before their report: the queue to the report writer was full, or too many resources waited for their reports."}),
		compileErrors: prometheus.NewGauge(prometheus.GaugeOpts{Name: PolicyCompileErrorsTotal,
			Help: "Faults in installed policies and exceptions that keep them from serving."}),
		ruleInfo:   newRuleInfoCollector(),
		eventDrops: newEventDropsCollector(),
		cel:        newCELCollectors(),
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: Info, ConstLabels: withScope(prometheus.Labels{"version": version}),
		Help: "Build information."})
	info.Set(1)
	for _, c := range append([]prometheus.Collector{r.requests, r.duration, r.results, r.execution, r.changes, r.auditDropped, r.compileErrors, r.ruleInfo, r.eventDrops, info}, r.cel.collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Request describes one admission request for the request metrics.
type Request struct {
	Kind      string
	Namespace string
	Operation string // CREATE, UPDATE, ...
	Webhook   string // Validating or Mutating
	DryRun    bool
}

// ObserveRequest records one answered request.
func (r *Recorder) ObserveRequest(req Request, allowed bool, d time.Duration) {
	if r == nil {
		return
	}
	s := r.requestSeriesFor(requestKey{req: req, allowed: allowed})
	s.requests.Inc()
	s.duration.Observe(d.Seconds())
}

// ObserveResults records one sample per rule of the response, caused by an
// admission request.
func (r *Recorder) ObserveResults(req Request, resp *engine.Response) {
	if r == nil || resp == nil {
		return
	}
	for i := range resp.Policies {
		r.observeRules(req, admissionCause, &resp.Policies[i], 0, false)
	}
}

// ObservePolicy records the results of one policy's rules, caused by an
// admission request, and, when took is not negative, their execution
// time: the engine times policies, not rules, so the policy's evaluation
// time is shared equally among the rules that responded. Sums and counts
// of kyverno_policy_execution_duration_seconds then add up to the real
// time spent per policy; per-rule buckets are approximate.
func (r *Recorder) ObservePolicy(req Request, p engine.PolicyResponse, took time.Duration) {
	if r == nil || len(p.Rules) == 0 {
		return
	}
	r.observeRules(req, admissionCause, &p, took.Seconds()/float64(len(p.Rules)), took >= 0)
}

// ObserveScan records the results of one background scan of a resource,
// one sample per rule with rule_execution_cause="background_scan", and
// each policy's execution time shared equally among its rules, as
// ObservePolicy does. resp comes from PolicySet.ValidateTimed, so every
// policy carries its Duration. Kyverno labels every background result
// resource_request_operation="create" and dry_run="false", whatever the
// resource's history, and so does this.
//
// The caller hands over real evaluations only: a resource skipped because
// neither it nor its policies changed was not evaluated, and Kyverno's
// engine records nothing for it either.
func (r *Recorder) ObserveScan(resp *engine.Response) {
	if r == nil || resp == nil {
		return
	}
	req := Request{Kind: resp.Resource.Kind, Namespace: resp.Resource.Namespace, Operation: backgroundOperation}
	for i := range resp.Policies {
		p := &resp.Policies[i]
		if len(p.Rules) == 0 {
			continue
		}
		r.observeRules(req, backgroundCause, p, p.Duration.Seconds()/float64(len(p.Rules)), true)
	}
}

// backgroundOperation is the resource_request_operation of background
// results.
const backgroundOperation = "create"

// ObserveGenerating records one run of a GeneratingPolicy by the
// background controller for a trigger (resource): its result in
// kyverno_generating_policy_results_total and kyverno_policy_results_total
// (rule_type="generate"), with the cause background_scan as Kyverno
// records every GeneratingPolicy result, and p.Duration (set by
// engine.PolicySet.Generate) in their execution-time histograms.
// operation is the trigger's admission operation (CREATE, UPDATE,
// DELETE), "" for a run that no admission request caused (a policy
// change, a resync, a downstream object edited), which counts as create,
// as Kyverno's background request does.
func (r *Recorder) ObserveGenerating(resource engine.ResourceRef, operation string, p engine.PolicyResponse) {
	if r == nil || len(p.Rules) == 0 {
		return
	}
	if operation == "" {
		operation = backgroundOperation
	}
	req := Request{Kind: resource.Kind, Namespace: resource.Namespace, Operation: operation}
	r.observeRules(req, backgroundCause, &p, p.Duration.Seconds()/float64(len(p.Rules)), true)
}

// ObserveMutation records the results of the mutate rules of one policy
// set run at admission (rule_type="mutate"), and their execution time:
// took is how long the whole set's mutation took, since the engine
// chains the policies' mutations through one request view and times none
// of them, and it is shared equally among every rule that responded. As
// with ObservePolicy, sums and counts add up to the real time spent; a
// negative took records results only.
func (r *Recorder) ObserveMutation(req Request, resp *engine.MutateResponse, took time.Duration) {
	if r == nil || resp == nil {
		return
	}
	rules := 0
	for i := range resp.Policies {
		rules += len(resp.Policies[i].Rules)
	}
	if rules == 0 {
		return
	}
	share := took.Seconds() / float64(rules)
	for i := range resp.Policies {
		r.observeRules(req, admissionCause, &resp.Policies[i], share, took >= 0)
	}
}

// observeRules records one result per rule of p, caused by c, and, when
// timed, share seconds of execution time for each.
//
// policy_validation_mode is the action the rule was evaluated with, when
// it has one (validate and verifyImages rules): a staged policy promoted
// to Enforce in a namespace labelled enforce, or an override to Audit,
// counts as what it did, not as what its spec says. Rules without an
// action, and background scans (which block nothing), keep the mode of
// the policy's spec, as in Kyverno.
func (r *Recorder) observeRules(req Request, c cause, p *engine.PolicyResponse, share float64, timed bool) {
	if len(p.Rules) == 0 {
		return
	}
	key := resultKey{policy: policyLabels(p.Policy), kind: req.Kind, namespace: req.Namespace, operation: req.Operation, cause: c, dryRun: req.DryRun}
	specMode := key.policy.mode
	family := familyOf(p.Policy.GetKind())
	for i := range p.Rules {
		rr := &p.Rules[i]
		key.rule, key.result, key.ruleType = rr.Name, rr.Status, rr.Type
		if c == admissionCause {
			key.policy.mode = actionMode(rr.Action, specMode)
		}
		s := r.resultSeriesFor(key)
		s.results.Inc()
		if timed {
			s.executionSeries(r, key).Observe(share)
		}
		if family != noFamily {
			r.observeCEL(family, &key, s, share, timed)
		}
	}
}

// PolicyChanged counts a policy created (or found by the informers'
// initial list), updated in its spec, or deleted: change is "created",
// "updated" or "deleted" (policycache.PolicyChange).
func (r *Recorder) PolicyChanged(p kyvernov1.PolicyInterface, change string) {
	if r == nil || p == nil {
		return
	}
	pl := policyLabels(p)
	r.changes.WithLabelValues(pl.mode, pl.typ, pl.background, pl.namespace, pl.name, change).Inc()
}

// AuditDropped counts an audit result the reports queue had no room for.
func (r *Recorder) AuditDropped() {
	if r != nil {
		r.auditDropped.Inc()
	}
}

// CompileErrors sets the number of faults in the installed policies.
func (r *Recorder) CompileErrors(n int) {
	if r != nil {
		r.compileErrors.Set(float64(n))
	}
}

// actionMode is the policy_validation_mode of a rule evaluated with a.
func actionMode(a engine.Action, specMode string) string {
	switch a {
	case engine.Enforce:
		return "enforce"
	case engine.Audit:
		return "audit"
	}
	return specMode
}

type policyLabelValues struct {
	mode, typ, background, namespace, name string
}

func policyLabels(src kyvernov1.PolicyInterface) policyLabelValues {
	enforce, background := policyModes(src)
	out := policyLabelValues{mode: "audit", typ: "cluster", namespace: "-", name: src.GetName(), background: strconv.FormatBool(background)}
	if src.IsNamespaced() {
		out.typ, out.namespace = "namespaced", src.GetNamespace()
	}
	if enforce {
		out.mode = "enforce"
	}
	return out
}

// policyModes reports whether a policy enforces and whether it is
// processed in the background. A ValidatingPolicy or
// ImageValidatingPolicy answers from its own spec as its GetSpec view
// (KyvernoSpec) would: that view is built on each call, and the labels are
// needed for every policy of every admission request.
func policyModes(src kyvernov1.PolicyInterface) (enforce, background bool) {
	switch p := src.(type) {
	case policiesv1.ValidatingPolicyLike:
		s := p.GetValidatingPolicySpec()
		return s.HasAction(admissionregistrationv1.Deny), s.BackgroundEnabled()
	case policiesv1.ImageValidatingPolicyLike:
		s := p.GetImageValidatingPolicySpec()
		return s.HasAction(admissionregistrationv1.Deny), s.BackgroundEnabled()
	}
	return specModes(src.GetSpec())
}

// specModes is policyModes of a ClusterPolicy spec: it enforces when the
// spec or any rule does.
func specModes(spec *kyvernov1.Spec) (enforce, background bool) {
	enforce = strings.EqualFold(string(spec.ValidationFailureAction), "enforce")
	for i := range spec.Rules {
		if enforce {
			break
		}
		enforce = strings.EqualFold(string(spec.RuleFailureAction(&spec.Rules[i])), "enforce")
	}
	return enforce, spec.BackgroundProcessingEnabled()
}

func ruleType(t engine.RuleType) string {
	switch t {
	case engine.TypeValidation:
		return "validate"
	case engine.TypeMutation:
		return "mutate"
	case engine.TypeGeneration:
		return "generate"
	case engine.TypeImageVerify:
		return "imageVerify"
	}
	return "-"
}
