package cpol

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/conditions"
	"github.com/charter-dev/charter/engine/jmespath"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/variables"
)

// The rule pipeline of a kyverno.io ClusterPolicy or Policy: match →
// context → preconditions → exceptions → handler (validate, mutate,
// Generate, verifyImages), evaluated over a review.View with what the
// rules share over it (cpolRequest) and across the set (kyvernoEnv).

// Namespaces returns the namespaces the rules can match, when every rule
// matches only namespaces named exactly (policyNamespaces).
func (cp *Policy) Namespaces() ([]string, bool) {
	if len(cp.rules) == 0 {
		return nil, false
	}
	var out []string
	for _, r := range cp.rules {
		namespaces, ok := matchNamespaces(r.match)
		if !ok {
			return nil, false
		}
		for _, ns := range namespaces {
			if !slices.Contains(out, ns) {
				out = append(out, ns)
			}
		}
	}
	return out, true
}

// matchNamespaces returns the namespaces a match block can select when it
// names them all exactly (match.Filter compares match.NamespaceOf against
// a filter's namespaces): under any, every filter must name its own;
// under all, one filter naming them is enough, since every filter must
// hold. A block without filters selects nothing, but is left to the
// rules (false), as are names with wildcards.
func matchNamespaces(m *kyvernov1.MatchResources) ([]string, bool) {
	if m == nil {
		return nil, false
	}
	filters, all := m.Filters()
	if len(filters) == 0 {
		return nil, false
	}
	var out []string
	for i := range filters {
		namespaces := filters[i].ResourceDescription.Namespaces
		exact := len(namespaces) > 0 && !slices.ContainsFunc(namespaces, func(ns string) bool { return !exactPattern(ns) })
		switch {
		case all && exact:
			return namespaces, true
		case all:
		case !exact:
			return nil, false
		default:
			out = append(out, namespaces...)
		}
	}
	if all {
		return nil, false
	}
	return out, true
}

func IsBackgroundRule(r kyvernov1.Rule) bool { return r.HasGenerate() || r.HasMutateExisting() }

// ruleJSON returns the plain JSON form of a rule, for walks that check every
// string in it.
func ruleJSON(r *kyvernov1.Rule) (map[string]any, error) { return ToJSONMap(r) }

// ToJSONMap returns the plain JSON form of v.
func ToJSONMap(v any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// Request is what the kyverno.io rules evaluated over one view of a
// request share: the base context document and the documents of foreach
// elements. The engine root's view of a request holds it by value, so it costs no allocation of
// its own; a view of another object (withObject) starts a new one.
type Request struct {
	base *jsoncontext.Document
	// elementDocs are the documents of foreach elements, one per
	// nesting depth (elementDocument).
	elementDocs []*jsoncontext.Document
}

// document returns the base context document of the request in view,
// building it on first use: rules without variables never pay for it.
func (st *Request) document(in *review.View, jp *jmespath.Interpreter) *jsoncontext.Document {
	if st.base == nil {
		var kind map[string]any
		if in.GVK.Kind != "" {
			kind = map[string]any{"group": in.GVK.Group, "version": in.GVK.Version, "kind": in.GVK.Kind}
		}
		st.base = jsoncontext.NewRequest(jp, jsoncontext.RequestInfo{
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
	return st.base
}

// Env is what the evaluations of every kyverno.io policy of a set
// share: the JMESPath interpreter and the kyverno.io PolicyExceptions.
type Env struct {
	JP         *jmespath.Interpreter
	Exceptions []*Exception
}

// evaluation is the state of evaluating one policy against one request.
type evaluation struct {
	env    *Env
	policy *Policy
	// namespace confines the context reads of an evaluation without a
	// policy (a namespaced CleanupPolicy's run); see readScope.
	namespace string
	in        *review.View
	// st is what the rules evaluated over in share (the base document).
	st     *Request
	cfg    *review.Options
	object map[string]any
	// doc is the policy's document: the request's base document plus the
	// values pinned for this policy and resource; built on first use.
	doc *jsoncontext.Document
	// values are the variables pinned for this policy and resource.
	values       map[string]any
	valuesLoaded bool
}

func (ev *evaluation) document() *jsoncontext.Document {
	if ev.doc == nil {
		ev.doc = ev.st.document(ev.in, ev.env.JP)
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

// ValidateResponses is how many validate and verifyImages rules can select
// a resource of the kind ("" for any kind); none for a policy of another
// kind (nil).
func (cp *Policy) ValidateResponses(kind string) int {
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
func (ev *evaluation) prelude(ctx context.Context, r *rule, rr *review.RuleResponse) (*jsoncontext.Document, []*Exception, *review.Outcome) {
	stop := func(o review.Outcome) (*jsoncontext.Document, []*Exception, *review.Outcome) { return nil, nil, &o }
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

// Conditions evaluates an any/all block: any (OR) AND all (AND), a missing
// block counting as true. It returns the messages of the conditions that
// decided the result. A variable that cannot be resolved is an error naming
// it, in preconditions too: Kyverno's preconditions resolver has returned
// the error since 2022 (its comment still says it substitutes "").
func (ev *evaluation) conditions(doc *jsoncontext.Document, block *ConditionBlock) (bool, string, error) {
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

// Validate evaluates the policy's validate and verifyImages rules over the
// request in view (the engine's PolicySet.Validate): their responses, filed in buf.
func (cp *Policy) Validate(ctx context.Context, in *review.View, st *Request, env *Env, cfg *review.Options, buf *review.RuleBuffer) []review.RuleResponse {
	ev := &evaluation{env: env, policy: cp, in: in, st: st, cfg: cfg, object: in.Object}
	start := buf.Len()
	for _, r := range cp.ruleList() {
		if r.typ != review.TypeValidation && r.typ != review.TypeImageVerify {
			continue
		}
		rr, ok := ev.rule(ctx, r)
		if !ok {
			continue
		}
		start = buf.Append(start, rr)
		if cp.spec.GetApplyRules() == kyvernov1.ApplyOne && rr.Status != review.StatusSkip {
			break
		}
	}
	return buf.Window(start)
}
