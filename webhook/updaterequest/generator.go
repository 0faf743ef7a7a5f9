// Package updaterequest turns admitted requests into kyverno.io/v2
// UpdateRequests: one per policy for the generate rules a request
// triggers, one per mutate-existing rule (background-cleanup.md §2.2). The
// background controller (reconciler/background) carries them out.
//
// Admission never waits for them: the webhook hands each allowed,
// non-dry-run request to a bounded queue, and the Generator's workers
// decide which rules apply (the engine's background checks, off the
// admission path) and create the UpdateRequests, retrying a failed create
// with backoff for a few seconds. Unlike Kyverno, the state Pending is
// written with the object's status right after the create, and a create
// that fails for good is logged and counted, never silently absent from
// the logs.
package updaterequest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/api/charter"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/internal/droplog"
	"github.com/charter-dev/charter/webhook/server"
)

// Labels of UpdateRequests, as Kyverno writes them (§2.1), so that
// `kubectl get ur -l` finds a policy's work.
const (
	LabelGeneratePolicy       = "generate.kyverno.io/policy-name"
	LabelMutatePolicy         = "mutate.updaterequest.kyverno.io/policy-name"
	LabelMutateTriggerName    = "mutate.updaterequest.kyverno.io/trigger-name"
	LabelMutateTriggerNS      = "mutate.updaterequest.kyverno.io/trigger-namespace"
	LabelMutateTriggerKind    = "mutate.updaterequest.kyverno.io/trigger-kind"
	LabelMutateTriggerVersion = "mutate.updaterequest.kyverno.io/trigger-apiversion"
)

// DefaultQueueSize bounds the admitted requests waiting for their
// UpdateRequests.
const DefaultQueueSize = 1000

// createBackoff retries a failed create for about ten seconds.
var createBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 6, Cap: 5 * time.Second}

// Generator creates the UpdateRequests of admitted requests.
type Generator struct {
	// Client writes UpdateRequests.
	Client client.Client
	// Namespace holds the UpdateRequests (charter's namespace).
	Namespace string
	// Loaders serve the rules' context entries and namespace labels while
	// their preconditions are checked.
	Loaders loader.Loaders
	// Workers bound the concurrent checks and creates (default 4).
	Workers int
	Config
	Log logr.Logger

	queue   chan server.BackgroundRecord
	dropped atomic.Int64
	// dropLog says the drops of a full queue in the log, a line per
	// interval rather than one per request.
	dropLog     *droplog.Log
	dropLogOnce sync.Once
	failed      atomic.Int64
	created     atomic.Int64
	own         atomic.Int64
	over        atomic.Int64

	// Count counts the existing UpdateRequests for the threshold; the
	// Generator runs it.
	Count interface {
		Pending() (int, bool)
		Run(context.Context)
	}
	// Recorder records the Warning events of UpdateRequests not created
	// (events.k8s.io).
	Recorder events.EventRecorder
}

// ReasonThresholdReached is the Warning event on a policy whose
// UpdateRequest was not created because the threshold was reached.
const ReasonThresholdReached = "UpdateRequestThresholdReached"

// Config is what an operator sets of UpdateRequest creation.
type Config struct {
	// Own tells the background controller's own writes, which trigger no
	// rule that skips background requests (loop protection).
	Own OwnRequests
	// Threshold stops UpdateRequest creation while this many exist in
	// charter's namespace (Kyverno's updateRequestThreshold); 0 sets no
	// limit. What is not created is said in a Warning event on the policy
	// and in the log, never dropped silently as Kyverno does.
	Threshold int
}

// OwnRequests tells the background controller's own writes from everyone
// else's (background-cleanup.md §2.2): a rule with skipBackgroundRequests
// (the default) ignores them, so that a policy whose generated or mutated
// kind is also its trigger kind does not feed itself. Kyverno knows the
// controller by its ServiceAccount only; charter also knows it when it
// shares an identity (charter dev runs as the developer), by the field
// manager of its writes, without skipping that identity's other requests,
// and when it writes for a namespaced policy as that namespace's
// ServiceAccount (impersonated), for that namespace's policies only.
type OwnRequests struct {
	// Users are identities only the background controller uses, e.g.
	// system:serviceaccount:charter-system:charter-background: every
	// request of theirs is its own.
	Users []string
	// SharedUsers are identities the controller shares with people or
	// other programs: only their requests with the field manager
	// charter.BackgroundFieldManager are its own.
	SharedUsers []string
	// NamespacedPolicyServiceAccount is the ServiceAccount the controller
	// impersonates in a namespace for its namespaced policies (serve
	// --namespaced-policy-service-account). A request of
	// system:serviceaccount:<ns>:<it> is the controller's own for the
	// namespaced policies of <ns> only: the namespace's owner holds that
	// ServiceAccount too, so its writes skip nothing of cluster-scoped
	// policies nor of another namespace's.
	NamespacedPolicyServiceAccount string
}

