package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/webhook/metrics"
	"github.com/charter-dev/charter/webhook/userinfo"
)

// Paths the server answers, as Kyverno names them (admission-reports.md §0).
// The failure-policy suffix decides which policies a request sees: the API
// server calls /validate/fail for the policies that fail closed and
// /validate/ignore for those that fail open; the bare path sees both.
const (
	PathMutate         = "/mutate"
	PathMutateFail     = "/mutate/fail"
	PathMutateIgnore   = "/mutate/ignore"
	PathValidate       = "/validate"
	PathValidateFail   = "/validate/fail"
	PathValidateIgnore = "/validate/ignore"
	PathPolicyValidate = "/policyvalidate"

	// FineGrainedSegment ends the path prefix of a policy's own webhook
	// (a policy whose webhook carries matchConditions,
	// webhookmatch.Has): /validate/fail/finegrained/<key>,
	// the key policyid.FineGrainedKey (<name>, <namespace>/<name> for a
	// Policy, <kind>.policies.kyverno.io/<name> for a CEL policy). That
	// path sees that one policy only.
	FineGrainedSegment = "/finegrained/"
	// NamespacedSegment ends the path of the webhooks of namespaced
	// policies (/validate/fail/namespaced): their namespaceSelector
	// selects the namespaces whose policies they carry, and the path
	// sees the request namespace's namespaced policies of that failure
	// policy only.
	NamespacedSegment = "/namespaced"
	PathPolicyMutate  = "/policymutate"
	PathLiveness      = "/health/liveness"
	PathReadiness     = "/health/readiness"

	// defaultMaxBody fits the largest object the API server stores (3 MiB
	// in etcd) twice over, as an UPDATE review carries old and new.
	defaultMaxBody    = 7 << 20
	defaultReqTimeout = 10 * time.Second
)

// Snapshots returns the policies currently installed. The handlers call it
// once per request and evaluate against that one snapshot throughout.
type Snapshots interface {
	Snapshot() *policycache.Snapshot
}

// MutationResult is the outcome of the mutate rules for one request.
type MutationResult struct {
	// Patch is the JSON patch (RFC 6902) to return; empty for none.
	Patch []byte
	// Object is the mutated object the patch leads to; nil when unchanged.
	Object map[string]any
	// Warnings are returned with the response.
	Warnings []string
	// Denial, when not empty, refuses the request with this message.
	Denial string
}

// Mutator applies a policy set's mutate rules to a request. EngineMutator
// runs the engine's; without a Mutator the mutate paths admit every request
// unchanged. Validation sees the mutated object because the API server
// calls every mutating webhook before any validating one.
type Mutator interface {
	Mutate(ctx context.Context, set *engine.PolicySet, req *engine.Request, failClosed bool) (MutationResult, error)
}

// Options configure the handlers.
type Options struct {
	// Policies is the source of policy snapshots. Required unless Null.
	Policies Snapshots
	// Loaders resolve context entries and namespace labels.
	Loaders loader.Loaders
	// Mutator runs mutate rules; nil admits mutate requests unchanged.
	Mutator Mutator
	// Kinds resolves the parent kind of subresource requests (pods/exec is
	// matched as Pod); nil knows only the built-in resources.
	Kinds KindResolver
	// Roles resolves the requester's Roles and ClusterRoles when a policy
	// matches on them; nil leaves them empty.
	Roles userinfo.Resolver
	// Filters are request-level exclusions (see DefaultResourceFilters).
	Filters []ResourceFilter
	// Metrics records admission metrics; nil records nothing.
	Metrics *metrics.Recorder
	// Audit receives the results of allowed, non-dry-run requests; nil
	// drops them. It must not block: *AuditQueue, or the reports
	// controller's queue behind an adapter.
	Audit AuditSink
	// Background receives every allowed, non-dry-run validating request
	// with the policy sets it was validated against, to create the
	// UpdateRequests of its generate and mutate-existing rules; nil creates
	// none. It must not block.
	Background BackgroundSink
	// Promotion gates namespaces' move to charter.dev/enforcement=enforce
	// on PathPromotion (promotion.go); nil serves no such path.
	Promotion PromotionGate
	// ExceptionNamespaces, when set, are the namespaces whose
	// PolicyExceptions the process honours: /policyvalidate admits an
	// exception from elsewhere with a warning that it will be ignored.
	ExceptionNamespaces *policycache.ExceptionNamespaces
	// Cluster answers /policyvalidate's questions to the cluster (the
	// kinds it serves: policycheck.KindFaults); nil asks nothing.
	Cluster policycheck.Cluster
	// HTTPInNamespacedPolicies admits namespaced policies that call out
	// (CEL http, apiCall service URLs: loaders.NamespacedCallFaults); off,
	// /policyvalidate refuses them, as Kyverno refuses namespaced CEL http
	// without --allowHTTPInNamespacedPolicies.
	HTTPInNamespacedPolicies bool
	// Events receives every validated, non-dry-run request's outcome for
	// Kubernetes Events (events.Sink); nil emits none.
	Events EventSink
	// MaxRequestBytes bounds an AdmissionReview body (default 7 MiB).
	MaxRequestBytes int64
	// MaxInFlight bounds the reviews evaluated at once (default
	// DefaultMaxInFlightPerCPU per CPU; negative: no bound). 32 times as
	// many more may wait up to 2 s for a slot; the rest are shed
	// with 429 Too Many Requests (inflight.go). Health checks are never bounded.
	MaxInFlight int
	// RequestTimeout bounds the evaluation of one request (default 10 s).
	// The API server's ?timeout= is honoured when it is shorter.
	RequestTimeout time.Duration
	// Null makes every admission path allow without evaluating: the floor
	// of the admission benchmark.
	Null bool
	// Ready reports readiness; nil is always ready.
	Ready func() error
	// Log receives errors that do not reach the API server.
	Log logr.Logger
}

