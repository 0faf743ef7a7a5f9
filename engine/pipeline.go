package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/conditions"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/variables"
)

// requestView is a Request with everything derived from it worked out once
// and shared by every policy and rule (review.View), plus what the
// ClusterPolicy pipeline keeps of it: the base context document and the
// rule responses.
type requestView struct {
	review.View
	base *jsoncontext.Document

	// rules backs the rule responses of every policy evaluated over this
	// view (rulesUpFront makes room for them).
	rules review.RuleBuffer
	// elementDocs are the documents of foreach elements, one per
	// nesting depth (elementDocument).
	elementDocs []*jsoncontext.Document
}

func newRequestView(ctx context.Context, req *review.Request, cfg *review.Options) *requestView {
	in := new(requestView)
	in.Init(ctx, req, cfg)
	return in
}

// sameBuckets reports whether two views of a request read the same
// buckets of the index: the namespace they are matched in and their scope
// agree.
func sameBuckets(a, b *requestView) bool {
	return a.Scope == b.Scope && match.NamespaceOf(&a.Res) == match.NamespaceOf(&b.Res)
}

// oldInOtherNamespace reports whether the request's old object is matched
// in another namespace than its new one, which only a request that names
// neither can say (as `charter test` may give one): Generate matches the
// old object too, so it then reads the candidates of every namespace.
func (in *requestView) oldInOtherNamespace() bool {
	if in.Req.Object == nil || in.Req.OldObject == nil {
		return false
	}
	meta, _ := in.Req.OldObject["metadata"].(map[string]any)
	old := match.Resource{Kind: in.GVK}
	old.Name, old.Namespace = review.RequestIdentity(in.Req, meta)
	return match.NamespaceOf(&old) != match.NamespaceOf(&in.Res)
}

// document returns the base context document of the request, building it
// on first use: rules without variables never pay for it.
func (in *requestView) document(set *PolicySet) *jsoncontext.Document {
	if in.base == nil {
		var kind map[string]any
		if in.GVK.Kind != "" {
			kind = map[string]any{"group": in.GVK.Group, "version": in.GVK.Version, "kind": in.GVK.Kind}
		}
		in.base = jsoncontext.NewRequest(set.jp, jsoncontext.RequestInfo{
			Operation:    string(in.Op),
			Object:       in.Req.Object,
			OldObject:    in.Req.OldObject,
			Namespace:    in.Res.Namespace,
			Name:         in.Res.Name,
			Kind:         kind,
			SubResource:  in.Req.SubResource,
			UserInfo:     in.Req.UserInfo,
			Roles:        in.Req.Roles,
			ClusterRoles: in.Req.ClusterRoles,
			DryRun:       in.Req.DryRun,
		})
	}
	return in.base
}

// evaluation is the state of evaluating one policy against one request.
type evaluation struct {
	set    *PolicySet
	policy *Policy
	// namespace confines the context reads of an evaluation without a
	// policy (a namespaced CleanupPolicy's run); see readScope.
	namespace string
	in        *requestView
	cfg       *review.Options
	object    map[string]any
	// doc is the policy's document: the request's base document plus the
	// values pinned for this policy and resource; built on first use.
	doc *jsoncontext.Document
	// values are the variables pinned for this policy and resource.
	values       map[string]any
	valuesLoaded bool
}

func (ev *evaluation) document() *jsoncontext.Document {
	if ev.doc == nil {
		ev.doc = ev.in.document(ev.set)
		if vals := ev.resourceValues(); len(vals) > 0 {
			ev.doc = ev.doc.Child()
			setAll(ev.doc, vals)
		}
	}
	return ev.doc
}

// resourceValues returns the variables the Values hook pins for this
// policy and resource; they also stand in for context entries of the same
// name.
func (ev *evaluation) resourceValues() map[string]any {
	if !ev.valuesLoaded {
		ev.valuesLoaded = true
		if ev.cfg.Values != nil {
			ev.values = ev.cfg.Values.Variables(ev.policy.source, ev.in.ResourceRef())
		}
	}
	return ev.values
}

// setAll stores values by dotted key, in key order so the result does not
// depend on map iteration.
func setAll(doc *jsoncontext.Document, vals map[string]any) {
	// Sized up front: this runs per request.
	keys := slices.AppendSeq(make([]string, 0, len(vals)), maps.Keys(vals))
	slices.Sort(keys)
	for _, k := range keys {
		doc.Set(k, vals[k])
	}
}

