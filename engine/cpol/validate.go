package cpol

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/variables"
)

// validateRule is a compiled validate block.
type validateRule struct {
	message string
	deny    *ConditionBlock
	// pattern and anyPattern hold the decoded patterns; compiled is set when
	// they have no variables and could be compiled once.
	pattern    *patternSpec
	anyPattern []*patternSpec
	foreach    []*foreachValidation
	// podSecurity, cel, manifests and assert are evaluated by dedicated
	// handlers or reported as unsupported.
	podSecurity *kyvernov1.PodSecurity
	cel         *celRule
	manifests   *manifestsRule
	unsupported string
	// allowExisting is validate.allowExistingViolations (default true).
	allowExisting bool
	failureAction *kyvernov1.ValidationFailureAction
	overrides     []kyvernov1.ValidationFailureActionOverride
}

// shapeOnly reports whether the rule checks nothing but the object's shape
// (pattern, anyPattern or podSecurity, in the order run picks them), the
// rules Kyverno does not evaluate on DELETE.
func (v *validateRule) shapeOnly() bool {
	if v == nil || v.unsupported != "" || v.deny != nil {
		return false
	}
	return v.pattern != nil || len(v.anyPattern) > 0 || (len(v.foreach) == 0 && v.podSecurity != nil)
}

// patternSpec is one pattern: decoded JSON, plus its compiled form when it
// holds no variables.
type patternSpec struct {
	raw      any
	hasVars  bool
	compiled *compiledPattern
}

// foreachValidation is a compiled validate.foreach entry.
type foreachValidation struct {
	list          string
	elementScope  *bool
	context       []kyvernov1.ContextEntry
	preconditions *ConditionBlock
	pattern       *patternSpec
	anyPattern    []*patternSpec
	deny          *ConditionBlock
	nested        []*foreachValidation
}

func (s *Compiler) compileValidate(r *kyvernov1.Rule, path string, f *fault.Collector) *validateRule {
	v := r.Validation
	out := &validateRule{
		message:       v.Message,
		allowExisting: v.GetAllowExistingViolations(),
		failureAction: v.FailureAction,
		overrides:     v.FailureActionOverrides,
		podSecurity:   v.PodSecurity,
	}
	if v.FailureAction != nil && !v.FailureAction.IsValid() {
		f.Add(path+".failureAction", fmt.Sprintf("unknown action %q, want Audit or Enforce", *v.FailureAction))
	}
	n := 0
	if v.RawPattern != nil {
		n++
		out.pattern = s.compilePattern(v.RawPattern.Raw, path+".pattern", f)
	}
	if v.RawAnyPattern != nil {
		n++
		out.anyPattern = s.compileAnyPattern(v.RawAnyPattern.Raw, path+".anyPattern", f)
	}
	if v.Deny != nil {
		n++
		out.deny = s.compileDeny(v.Deny, path+".deny", f)
	}
	if len(v.ForEachValidation) > 0 {
		n++
		out.foreach = s.compileForeach(v.ForEachValidation, path+".foreach", f)
	}
	if v.PodSecurity != nil {
		n++
	}
	if v.CEL != nil {
		n++
		out.cel = s.compileCEL(r, v.CEL, strings.TrimSuffix(path, ".validate"), path, f)
	}
	if v.Manifests != nil {
		n++
		out.manifests = compileManifests(v.Manifests, path+".manifests", f)
	}
	if v.Assert != nil {
		n++
		out.unsupported = "validate.assert"
	}
	if n == 0 {
		f.Add(path, "validate needs one of pattern, anyPattern, deny, foreach, podSecurity, cel, manifests or assert")
	} else if n > 1 {
		f.Add(path, "validate may have only one of pattern, anyPattern, deny, foreach, podSecurity, cel, manifests or assert")
	}
	return out
}

func (s *Compiler) compilePattern(raw []byte, path string, f *fault.Collector) *patternSpec {
	var p any
	if err := json.Unmarshal(raw, &p); err != nil {
		f.Add(path, "invalid JSON: "+err.Error())
		return nil
	}
	return s.patternFrom(p, path, f)
}

func (s *Compiler) patternFrom(p any, path string, f *fault.Collector) *patternSpec {
	ps := &patternSpec{raw: p, hasVars: variables.HasVariables(p)}
	// A pattern is compiled once here to find its faults (unknown anchors,
	// empty arrays). One with variables is compiled again per evaluation,
	// after substitution.
	c, err := compilePatternTree(p)
	if err != nil {
		f.Add(patternFieldPath(path, err), patternFault(err))
		return nil
	}
	if !ps.hasVars {
		ps.compiled = c
	}
	return ps
}