// EventSink turns validation outcomes into Kubernetes Events. Validated
// is called on the admission path and must not block: it hands the
// outcome over and returns.
type EventSink interface {
	Validated(req *engine.Request, responses []*engine.Response, blocked bool)
}

// handlers holds the request handlers of one server.
type handlers struct {
	opts Options
}

// NewHandler returns the HTTP handler with every route of the admission
// server.
func NewHandler(opts Options) http.Handler {
	h, _ := newHandler(opts)
	return h
}

// newHandler is NewHandler, with the in-flight limit it set (nil for
// none), which tests watch.
func newHandler(opts Options) (http.Handler, *inFlightLimit) {
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = defaultMaxBody
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = defaultReqTimeout
	}
	h := &handlers{opts: opts}
	mux := http.NewServeMux()
	type route struct {
		path       string
		validating bool
		scope      setScope
	}
	for _, r := range []route{
		{PathValidate, true, scopeAll}, {PathValidateFail, true, scopeFail}, {PathValidateIgnore, true, scopeIgnore},
		{PathMutate, false, scopeAll}, {PathMutateFail, false, scopeFail}, {PathMutateIgnore, false, scopeIgnore},
		{PathValidateFail + FineGrainedSegment, true, scopeFineGrained}, {PathValidateIgnore + FineGrainedSegment, true, scopeFineGrained},
		{PathMutateFail + FineGrainedSegment, false, scopeFineGrained}, {PathMutateIgnore + FineGrainedSegment, false, scopeFineGrained},
		{PathValidateFail + NamespacedSegment, true, scopeNamespacedFail}, {PathValidateIgnore + NamespacedSegment, true, scopeNamespacedIgnore},
		{PathMutateFail + NamespacedSegment, false, scopeNamespacedFail}, {PathMutateIgnore + NamespacedSegment, false, scopeNamespacedIgnore},
	} {
		var hf http.HandlerFunc
		switch {
		case opts.Null:
			hf = h.null
		case r.validating:
			hf = h.serveAdmission(metrics.Validating, validator{h, r.scope})
		default:
			hf = h.serveAdmission(metrics.Mutating, mutator{h, r.scope})
		}
		mux.Handle(r.path, recoverPanics(hf, opts.Log))
	}
	mux.Handle(PathPolicyValidate, recoverPanics(http.HandlerFunc(h.policyValidate), opts.Log))
	mux.Handle(PathVerifyTTL, recoverPanics(http.HandlerFunc(h.verifyTTL), opts.Log))
	h.routePromotion(mux)
	mux.Handle(PathPolicyMutate, recoverPanics(http.HandlerFunc(h.null), opts.Log))
	// Every path but the health checks is a review, bounded by the
	// in-flight limit; the kubelet's probes must answer however busy.
	reviews, limit := mux, newInFlightLimit(opts.MaxInFlight)
	mux = http.NewServeMux()
	mux.Handle("/", limit.wrap(reviews))
	mux.HandleFunc(PathLiveness, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc(PathReadiness, func(w http.ResponseWriter, _ *http.Request) {
		if opts.Ready != nil {
			if err := opts.Ready(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	})
	return mux, limit
}

// setScope selects the policy sets a path evaluates.
type setScope int

const (
	scopeAll setScope = iota
	scopeFail
	scopeIgnore
	// scopeFineGrained is one policy's own webhook: the path names it.
	scopeFineGrained
	// scopeNamespacedFail and scopeNamespacedIgnore are the request
	// namespace's namespaced policies of that failure policy.
	scopeNamespacedFail
	scopeNamespacedIgnore
)

// scopedSet is a policy set and whether its errors deny (failurePolicy
// Fail).
type scopedSet struct {
	set        *engine.PolicySet
	failClosed bool
}

// sets returns the sets a request on path in namespace evaluates. On a
// fine-grained path it is the named policy's own set, with the policy's
// current failurePolicy; a policy the snapshot does not serve (deleted, or
// not compiled yet in this replica) is an error, which denies, as
// Kyverno's does. On a namespaced path it is the namespace's set, none
// when the namespace has no namespaced policies (any more), as the shared
// paths serve the policies of the snapshot and no others.
func (sc setScope) sets(s *policycache.Snapshot, path, namespace string) ([]scopedSet, error) {
	ns, hasNamespaced := s.Namespaced[namespace]
	switch sc {
	case scopeFail:
		return []scopedSet{{s.Fail, true}}, nil
	case scopeIgnore:
		return []scopedSet{{s.Ignore, false}}, nil
	case scopeNamespacedFail:
		if !hasNamespaced {
			return nil, nil
		}
		return []scopedSet{{ns.Fail, true}}, nil
	case scopeNamespacedIgnore:
		if !hasNamespaced {
			return nil, nil
		}
		return []scopedSet{{ns.Ignore, false}}, nil
	case scopeFineGrained:
		_, key, _ := strings.Cut(path, FineGrainedSegment)
		fg, ok := s.FineGrained[key]
		if !ok {
			return nil, fmt.Errorf("failed to fetch policy with key: key %s: no policy with webhook matchConditions of that name is installed", key)
		}
		return []scopedSet{{fg.Set, fg.FailClosed}}, nil
	}
	if hasNamespaced {
		return []scopedSet{{s.Fail, true}, {s.Ignore, false}, {ns.Fail, true}, {ns.Ignore, false}}, nil
	}
	return []scopedSet{{s.Fail, true}, {s.Ignore, false}}, nil
}

// validator decides the validating paths of one scope: deny when an
// Enforce rule fails, or when an Enforce rule errors under failurePolicy
// Fail; otherwise allow with the warnings the policies ask for, and hand the
// results to the reports queue unless the request is a dry run.
type validator struct {
	h     *handlers
	scope setScope
}

func (v validator) Handle(ctx context.Context, rr reviewRequest) *admissionv1.AdmissionResponse {
	h, ar := v.h, rr.ar
	req, sets, decided := h.admit(ctx, rr, v.scope)
	if decided != nil {
		return decided
	}
	responses := make([]*engine.Response, 0, len(sets))
	for _, s := range sets {
		responses = append(responses, h.validateSet(ctx, s.set, req))
	}
	// An image one set's ImageValidatingPolicy verified satisfies
	// another set's requirement: required is settled across both.
	engine.SettleRequiredImages(responses...)
	blocked := false
	for i, resp := range responses {
		h.observeSet(resp, rr.metrics)
		if blocks(resp, sets[i].failClosed) {
			blocked = true
		}
	}
	var out *admissionv1.AdmissionResponse
	if blocked {
		out = denied(ar.UID, blockedMessage(deniedBy(responses, sets)))
	} else {
		out = allowed(ar.UID, warnings(responses))
		if h.opts.Audit != nil && !req.DryRun && hasResults(responses) {
			h.opts.Audit.Offer(AuditRecord{UID: ar.UID, Request: req, Responses: responses, Time: rr.received})
		}
		if h.opts.Background != nil && !req.DryRun {
			h.opts.Background.Admitted(BackgroundRecord{UID: ar.UID, Request: req, Sets: setsOf(sets), FieldManager: ar.fieldManager()})
		}
	}
	if h.opts.Events != nil && !req.DryRun && hasResults(responses) {
		h.opts.Events.Validated(req, responses, blocked)
	}
	return out
}

// admit prepares what every decision starts from: the engine request
// against the current snapshot and the sets the path evaluates. A non-nil
// response has decided the request already: a denial when it cannot be
// evaluated (roles, kind or the path's policy unknown), an allow when a
// resource filter excludes it.
func (h *handlers) admit(ctx context.Context, rr reviewRequest, scope setScope) (*engine.Request, []scopedSet, *admissionv1.AdmissionResponse) {
	ar := rr.ar
	snapshot := h.opts.Policies.Snapshot()
	req, err := h.engineRequest(ctx, ar, snapshot)
	if err != nil {
		return nil, nil, denied(ar.UID, err.Error())
	}
	if filtered(h.opts.Filters, req.Kind.Group, req.Kind.Kind, ar.SubResource, ar.Namespace, ar.Name) {
		return nil, nil, allowed(ar.UID, nil)
	}
	sets, err := scope.sets(snapshot, rr.path, ar.Namespace)
	if err != nil {
		return nil, nil, denied(ar.UID, err.Error())
	}
	return req, sets, nil
}

// deniedBy returns the responses of sets as a denial names them: an error
// that failurePolicy Ignore let through denied nothing, so the responses
// of an Ignore set keep only their other results, as Kyverno's denial from
// its fail webhook holds only the policies of Fail.
func deniedBy(responses []*engine.Response, sets []scopedSet) []*engine.Response {
	out := make([]*engine.Response, len(responses))
	for i, resp := range responses {
		if sets[i].failClosed {
			out[i] = resp
			continue
		}
		kept := &engine.Response{Resource: resp.Resource}
		for _, p := range resp.Policies {
			var rules []engine.RuleResponse
			for _, r := range p.Rules {
				if r.Status != engine.StatusError {
					rules = append(rules, r)
				}
			}
			if len(rules) > 0 {
				p.Rules = rules
				kept.Policies = append(kept.Policies, p)
			}
		}
		out[i] = kept
	}
	return out
}

// blocks reports whether a response denies the request: a failed Enforce
// rule always does; an errored Enforce rule does when its policy fails
// closed. Audit rules never block (admission-reports.md §1.3). The warn of
// an unscored CEL policy is its failure shown as warn: Kyverno's vpol
// webhook denies it, the annotation changes only the report.
func blocks(resp *engine.Response, failClosed bool) bool {
	for _, p := range resp.Policies {
		for _, r := range p.Rules {
			if r.Action != engine.Enforce {
				continue
			}
			if r.Status == engine.StatusFail || (r.Status == engine.StatusError && failClosed) ||
				(r.Status == engine.StatusWarn && isCELPolicy(p.Policy)) {
				return true
			}
		}
	}
	return false
}

func hasResults(responses []*engine.Response) bool {
	for _, r := range responses {
		if len(r.Policies) > 0 {
			return true
		}
	}
	return false
}

// mutator decides the mutating paths of one scope: the JSON patch of the
// mutate rules. Only CREATE, UPDATE and CONNECT are mutated; DELETE is
// admitted untouched.
type mutator struct {
	h     *handlers
	scope setScope
}

func (m mutator) Handle(ctx context.Context, rr reviewRequest) *admissionv1.AdmissionResponse {
	h, ar := m.h, rr.ar
	if h.opts.Mutator == nil || ar.Operation == admissionv1.Delete {
		return allowed(ar.UID, nil)
	}
	req, sets, decided := h.admit(ctx, rr, m.scope)
	if decided != nil {
		return decided
	}
	var patches [][]byte
	var warns []string
	for _, s := range sets {
		res, err := h.opts.Mutator.Mutate(ctx, s.set, req, s.failClosed)
		if err != nil {
			if s.failClosed {
				return denied(ar.UID, "mutation failed: "+err.Error())
			}
			warns = append(warns, "mutation skipped: "+err.Error())
			continue
		}
		if res.Denial != "" {
			return denied(ar.UID, res.Denial)
		}
		if len(res.Patch) > 0 {
			patches = append(patches, res.Patch)
			if res.Object != nil {
				// The next set mutates what this one produced.
				next := *req
				next.Object = res.Object
				req = &next
			}
		}
		warns = append(warns, res.Warnings...)
	}
	out := allowed(ar.UID, warns)
	if patch := joinPatches(patches); len(patch) > 0 {
		pt := admissionv1.PatchTypeJSONPatch
		out.Patch, out.PatchType = patch, &pt
	}
	return out
}

// joinPatches concatenates JSON patch arrays. On the bare /mutate path the
// Ignore set mutates the Fail set's result, so its patch applies after the
// first one.
func joinPatches(patches [][]byte) []byte {
	switch len(patches) {
	case 0:
		return nil
	case 1:
		return patches[0]
	}
	var ops []json.RawMessage
	for _, p := range patches {
		var part []json.RawMessage
		if err := json.Unmarshal(p, &part); err == nil {
			ops = append(ops, part...)
		}
	}
	out, _ := json.Marshal(ops)
	return out
}