// validateResponses is the most validate responses p gives a request for
// kind ("" for any kind): one per validate or verifyImages rule that can
// select it, one for a ValidatingPolicy or an ImageValidatingPolicy.
func validateResponses(p *Policy, kind string) int {
	if p.vpol != nil || p.ivpol != nil || p.mpol != nil {
		return 1
	}
	return p.cpol.validateResponses(kind)
}

// validateResponses is how many validate and verifyImages rules can select
// a resource of the kind ("" for any kind); none for a policy of another
// kind (nil).
func (cp *clusterPolicy) validateResponses(kind string) int {
	n := 0
	for _, r := range cp.ruleList() {
		if r.typ != review.TypeValidation && r.typ != review.TypeImageVerify {
			continue
		}
		if kind == "" || r.kindNames == nil || slices.Contains(r.kindNames, kind) {
			n++
		}
	}
	return n
}

// policyKinds lists the kind names the rules' match blocks select, "*" when
// any kind can match (a wildcard kind, or a filter without kinds).
func policyKinds(rules []*rule) []string {
	seen := map[string]bool{}
	var out []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, r := range rules {
		filters, _ := r.match.Filters()
		for _, f := range filters {
			if len(f.ResourceDescription.Kinds) == 0 {
				add("*")
			}
			for _, k := range f.ResourceDescription.Kinds {
				if k == "*" {
					add("*")
					continue
				}
				add(match.ParseKind(k).Kind)
			}
		}
	}
	return out
}

// validate evaluates the policy's validate rules.
func (p *Policy) validate(ctx context.Context, in *requestView, cfg *review.Options) review.PolicyResponse {
	resp := review.PolicyResponse{Policy: p.source, Key: p.key}
	if !p.scopes(in) {
		return resp
	}
	if p.vpol != nil {
		return p.validateCEL(ctx, in, cfg)
	}
	if p.ivpol != nil {
		return p.validateImages(ctx, in, cfg)
	}
	if p.mpol != nil {
		if !cfg.MutationScan {
			return resp
		}
		return review.PolicyResponse{Policy: p.source, Key: p.key, Rules: p.mpol.Scan(ctx, &in.View, cfg, p.owner())}
	}
	ev := &evaluation{set: p.set, policy: p, in: in, cfg: cfg, object: in.Object}
	start := in.rules.Len()
	for _, r := range p.cpol.ruleList() {
		if r.typ != review.TypeValidation && r.typ != review.TypeImageVerify {
			continue
		}
		rr, ok := ev.rule(ctx, r)
		if !ok {
			continue
		}
		start = in.rules.Append(start, rr)
		if p.cpol.spec.GetApplyRules() == kyvernov1.ApplyOne && rr.Status != review.StatusSkip {
			break
		}
	}
	resp.Rules = in.rules.Window(start)
	return resp
}

// rule runs the shared pipeline for one rule: match/exclude → context →
// preconditions → exceptions → handler. It reports false when the rule
// does not apply and so produces no response.
func (ev *evaluation) rule(ctx context.Context, r *rule) (review.RuleResponse, bool) {
	if !r.selects(&ev.in.Res) {
		return review.RuleResponse{}, false
	}
	rr := review.RuleResponse{Name: r.name, Type: r.typ, Properties: r.src.ReportProperties}
	switch r.typ {
	case review.TypeValidation:
		rr.Action = ev.action(r)
	case review.TypeImageVerify:
		rr.Action = ev.imageAction(r)
	}
	o, ok := ev.ruleOutcome(ctx, r, &rr)
	if !ok {
		return review.RuleResponse{}, false
	}
	rr.Status, rr.Message = o.Status, o.Message
	rr.Warnings = o.Warnings
	if len(o.Exceptions) > 0 {
		rr.Exceptions = o.Exceptions
	}
	if len(o.Props) > 0 {
		props := make(map[string]string, len(rr.Properties)+len(o.Props))
		for k, v := range rr.Properties {
			props[k] = v
		}
		for k, v := range o.Props {
			props[k] = v
		}
		rr.Properties = props
	}
	if rr.Status == review.StatusFail && ev.policy.unscored {
		rr.Status = review.StatusWarn
	}
	return rr, true
}