// OwnScope says for which policies a request is the background
// controller's own write: every policy, or the namespaced ones of one
// namespace, or none.
type OwnScope struct {
	// All: the request is the controller's own for every policy.
	All bool
	// Namespace, when not empty, is the namespace whose namespaced
	// policies the request is the controller's own for.
	Namespace string
}

// Any reports whether the request is the controller's own for some policy.
func (s OwnScope) Any() bool { return s.All || s.Namespace != "" }

// Covers reports whether the request is the controller's own for p.
func (s OwnScope) Covers(p kyvernov1.PolicyInterface) bool {
	if s.All {
		return true
	}
	return s.Namespace != "" && p != nil && p.IsNamespaced() && p.GetNamespace() == s.Namespace
}

// Match says for which policies an admitted request is the background
// controller's own.
func (o OwnRequests) Match(rec server.BackgroundRecord) OwnScope {
	user := rec.Request.UserInfo.Username
	if user == "" {
		return OwnScope{}
	}
	if slices.Contains(o.Users, user) {
		return OwnScope{All: true}
	}
	if rec.FieldManager == charter.BackgroundFieldManager && slices.Contains(o.SharedUsers, user) {
		return OwnScope{All: true}
	}
	if o.NamespacedPolicyServiceAccount != "" {
		if ns, name, err := serviceaccount.SplitUsername(user); err == nil && name == o.NamespacedPolicyServiceAccount {
			return OwnScope{Namespace: ns}
		}
	}
	return OwnScope{}
}

var _ server.BackgroundSink = (*Generator)(nil)

// NewGenerator returns a Generator with a queue of size records.
func NewGenerator(cl client.Client, namespace string, loaders loader.Loaders, size int, log logr.Logger) *Generator {
	if size <= 0 {
		size = DefaultQueueSize
	}
	return &Generator{Client: cl, Namespace: namespace, Loaders: loaders, Log: log, queue: make(chan server.BackgroundRecord, size)}
}

// Admitted implements server.BackgroundSink. Records of sets without any
// generate or mutate-existing rule are not queued.
func (g *Generator) Admitted(rec server.BackgroundRecord) bool {
	if !anyBackgroundRules(rec.Sets, nil) {
		return true
	}
	select {
	case g.queue <- rec:
		return true
	default:
		g.dropped.Add(1)
		g.dropLogOnce.Do(func() {
			g.dropLog = droplog.New(g.Log, "UpdateRequest queue full: admitted requests dropped; their generate and mutate-existing rules run at the next policy resync", 0)
		})
		g.dropLog.Dropped("kind", rec.Request.Kind.Kind, "namespace", rec.Request.Namespace, "name", rec.Request.Name)
		return false
	}
}

// Counts returns how many UpdateRequests were created, how many creates
// failed for good, and how many admitted requests were dropped.
func (g *Generator) Counts() (created, failed, dropped int64) {
	return g.created.Load(), g.failed.Load(), g.dropped.Load()
}

// OverThreshold counts the UpdateRequests not created because the
// threshold was reached.
func (g *Generator) OverThreshold() int64 { return g.over.Load() }

// OwnSkipped counts the background controller's own requests that
// triggered nothing because every rule they concerned skips them.
func (g *Generator) OwnSkipped() int64 { return g.own.Load() }

// NeedLeaderElection is false: every admission replica creates the
// UpdateRequests of the requests it admitted.
func (g *Generator) NeedLeaderElection() bool { return false }

// Start runs the workers until ctx ends.
func (g *Generator) Start(ctx context.Context) error {
	workers := g.Workers
	if workers <= 0 {
		workers = 4
	}
	if g.Count != nil {
		go g.Count.Run(ctx)
	}
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-ctx.Done():
					return
				case rec := <-g.queue:
					for _, ur := range g.Build(ctx, rec) {
						g.create(ctx, ur)
					}
				}
			}
		}()
	}
	for range workers {
		<-done
	}
	return nil
}