func (s *Compiler) compileAnyPattern(raw []byte, path string, f *fault.Collector) []*patternSpec {
	var list []any
	if err := json.Unmarshal(raw, &list); err != nil {
		f.Add(path, "anyPattern must be a list of patterns")
		return nil
	}
	if len(list) == 0 {
		f.Add(path, "anyPattern needs at least one pattern")
	}
	out := make([]*patternSpec, 0, len(list))
	for i, p := range list {
		if ps := s.patternFrom(p, fmt.Sprintf("%s[%d]", path, i), f); ps != nil {
			out = append(out, ps)
		}
	}
	return out
}

func (s *Compiler) compileDeny(d *kyvernov1.Deny, path string, f *fault.Collector) *ConditionBlock {
	block, err := kyvernov1.ParseConditions(d.RawAnyAllConditions)
	if err != nil {
		f.Add(path+".conditions", err.Error())
		return nil
	}
	if block == nil {
		// deny without conditions always denies.
		return &ConditionBlock{}
	}
	cb := CompileConditions(block, path+".conditions", f)
	if cb == nil {
		cb = &ConditionBlock{}
	}
	return cb
}

func (s *Compiler) compileForeach(list []kyvernov1.ForEachValidation, path string, f *fault.Collector) []*foreachValidation {
	out := make([]*foreachValidation, 0, len(list))
	for i := range list {
		fe := &list[i]
		p := fmt.Sprintf("%s[%d]", path, i)
		c := &foreachValidation{list: fe.List, elementScope: fe.ElementScope, context: fe.Context}
		if fe.List == "" {
			f.Add(p+".list", "foreach needs a list expression")
		} else if !strings.Contains(fe.List, "{{") {
			if _, err := s.JP.Compile(fe.List); err != nil {
				f.Add(p+".list", fmt.Sprintf("malformed JMESPath %q: %v", fe.List, unwrapCompile(err)))
			}
		}
		s.CheckContext(fe.Context, p+".context", f)
		c.preconditions = CompileConditions(fe.AnyAllConditions, p+".preconditions", f)
		n := 0
		if fe.RawPattern != nil {
			n++
			c.pattern = s.compilePattern(fe.RawPattern.Raw, p+".pattern", f)
		}
		if fe.RawAnyPattern != nil {
			n++
			c.anyPattern = s.compileAnyPattern(fe.RawAnyPattern.Raw, p+".anyPattern", f)
		}
		if fe.Deny != nil {
			n++
			c.deny = s.compileDeny(fe.Deny, p+".deny", f)
		}
		if fe.ForEachValidation != nil {
			n++
			var nested []kyvernov1.ForEachValidation
			if err := json.Unmarshal(fe.ForEachValidation.Raw, &nested); err != nil {
				f.Add(p+".foreach", "invalid nested foreach: "+err.Error())
			} else {
				c.nested = s.compileForeach(nested, p+".foreach", f)
			}
		}
		if n != 1 {
			f.Add(p, "foreach needs exactly one of pattern, anyPattern, deny or foreach")
		}
		out = append(out, c)
	}
	return out
}

// validator evaluates a validate rule (or one foreach level of it) against
// a resource in a document.
type validator struct {
	ev   *evaluation
	rule *rule
	v    *validateRule
	// exceptions are PolicyExceptions that exempt Pod Security controls.
	exceptions []*Exception
}

// validateResource runs the rule's validation against resource, the new
// object (or the old one for the allowExistingViolations check).
func (vd *validator) run(ctx context.Context, doc *jsoncontext.Document, resource map[string]any) (review.Outcome, bool) {
	v := vd.v
	switch {
	case v.unsupported != "":
		return review.Errorf("%s is not supported by charter yet; rule %s was not evaluated", v.unsupported, vd.rule.name), true
	case v.deny != nil:
		return vd.deny(doc, v.deny, v.message), true
	case v.pattern != nil:
		return vd.pattern(doc, resource, v.pattern, v.message), true
	case len(v.anyPattern) > 0:
		return vd.anyPattern(doc, resource, v.anyPattern, v.message), true
	case len(v.foreach) > 0:
		return vd.foreach(ctx, doc, v.foreach, resource, 0)
	case v.podSecurity != nil:
		return vd.podSecurity(v.podSecurity, resource), true
	case v.cel != nil:
		return vd.cel(ctx, v.cel, false), true
	case v.manifests != nil:
		return v.manifests.verify(vd.rule.name, resource), true
	}
	return review.Errorf("rule %s has nothing to validate", vd.rule.name), true
}