// prelude runs the steps every rule type shares once the rule matched:
// context entries, preconditions and exceptions. It returns the rule's
// document and the exceptions that apply, or the final outcome when the
// rule stops there (context error, preconditions not met, excepted). When
// the preconditions do not hold, the document comes back with the outcome
// (see WithCLIGeneration).
func (ev *evaluation) prelude(ctx context.Context, r *rule, rr *review.RuleResponse) (*jsoncontext.Document, []*exception, *review.Outcome) {
	stop := func(o review.Outcome) (*jsoncontext.Document, []*exception, *review.Outcome) { return nil, nil, &o }
	base, err := ev.imagesDocument(ev.document(), r)
	if err != nil {
		return stop(review.Errored(extractorsFailed, err))
	}
	doc, final := ev.ruleDocument(ctx, base, r)
	if final != nil {
		if final.Status == review.StatusSkip {
			return doc, nil, final
		}
		return stop(*final)
	}
	exceptions, err := ev.exceptions(doc, r)
	if err != nil {
		return stop(review.Errored("failed to evaluate policy exceptions", err))
	}
	if len(exceptions) > 0 && !exceptionsArePodSecurity(exceptions, r) {
		rr.Exceptions = exceptionSources(exceptions)
		return stop(review.Skip("rule is skipped due to policy exceptions" + exceptionKeys(exceptions)))
	}
	return doc, exceptions, nil
}

// ruleDocument loads the rule's context over base and evaluates its
// preconditions. It returns the rule's document and, when the rule stops
// there, its outcome: an error when the context or the preconditions
// cannot be evaluated, a skip (with the document) when the preconditions
// do not hold.
func (ev *evaluation) ruleDocument(ctx context.Context, base *jsoncontext.Document, r *rule) (*jsoncontext.Document, *review.Outcome) {
	doc := base
	if len(r.context) > 0 || ev.ruleValues(r) != nil {
		doc = doc.Child()
		if vals := ev.ruleValues(r); vals != nil {
			setAll(doc, vals)
		}
		if err := ev.loadContext(ctx, doc, r, r.context); err != nil {
			o := review.Errored("failed to load context", err)
			return nil, &o
		}
	}
	if r.preconditions != nil {
		ok, _, err := ev.conditions(doc, r.preconditions)
		if err != nil {
			o := review.Errored("failed to evaluate preconditions", err)
			return nil, &o
		}
		if !ok {
			o := review.Skip("preconditions not met")
			return doc, &o
		}
	}
	return doc, nil
}

func (ev *evaluation) ruleOutcome(ctx context.Context, r *rule, rr *review.RuleResponse) (review.Outcome, bool) {
	doc, exceptions, final := ev.prelude(ctx, r, rr)
	if final != nil {
		return *final, true
	}
	if r.typ == review.TypeImageVerify {
		if ev.in.Op == kyvernov1.Delete || ev.in.Req.Object == nil || r.verify == nil {
			return review.Outcome{}, false
		}
		o, warnings, has := imageRuleOutcome(ev.verifyImages(ctx, doc, r, ev.in.Req.Object, false), true)
		o.Warnings = warnings
		return o, has
	}
	if ev.in.Op == kyvernov1.Delete && r.validate.shapeOnly() {
		// Kyverno checks the shape of an object that is being deleted
		// against no pattern: deleting a non-compliant object is no
		// violation, so these rules give no result on DELETE.
		return review.Outcome{}, false
	}
	vd := &validator{ev: ev, rule: r, v: r.validate, exceptions: exceptions}
	o, has := vd.run(ctx, doc, ev.object)
	if !has {
		return review.Outcome{}, false
	}
	if o.Status == review.StatusFail && rr.Action == review.Enforce && ev.in.Op == kyvernov1.Update &&
		r.validate.allowExisting && ev.in.Req.OldObject != nil && ev.in.Req.Object != nil {
		// A violation the old object already had is let through. The old
		// object is evaluated as Kyverno does: as the object of a CREATE.
		old := &validator{ev: ev, rule: r, v: r.validate, exceptions: exceptions}
		var prior review.Outcome
		ok := true
		if c := r.validate.cel; c != nil {
			// CEL reads the request from its own variables, not the
			// document.
			prior = old.cel(ctx, c, true)
		} else {
			// The whole rule is evaluated for the old object, context
			// and preconditions included: a rule whose preconditions do
			// not hold for it had nothing to let through.
			oldBase := ev.document().Child()
			oldBase.Set("request.object", ev.in.Req.OldObject)
			oldBase.Set("request.oldObject", nil)
			oldBase.Set("request.operation", string(kyvernov1.Create))
			oldDoc, final := ev.ruleDocument(ctx, oldBase, r)
			if final != nil {
				prior = *final
			} else {
				prior, ok = old.run(ctx, oldDoc, ev.in.Req.OldObject)
			}
		}
		if ok && prior.Status == review.StatusFail {
			return review.Skip("skipping modified resource as validation results have not changed"), true
		}
	}
	return o, true
}