// Build returns the UpdateRequests an admitted request calls for.
func (g *Generator) Build(ctx context.Context, rec server.BackgroundRecord) []*kyvernov2.UpdateRequest {
	req := rec.Request
	// skip leaves out the rules that ignore the background controller's
	// own writes, when this is one.
	skip := func(kyvernov1.PolicyInterface, *kyvernov1.Rule) bool { return false }
	if own := g.Own.Match(rec); own.Any() {
		skip = func(p kyvernov1.PolicyInterface, r *kyvernov1.Rule) bool {
			return own.Covers(p) && r.GetSkipBackgroundRequests()
		}
		if !anyBackgroundRules(rec.Sets, func(p kyvernov1.PolicyInterface, r *kyvernov1.Rule) bool { return !skip(p, r) }) {
			g.own.Add(1)
			g.Log.V(2).Info("the background controller's own write: no rule to trigger", "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name)
			return nil
		}
	}
	var out []*kyvernov2.UpdateRequest
	snapshot := g.snapshot(rec)
	for _, set := range rec.Sets {
		if set == nil {
			continue
		}
		resp := set.Generate(ctx, req, engine.WithLoaders(g.Loaders), engine.WithBackgroundChecks(), engine.WithWebhookConditionsMet())
		for _, pr := range resp.Policies {
			if ur := g.generateRequest(pr, req, snapshot, skip); ur != nil {
				out = append(out, ur)
			}
		}
		mreq := req
		if req.Operation == kyvernov1.Delete {
			// The deleted object is the trigger of rules that ask for
			// DELETE (§4.1).
			m := *req
			m.Object = req.OldObject
			mreq = &m
		}
		if mreq.Object == nil {
			continue
		}
		mresp := set.Mutate(ctx, mreq, engine.WithLoaders(g.Loaders), engine.WithMutateExisting(), engine.WithBackgroundChecks(),
			// The request came through the webhooks, whose conditions the API
			// server has evaluated.
			engine.WithWebhookConditionsMet())
		for _, pr := range mresp.Policies {
			for _, rr := range pr.Rules {
				rule := ruleOf(pr.Policy, rr.Name)
				if rule == nil || !rule.HasMutateExisting() || rr.Status != engine.StatusPass || skip(pr.Policy, rule) {
					continue
				}
				if req.Operation == kyvernov1.Delete && !rule.NamesOperation(kyvernov1.Delete) {
					continue
				}
				out = append(out, g.mutateRequest(pr, rr.Name, mreq, snapshot))
			}
		}
	}
	return out
}

// generateRequest is the one UpdateRequest of a policy's generate rules
// for the request (§2.2): a passing rule generates for the new object; a
// failing one (the trigger went away or stopped matching) generates from
// the deleted object when the rule matches DELETE operations, else deletes
// the downstream objects of a synchronized rule.
func (g *Generator) generateRequest(pr engine.PolicyResponse, req *engine.Request, snapshot kyvernov2.UpdateRequestSpecContext, skip func(kyvernov1.PolicyInterface, *kyvernov1.Rule) bool) *kyvernov2.UpdateRequest {
	var contexts []kyvernov2.RuleContext
	for _, rr := range pr.Rules {
		rule := ruleOf(pr.Policy, rr.Name)
		exempted := false
		if _, gpol := pr.Policy.(policiesv1.GeneratingPolicyLike); gpol && rr.Name == engine.RuleException {
			// A PolicyException decided the GeneratingPolicy's one rule
			// (named after it): the background controller evaluates it
			// again and reports the exception's skip or pass, as Kyverno
			// reports it for the trigger.
			rule, exempted = ruleOf(pr.Policy, pr.Policy.GetName()), true
		}
		if rule == nil || !rule.HasGenerate() || skip(pr.Policy, rule) {
			continue
		}
		sync := rule.Generation.Synchronize
		switch rr.Status {
		case engine.StatusSkip:
			if exempted && req.Object != nil {
				contexts = append(contexts, kyvernov2.RuleContext{Rule: rule.Name, Trigger: triggerOf(req.Object), Synchronize: &sync})
			}
		case engine.StatusPass:
			// A GeneratingPolicy that asks for DELETE passes for the
			// deleted object (a DELETE has no new one): that is the
			// trigger.
			obj := req.Object
			if obj == nil {
				obj = req.OldObject
			}
			contexts = append(contexts, kyvernov2.RuleContext{Rule: rule.Name, Trigger: triggerOf(obj), Synchronize: &sync})
		case engine.StatusFail:
			switch {
			case req.OldObject == nil:
			case req.Operation == kyvernov1.Delete && rule.NamesOperation(kyvernov1.Delete):
				// A rule that asks for DELETE generates from the deleted
				// object (§2.2).
				contexts = append(contexts, kyvernov2.RuleContext{Rule: rr.Name, Trigger: triggerOf(req.OldObject), Synchronize: &sync})
			case sync:
				contexts = append(contexts, kyvernov2.RuleContext{Rule: rr.Name, Trigger: triggerOf(req.OldObject), Synchronize: &sync, DeleteDownstream: true})
			}
		}
	}
	if len(contexts) == 0 {
		return nil
	}
	ur := g.newRequest(requestType(kyvernov2.Generate, pr.Policy), pr.Key, contexts[0].Trigger, snapshot)
	ur.Labels = map[string]string{LabelGeneratePolicy: pr.Policy.GetName()}
	ur.Spec.RuleContext = contexts
	return ur
}

func (g *Generator) mutateRequest(pr engine.PolicyResponse, rule string, req *engine.Request, snapshot kyvernov2.UpdateRequestSpecContext) *kyvernov2.UpdateRequest {
	trigger := triggerOf(req.Object)
	ur := g.newRequest(requestType(kyvernov2.Mutate, pr.Policy), pr.Key, trigger, snapshot)
	ur.Spec.Rule = rule
	ur.Labels = map[string]string{
		LabelMutatePolicy:         pr.Policy.GetName(),
		LabelMutateTriggerName:    truncate(trigger.Name, 63),
		LabelMutateTriggerNS:      trigger.Namespace,
		LabelMutateTriggerKind:    trigger.Kind,
		LabelMutateTriggerVersion: strings.ReplaceAll(trigger.APIVersion, "/", "-"),
	}
	return ur
}

// requestType is typ for a ClusterPolicy or Policy, Kyverno's cel-generate
// or cel-mutate for a GeneratingPolicy or MutatingPolicy: spec.policy is
// the key, which a ClusterPolicy of the same name shares.
func requestType(typ kyvernov2.RequestType, p kyvernov1.PolicyInterface) kyvernov2.RequestType {
	switch p.(type) {
	case policiesv1.GeneratingPolicyLike:
		return kyvernov2.CELGenerate
	case policiesv1.MutatingPolicyLike:
		return kyvernov2.CELMutate
	}
	return typ
}

func (g *Generator) newRequest(typ kyvernov2.RequestType, policy string, trigger kyvernov1.ResourceSpec, snapshot kyvernov2.UpdateRequestSpecContext) *kyvernov2.UpdateRequest {
	return &kyvernov2.UpdateRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "ur-", Namespace: g.Namespace},
		Spec: kyvernov2.UpdateRequestSpec{
			Type: typ, Policy: policy,
			// The trigger also goes to spec.resource so that `kubectl get ur`
			// shows it for generate requests too.
			Resource: trigger,
			Context:  snapshot,
		},
	}
}