func (vd *validator) deny(doc *jsoncontext.Document, block *ConditionBlock, message string) review.Outcome {
	denied, condMsg, err := vd.ev.conditions(doc, block)
	if err != nil {
		return review.Errored("failed to check deny conditions", err)
	}
	if !denied {
		return review.Pass(vd.rule.passMessage)
	}
	var msg string
	if message == "" {
		msg = "validation error: rule " + vd.rule.name + " failed"
	} else {
		m, err := vd.ev.substituteMessage(doc, message)
		if err != nil {
			return review.Errored("failed to substitute variables in deny message", err)
		}
		msg = m
	}
	if condMsg != "" {
		msg += "; " + condMsg
	}
	return review.Fail(msg)
}

func (vd *validator) pattern(doc *jsoncontext.Document, resource map[string]any, ps *patternSpec, message string) review.Outcome {
	c, err := vd.ev.resolvePattern(doc, ps, "/validate/pattern")
	if err != nil {
		return review.Errored("variable substitution failed", err)
	}
	res := c.validate(resource)
	switch res.kind {
	case patternPass:
		return review.Pass(vd.rule.passMessage)
	case patternSkip:
		return review.Skip(res.msg)
	}
	msg, err := vd.ev.substituteMessage(doc, message)
	if err != nil {
		return review.Errored("failed to substitute variables in message", err)
	}
	if res.kind == patternInvalid {
		// Kyverno keeps the rule's own message in front of the execution
		// error so that the author's explanation is not lost.
		return review.Errorf("%s", withRuleMessage(msg, fmt.Sprintf("rule %s execution error: %s", vd.rule.name, res.msg)))
	}
	return review.Fail(patternFailMessage(vd.rule.name, msg, res.path))
}

// patternFailMessage is Kyverno's message for a failed pattern,
// withRuleMessage(message, "rule <rule> failed at path <path>") made in
// one concatenation: it is made for every failing pattern.
func patternFailMessage(rule, message, path string) string {
	if message == "" {
		return "validation error: rule " + rule + " failed at path " + path
	}
	return "validation error: " + message + ruleMessageSeparator(message) + "rule " + rule + " failed at path " + path
}

// withRuleMessage builds Kyverno's "validation error: <message>. <detail>"
// text, without doubling a full stop the author already wrote.
func withRuleMessage(message, detail string) string {
	if message == "" {
		return "validation error: " + detail
	}
	return "validation error: " + message + ruleMessageSeparator(message) + detail
}

// ruleMessageSeparator is what goes between a rule's own message and the
// detail: a space after a full stop the author wrote, else ". ".
func ruleMessageSeparator(message string) string {
	if strings.HasSuffix(message, ".") {
		return " "
	}
	return ". "
}

func (vd *validator) anyPattern(doc *jsoncontext.Document, resource map[string]any, list []*patternSpec, message string) review.Outcome {
	// Room on the stack for the messages of the usual few patterns.
	var failBuf, skipBuf [4]string
	failures, skips := failBuf[:0], skipBuf[:0]
	for i, ps := range list {
		// A pattern without variables is compiled already; only one with
		// them needs its path, for substitution errors.
		c := ps.compiled
		if c == nil {
			var err error
			if c, err = vd.ev.resolvePattern(doc, ps, fmt.Sprintf("/validate/anyPattern/%d", i)); err != nil {
				return review.Errored("failed to substitute variables", err)
			}
		}
		res := c.validate(resource)
		switch res.kind {
		case patternPass:
			return review.Pass(vd.rule.anyPatternPassed(i))
		case patternSkip:
			skips = append(skips, fmt.Sprintf("rule %s[%d] skipped: %s", vd.rule.name, i, res.msg))
		case patternInvalid:
			failures = append(failures, fmt.Sprintf("rule %s[%d] failed: %s", vd.rule.name, i, res.msg))
		default:
			failures = append(failures, "rule "+vd.rule.name+"["+strconv.Itoa(i)+"] failed at path "+res.path)
		}
	}
	if len(failures) == 0 && len(skips) > 0 {
		return review.Skip(strings.Join(skips, " "))
	}
	msg, err := vd.ev.substituteMessage(doc, message)
	if err != nil {
		return review.Errored("failed to substitute variables in message", err)
	}
	return review.Fail(withRuleMessage(msg, strings.Join(failures, " ")))
}