func (ev *evaluation) ruleValues(r *rule) map[string]any {
	if ev.cfg.Values == nil {
		return nil
	}
	return ev.cfg.Values.ContextEntries(ev.policy.source, r.name)
}

// substitute replaces the variables in v. path is the JSON pointer of v
// within the rule ("/validate/pattern"), used for {{@}} and error paths.
func (ev *evaluation) substitute(doc *jsoncontext.Document, v any, path string, opts ...variables.Option) (any, error) {
	if path != "" {
		opts = append(opts, variables.WithPath(path))
	}
	return variables.Substitute(v, doc, opts...)
}

func (ev *evaluation) substituteMessage(doc *jsoncontext.Document, msg string) (string, error) {
	if !variables.HasVariables(msg) {
		return msg, nil
	}
	out, err := ev.substitute(doc, msg, "/validate/message")
	if err != nil {
		return "", err
	}
	if s, ok := out.(string); ok {
		return s, nil
	}
	return fmt.Sprint(out), nil
}

// resolvePattern returns the compiled pattern, substituting variables first
// when it has any.
func (ev *evaluation) resolvePattern(doc *jsoncontext.Document, ps *patternSpec, path string) (*compiledPattern, error) {
	if ps.compiled != nil {
		return ps.compiled, nil
	}
	raw, err := ev.substitute(doc, ps.raw, path)
	if err != nil {
		return nil, err
	}
	return compilePatternTree(raw)
}

// conditions evaluates an any/all block: any (OR) AND all (AND), a missing
// block counting as true. It returns the messages of the conditions that
// decided the result. A variable that cannot be resolved is an error naming
// it, in preconditions too: Kyverno's preconditions resolver has returned
// the error since 2022 (its comment still says it substitutes "").
func (ev *evaluation) conditions(doc *jsoncontext.Document, block *conditionBlock) (bool, string, error) {
	if block == nil {
		return true, "", nil
	}
	operand := func(v any, expr string) (any, error) {
		if expr != "" {
			out, err := doc.Query(expr)
			if err == nil {
				return out, nil
			}
			return nil, &variables.Error{Variable: "{{" + expr + "}}", Path: "/", Err: err}
		}
		if block.hasVars {
			return ev.substitute(doc, v, "")
		}
		return v, nil
	}
	eval := func(c *condition) (bool, error) {
		key, err := operand(c.key, c.keyExpr)
		if err != nil {
			return false, err
		}
		value, err := operand(c.value, c.valueExpr)
		if err != nil {
			return false, err
		}
		if c.op == "" {
			return false, &conditions.UnknownOperatorError{Name: c.operator}
		}
		return c.op.Evaluate(key, value), nil
	}
	var msgs []string
	if len(block.any) > 0 {
		anyTrue := false
		var failed []string
		for i := range block.any {
			ok, err := eval(&block.any[i])
			if err != nil {
				return false, "", err
			}
			if ok {
				anyTrue = true
				if m := block.any[i].message; m != "" {
					msgs = append(msgs, m)
				}
				break
			}
			if m := block.any[i].message; m != "" {
				failed = append(failed, m)
			}
		}
		if !anyTrue {
			return false, strings.Join(failed, "; "), nil
		}
	}
	for i := range block.all {
		ok, err := eval(&block.all[i])
		if err != nil {
			return false, "", err
		}
		if !ok {
			return false, block.all[i].message, nil
		}
		if m := block.all[i].message; m != "" {
			msgs = append(msgs, m)
		}
	}
	return true, strings.Join(msgs, "; "), nil
}

// validateCEL evaluates a ValidatingPolicy, its one response kept in the
// review's backing array of rule responses.
func (p *Policy) validateCEL(ctx context.Context, in *requestView, cfg *review.Options) review.PolicyResponse {
	rr, ok := p.vpol.Validate(ctx, &in.View, cfg, p.owner())
	return p.respondOnce(in, rr, ok)
}

// respondOnce is the policy's response of one rule response rr, kept in
// the review's backing array of rule responses; with ok false, no rule.
func (p *Policy) respondOnce(in *requestView, rr review.RuleResponse, ok bool) review.PolicyResponse {
	resp := review.PolicyResponse{Policy: p.source, Key: p.key}
	if !ok {
		return resp
	}
	resp.Rules = in.rules.One(rr)
	return resp
}