// snapshot records who asked and the admission request itself, so the
// background controller evaluates the rule as admission saw it.
func (g *Generator) snapshot(rec server.BackgroundRecord) kyvernov2.UpdateRequestSpecContext {
	req := rec.Request
	ar := &admissionv1.AdmissionRequest{
		UID:         rec.UID,
		Kind:        metav1.GroupVersionKind(req.Kind),
		Resource:    metav1.GroupVersionResource(req.Resource),
		SubResource: req.SubResource,
		Name:        req.Name,
		Namespace:   req.Namespace,
		Operation:   admissionv1.Operation(req.Operation),
		UserInfo:    req.UserInfo,
		Object:      rawOf(req.Object),
		OldObject:   rawOf(req.OldObject),
	}
	return kyvernov2.UpdateRequestSpecContext{
		UserInfo: &kyvernov2.RequestInfo{Roles: req.Roles, ClusterRoles: req.ClusterRoles, AdmissionUserInfo: authenticationv1.UserInfo(req.UserInfo)},
		AdmissionRequestInfo: &kyvernov2.AdmissionRequestInfoObject{
			AdmissionRequest: ar, Operation: ar.Operation,
		},
	}
}

// overThreshold reports whether the threshold forbids creating ur, and
// says so: a Warning event on the policy, and a log line on the first of
// a run of them and every hundredth.
func (g *Generator) overThreshold(ur *kyvernov2.UpdateRequest) bool {
	if g.Threshold <= 0 || g.Count == nil {
		return false
	}
	pending, ok := g.Count.Pending()
	if !ok || pending < g.Threshold {
		return false
	}
	n := g.over.Add(1)
	msg := fmt.Sprintf("%d UpdateRequests exist in %s, at the threshold of %d (--update-request-threshold): the %s UpdateRequest for %s %s was not created; "+
		"synchronized generate rules catch up at the background controller's next resync, other rules do not",
		pending, g.Namespace, g.Threshold, ur.Spec.Type, ur.Spec.Resource.Kind, objectKey(ur.Spec.Resource.Namespace, ur.Spec.Resource.Name))
	if n%100 == 1 {
		g.Log.Info("UpdateRequest threshold reached: "+msg, "notCreated", n)
	}
	if g.Recorder != nil {
		g.Recorder.Eventf(policiesv1.PolicyForKind(policiesv1.UpdateRequestPolicyKind(&ur.Spec), ur.Spec.Policy), nil, "Warning", ReasonThresholdReached, "CreateUpdateRequest", "%s", msg)
	}
	return true
}

func objectKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// create writes the UpdateRequest and its Pending state, retrying both
// with backoff. Above the threshold it writes nothing.
func (g *Generator) create(ctx context.Context, ur *kyvernov2.UpdateRequest) {
	if g.overThreshold(ur) {
		return
	}
	err := wait.ExponentialBackoffWithContext(ctx, createBackoff, func(ctx context.Context) (bool, error) {
		if ur.Name == "" {
			if err := g.Client.Create(ctx, ur); err != nil {
				g.Log.V(1).Info("creating UpdateRequest; retrying", "policy", ur.Spec.Policy, "error", err.Error())
				return false, nil
			}
		}
		ur.Status = kyvernov2.UpdateRequestStatus{State: kyvernov2.Pending}
		if err := g.Client.Status().Update(ctx, ur); err != nil {
			g.Log.V(1).Info("marking UpdateRequest Pending; retrying", "name", ur.Name, "error", err.Error())
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		g.failed.Add(1)
		g.Log.Error(err, "UpdateRequest not created; the policy's next resync catches up", "policy", ur.Spec.Policy,
			"type", ur.Spec.Type, "trigger", fmt.Sprintf("%s/%s", ur.Spec.Resource.Namespace, ur.Spec.Resource.Name), "name", ur.Name)
		return
	}
	g.created.Add(1)
}

func rawOf(obj map[string]any) runtime.RawExtension {
	if obj == nil {
		return runtime.RawExtension{}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return runtime.RawExtension{}
	}
	return runtime.RawExtension{Raw: b}
}

// triggerOf names an object for an UpdateRequest.
func triggerOf(obj map[string]any) kyvernov1.ResourceSpec {
	meta, _ := obj["metadata"].(map[string]any)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	return kyvernov1.ResourceSpec{
		APIVersion: str(obj, "apiVersion"), Kind: str(obj, "kind"),
		Namespace: str(meta, "namespace"), Name: str(meta, "name"), UID: types.UID(str(meta, "uid")),
	}
}

// ruleOf finds a rule of the policy by name.
func ruleOf(p kyvernov1.PolicyInterface, name string) *kyvernov1.Rule {
	if p == nil {
		return nil
	}
	rules := p.GetSpec().Rules
	for i := range rules {
		if rules[i].Name == name {
			return &rules[i]
		}
	}
	return nil
}

// anyBackgroundRules reports whether a set has a generate or
// mutate-existing rule (for which also, when given, holds), so that
// requests no such rule can concern cost nothing more. It reads only the
// sets' BackgroundPolicies, not every policy installed.
func anyBackgroundRules(sets []*engine.PolicySet, also func(kyvernov1.PolicyInterface, *kyvernov1.Rule) bool) bool {
	for _, s := range sets {
		if s == nil {
			continue
		}
		if also == nil && len(s.BackgroundPolicies()) > 0 {
			return true
		}
		for _, p := range s.BackgroundPolicies() {
			src := p.Source()
			rules := src.GetSpec().Rules
			for i := range rules {
				if (rules[i].HasGenerate() || rules[i].HasMutateExisting()) && (also == nil || also(src, &rules[i])) {
					return true
				}
			}
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
