package cpol

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/conditions"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/jmespath"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/variables"
	"github.com/charter-dev/charter/engine/wildcard"
)

// rule is a compiled rule: its source plus everything that can be worked
// out once (decoded patterns and conditions, which parts hold variables).
type rule struct {
	name string
	// passMessage is Kyverno's message for a passing validate rule.
	passMessage string
	// anyPassed are the messages for validate.anyPattern[i] passing
	// (anyPatternPassed).
	anyPassed []string
	src       *kyvernov1.Rule
	typ       review.RuleType
	match     *kyvernov1.MatchResources
	exclude   *kyvernov1.MatchResources
	// kindNames are the kind names (no group, version or subresource) the
	// match block can select, or nil when it can select any kind (a
	// wildcard in a kind, or a filter without kinds). A request for
	// another kind is turned away without walking the filters: a Pod
	// review meets every autogen rule of the policies that match Pods.
	kindNames []string
	context   []kyvernov1.ContextEntry
	// preconditions is nil when the rule has none.
	preconditions *ConditionBlock
	// handler evaluates the rule once it applies; nil for rule types this
	// engine does not evaluate yet (the rule then yields no response).
	validate *validateRule
	mutate   *mutateRule
	generate *generateRule
	verify   *verifyImagesRule
}

// ConditionBlock is an any/all block of conditions, decoded once.
type ConditionBlock struct {
	any, all []condition
	// raw is the block as JSON, for variable substitution.
	hasVars bool
}

type condition struct {
	key, value any
	// keyExpr and valueExpr are set when the operand is exactly one
	// variable ("{{ expr }}"): it is then resolved with one query, without
	// a substitution pass.
	keyExpr, valueExpr string
	operator           string // canonical spelling, e.g. "AnyIn"
	// op is the operator parsed once ("" when unknown, a compile fault):
	// conditions.Evaluate would look the name up, lower-cased, on every
	// evaluation.
	op      conditions.Operator
	message string
}

// singleVariable returns the expression of an operand that is exactly one
// variable and nothing else, e.g. "{{ request.object.spec }}".
func singleVariable(v any) string {
	s, ok := v.(string)
	if !ok || !strings.HasPrefix(s, "{{") || !strings.HasSuffix(s, "}}") {
		return ""
	}
	body := s[2 : len(s)-2]
	if strings.Contains(body, "{{") || strings.Contains(body, "}}") || strings.Contains(body, "$(") {
		return ""
	}
	exprs := variables.Find(s)
	if len(exprs) != 1 || strings.HasPrefix(strings.TrimSpace(body), "-") {
		return ""
	}
	return exprs[0]
}

// Compiler compiles and checks the rules of kyverno.io policies and
// Exceptions: what the compile of a ClusterPolicy, a Policy, a
// PolicyException and a cleanup policy's match and context share.
type Compiler struct {
	// jp compiles the JMESPath expressions the checks parse.
	JP *jmespath.Interpreter
	// cache is the caller's compile cache (WithCompileCache); nil
	// compiles uncached.
	Cache *celruntime.Cache
}

// compileRule compiles one rule. Generated (autogen) rules skip the checks
// that walk the whole rule: their variables and match blocks are derived
// from their source rule, which was checked already.
func (s *Compiler) compileRule(p *Policy, r *kyvernov1.Rule, path string, generated bool, f *fault.Collector) *rule {
	cr := &rule{name: r.Name, passMessage: fmt.Sprintf("validation rule '%s' passed.", r.Name), src: r, match: &r.MatchResources, exclude: r.ExcludeResources, context: r.Context}
	cr.kindNames = matchKindNames(&r.MatchResources)
	if r.Name == "" {
		f.Add(path+".name", "a rule needs a name")
	}
	if len(r.Name) > 63 {
		f.Add(path+".name", fmt.Sprintf("rule name %q is longer than 63 characters", r.Name))
	}
	var kinds []string
	if r.HasValidate() {
		kinds = append(kinds, "validate")
		cr.typ = review.TypeValidation
	}
	if r.HasMutate() {
		kinds = append(kinds, "mutate")
		cr.typ = review.TypeMutation
	}
	if r.HasGenerate() {
		kinds = append(kinds, "generate")
		cr.typ = review.TypeGeneration
	}
	if r.HasVerifyImages() {
		kinds = append(kinds, "verifyImages")
		cr.typ = review.TypeImageVerify
	}
	switch len(kinds) {
	case 0:
		f.Add(path, "a rule needs one of validate, mutate, generate or verifyImages")
	case 1:
	default:
		f.Add(path, fmt.Sprintf("a rule may have only one of validate, mutate, generate or verifyImages, found %s", strings.Join(kinds, ", ")))
	}
	s.CheckMatch(path+".match", &r.MatchResources, true, f)
	if r.ExcludeResources != nil {
		s.CheckMatch(path+".exclude", r.ExcludeResources, false, f)
	}
	if matchesByRoles(&r.MatchResources) || matchesByRoles(r.ExcludeResources) {
		p.readsRoles = true
	}

	if !generated {
		raw, err := ruleJSON(r)
		if err != nil {
			f.Add(path, "cannot encode rule: "+err.Error())
			return nil
		}
		s.CheckExpressions(raw, path, f)
		if !p.readsRoles && readsRoleVariables(raw) {
			p.readsRoles = true
		}
		checkRule(p, r, path, f)
		checkElementOutsideForeach(raw, path, f)
		switch {
		case p.spec.BackgroundProcessingEnabled():
			checkBackgroundVariables(raw, path, inBackground, f)
		case r.HasMutate() && p.spec.RuleMutateExistingOnPolicyUpdate(r):
			// A policy update has no requesting user either; with
			// background on, that check has said it already.
			checkBackgroundVariables(raw, path, onPolicyUpdate, f)
		}
	}
	s.CheckContext(r.Context, path+".context", f)
	if r.RawAnyAllConditions != nil {
		block, err := kyvernov1.ParseConditions(r.RawAnyAllConditions)
		if err != nil {
			f.Add(path+".preconditions", err.Error())
		} else {
			cr.preconditions = CompileConditions(block, path+".preconditions", f)
		}
	}
	if r.Validation != nil {
		cr.validate = s.compileValidate(r, path+".validate", f)
		for i := range cr.validate.anyPattern {
			cr.anyPassed = append(cr.anyPassed, anyPatternPassMessage(r.Name, i))
		}
	}
	if r.Mutation != nil {
		cr.mutate = s.compileMutate(r, path+".mutate", f)
	}
	if r.Generation != nil {
		cr.generate = s.compileGenerate(r, path+".generate", f)
	}
	checkNamespacedRule(p, r, path, f)
	if len(r.VerifyImages) > 0 || len(r.ImageExtractors) > 0 {
		vf := f
		if generated {
			// Autogen rules carry their source rule's entries, which were
			// checked already.
			vf = &fault.Collector{}
		}
		cr.verify = s.compileVerifyImages(p, r, path, vf)
	}
	return cr
}

func (s *Compiler) CheckMatch(path string, m *kyvernov1.MatchResources, required bool, f *fault.Collector) {
	if required && m.IsEmpty() {
		f.Add(path, "a rule needs match with at least one resource filter")
		return
	}
	inline := !m.UserInfo.IsEmpty() || !m.ResourceDescription.IsEmpty()
	if inline && (len(m.Any) > 0 || len(m.All) > 0) {
		f.Add(path, "use either any/all or the inline resources form, not both")
	}
	if len(m.Any) > 0 && len(m.All) > 0 {
		f.Add(path, "use either any or all, not both")
	}
	check := func(p string, d *kyvernov1.ResourceDescription) {
		for i, k := range d.Kinds {
			if k == "" {
				f.Add(fmt.Sprintf("%s.kinds[%d]", p, i), "empty kind")
			}
		}
		for _, sel := range []struct {
			name string
			ok   bool
		}{{"selector", d.Selector == nil || validMatchSelector(d.Selector)}, {"namespaceSelector", d.NamespaceSelector == nil || validMatchSelector(d.NamespaceSelector)}} {
			if !sel.ok {
				f.Add(p+"."+sel.name, "invalid label selector")
			}
		}
	}
	if inline {
		check(path+".resources", &m.ResourceDescription)
	}
	for i := range m.Any {
		check(fmt.Sprintf("%s.any[%d].resources", path, i), &m.Any[i].ResourceDescription)
	}
	for i := range m.All {
		check(fmt.Sprintf("%s.all[%d].resources", path, i), &m.All[i].ResourceDescription)
	}
}

// CheckExpressions compiles every JMESPath expression found in {{ }}
// variables anywhere in the rule, so a malformed one fails at compile time
// instead of at the first request. Expressions built from nested variables
// are only known at evaluation time and are not checked.
func (s *Compiler) CheckExpressions(raw map[string]any, path string, f *fault.Collector) {
	walkStrings(raw, path, func(p, str string) {
		for _, expr := range variables.Find(str) {
			if expr == "@" || strings.Contains(expr, "{{") {
				continue
			}
			if _, err := s.JP.Compile(expr); err != nil {
				f.Add(p, fmt.Sprintf("malformed JMESPath in variable {{%s}}: %v", expr, unwrapCompile(err)))
			}
		}
	})
}

func unwrapCompile(err error) error {
	if u, ok := err.(interface{ Unwrap() error }); ok && u.Unwrap() != nil {
		return u.Unwrap()
	}
	return err
}

func validSelector(sel *metav1.LabelSelector) bool {
	_, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil
}

// wildcardAsLabel turns the wildcards of a matchLabels key or value into a
// character labels allow, as Kyverno does before it builds the selector.
var wildcardAsLabel = strings.NewReplacer("*", "0", "?", "0")

// validMatchSelector checks a match or exclude selector, whose matchLabels
// may hold wildcards (match.Selector matches them against the labels): a
// selector is valid when it is once each wildcard stands for a character.
func validMatchSelector(sel *metav1.LabelSelector) bool {
	var labels map[string]string
	for k, v := range sel.MatchLabels {
		if wildcard.ContainsWildcard(k) || wildcard.ContainsWildcard(v) {
			labels = make(map[string]string, len(sel.MatchLabels))
			break
		}
	}
	if labels == nil {
		return validSelector(sel)
	}
	for k, v := range sel.MatchLabels {
		labels[wildcardAsLabel.Replace(k)] = wildcardAsLabel.Replace(v)
	}
	return validSelector(&metav1.LabelSelector{MatchLabels: labels, MatchExpressions: sel.MatchExpressions})
}

// matchesByRoles reports whether a match or exclude block selects by the
// requester's roles or cluster roles.
func matchesByRoles(m *kyvernov1.MatchResources) bool {
	filters, _ := m.Filters()
	for _, f := range filters {
		if len(f.Roles) > 0 || len(f.ClusterRoles) > 0 {
			return true
		}
	}
	return false
}

// roleVariables are the variables that need the requester's roles
// resolved.
var roleVariables = []string{"request.roles", "request.clusterRoles"}

// readsRoleVariables reports whether any string (or key) of a rule's JSON
// form mentions a role variable. It looks for the names anywhere, not only
// inside {{ }}, so that an expression written any way still gets its roles.
func readsRoleVariables(raw map[string]any) bool {
	found := false
	walkStrings(raw, "", func(_, str string) {
		for _, v := range roleVariables {
			if strings.Contains(str, v) {
				found = true
			}
		}
	})
	return found
}

// backgroundOnlyAdmission are variables that exist only in admission
// requests; a background scan has no user and cannot resolve them.
var backgroundOnlyAdmission = []string{"request.userInfo", "request.roles", "request.clusterRoles", "serviceAccountName", "serviceAccountNamespace"}

// userlessMode is a way a rule runs without a requesting user, as its
// faults name it.
type userlessMode struct{ in, off string }

var (
	// inBackground: background scans and generate-existing.
	inBackground = userlessMode{in: "in background mode", off: "set spec.background to false"}
	// onPolicyUpdate: mutate-existing when the policy is written
	// (Kyverno's ValidateOnPolicyUpdate: "only select variables are
	// allowed in on policy update").
	onPolicyUpdate = userlessMode{in: "on policy update", off: "set spec.mutateExistingOnPolicyUpdate to false"}
)

// checkBackgroundVariables rejects, for a rule that runs without a
// requesting user (background processing on, the default, or
// Mutate-existing on policy update), what depends on who sends the
// request: user variables, or roles, clusterRoles and subjects in
// match/exclude.
func checkBackgroundVariables(raw map[string]any, path string, mode userlessMode, f *fault.Collector) {
	walkStrings(raw, path, func(p, str string) {
		for _, expr := range variables.Find(str) {
			for _, v := range backgroundOnlyAdmission {
				if strings.HasPrefix(expr, v) || strings.Contains(expr, " "+v) || strings.Contains(expr, "("+v) {
					f.Add(p, fmt.Sprintf("variable {{%s}} is not available %s; %s", expr, mode.in, mode.off))
					return
				}
			}
		}
	})
	for _, block := range []string{"match", "exclude"} {
		m, _ := raw[block].(map[string]any)
		checkUserInfo(m, path+"."+block, mode, f)
		for _, list := range []string{"any", "all"} {
			entries, _ := m[list].([]any)
			for i, e := range entries {
				em, _ := e.(map[string]any)
				checkUserInfo(em, fmt.Sprintf("%s.%s.%s[%d]", path, block, list, i), mode, f)
			}
		}
	}
}

func checkUserInfo(m map[string]any, path string, mode userlessMode, f *fault.Collector) {
	for _, k := range []string{"roles", "clusterRoles", "subjects"} {
		if _, ok := m[k]; ok {
			f.Add(path+"."+k, fmt.Sprintf("user information cannot be matched %s; %s", mode.in, mode.off))
		}
	}
}

// checkElementOutsideForeach refuses, as Kyverno's
// ValidateElementInForEach does, a variable naming the foreach element
// ({{element...}}, {{elementIndex}}) where no foreach declares one: it
// could never resolve, so the rule would fail on every request.
func checkElementOutsideForeach(raw map[string]any, path string, f *fault.Collector) {
	walkStrings(raw, path, func(p, str string) {
		if strings.Contains(p, ".foreach[") {
			return
		}
		for _, expr := range variables.Find(str) {
			if strings.HasPrefix(strings.TrimSpace(expr), "element") {
				f.Add(p, fmt.Sprintf("variable {{%s}} present outside of foreach", strings.TrimSpace(expr)))
				return
			}
		}
	})
}

// walkStrings calls fn with the field path of every string (and map key)
// in v.
func walkStrings(v any, path string, fn func(path, s string)) {
	switch t := v.(type) {
	case string:
		fn(path, t)
	case map[string]any:
		for k, child := range t {
			p := fault.JoinPath(path, k)
			fn(p, k)
			walkStrings(child, p, fn)
		}
	case []any:
		for i, child := range t {
			walkStrings(child, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	}
}

func (s *Compiler) CheckContext(entries []kyvernov1.ContextEntry, path string, f *fault.Collector) {
	for i, e := range entries {
		p := fmt.Sprintf("%s[%d]", path, i)
		if e.Name == "" {
			f.Add(p+".name", "a context entry needs a name")
		}
		n := 0
		for _, set := range []bool{e.ConfigMap != nil, e.APICall != nil, e.ImageRegistry != nil, e.Variable != nil, e.GlobalReference != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			f.Add(p, "a context entry needs exactly one of configMap, apiCall, imageRegistry, variable or globalReference")
		}
		var expr, field string
		switch {
		case e.Variable != nil:
			expr, field = e.Variable.JMESPath, ".variable.jmesPath"
			if e.Variable.Value == nil && e.Variable.JMESPath == "" {
				f.Add(p+".variable", "a variable needs a value or a jmesPath")
			}
		case e.APICall != nil:
			expr, field = e.APICall.JMESPath, ".apiCall.jmesPath"
		case e.ImageRegistry != nil:
			expr, field = e.ImageRegistry.JMESPath, ".imageRegistry.jmesPath"
			checkRegistryCredentials(e.ImageRegistry.ImageRegistryCredentials, p+".imageRegistry.imageRegistryCredentials", f)
		case e.GlobalReference != nil:
			expr, field = e.GlobalReference.JMESPath, ".globalReference.jmesPath"
		}
		if expr != "" && !strings.Contains(expr, "{{") {
			if _, err := s.JP.Compile(expr); err != nil {
				f.Add(p+field, fmt.Sprintf("malformed JMESPath %q: %v", expr, unwrapCompile(err)))
			}
		}
	}
}

func CompileConditions(block *kyvernov1.AnyAllConditions, path string, f *fault.Collector) *ConditionBlock {
	if block == nil {
		return nil
	}
	out := &ConditionBlock{}
	compile := func(list []kyvernov1.Condition, p string) []condition {
		conds := make([]condition, 0, len(list))
		for i := range list {
			c := &list[i]
			cp := fmt.Sprintf("%s[%d]", p, i)
			op, ok := conditions.Parse(string(c.Operator))
			if !ok {
				f.Add(cp+".operator", fmt.Sprintf("unknown operator %q", c.Operator))
			}
			key, err := c.Key()
			if err != nil {
				f.Add(cp+".key", err.Error())
			}
			value, err := c.Value()
			if err != nil {
				f.Add(cp+".value", err.Error())
			}
			if variables.HasVariables(key) || variables.HasVariables(value) || variables.HasVariables(c.Message) {
				out.hasVars = true
			}
			conds = append(conds, condition{
				key: key, value: value, keyExpr: singleVariable(key), valueExpr: singleVariable(value),
				operator: string(op), op: op, message: c.Message,
			})
		}
		return conds
	}
	out.any = compile(block.AnyConditions, path+".any")
	out.all = compile(block.AllConditions, path+".all")
	if len(block.AnyConditions) == 0 && len(block.AllConditions) == 0 {
		return nil
	}
	return out
}

// anyPatternPassed is Kyverno's message for the rule's anyPattern[i]
// passing, made once per pattern of validate.anyPattern at compile time.
func (r *rule) anyPatternPassed(i int) string {
	if i < len(r.anyPassed) {
		return r.anyPassed[i]
	}
	return anyPatternPassMessage(r.name, i)
}

func anyPatternPassMessage(rule string, i int) string {
	return fmt.Sprintf("validation rule '%s' anyPattern[%d] passed.", rule, i)
}

// selects reports whether the rule applies to the request.
func (r *rule) selects(res *match.Resource) bool {
	if r.kindNames != nil && !slices.Contains(r.kindNames, res.Kind.Kind) {
		return false
	}
	return match.Selects(r.match, r.exclude, res)
}

// matchKindNames returns the kind names a match block can select, nil when
// it can select any kind. A filter's kinds must name the resource's kind
// for the filter to match, and a kind selector without wildcards in its
// kind part names exactly one kind (match.Kinds): so a kind outside the
// list fails every filter, whether the block takes any or all of them.
// A block without filters gets an empty, non-nil list: it selects nothing.
func matchKindNames(m *kyvernov1.MatchResources) []string {
	filters, _ := m.Filters()
	out := []string{}
	for i := range filters {
		kinds := filters[i].ResourceDescription.Kinds
		if len(kinds) == 0 {
			return nil
		}
		for _, k := range kinds {
			name := match.ParseKind(k).Kind
			if !exactPattern(name) {
				return nil
			}
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// exactPattern reports whether wildcard.Match(pattern, s) is pattern == s:
// beyond wildcards, wildcard.Match reads invalid UTF-8 as U+FFFD on both
// sides, so only a pattern without either compares as plain equality.
func exactPattern(pattern string) bool {
	return !wildcard.ContainsWildcard(pattern) && utf8.ValidString(pattern) && !strings.ContainsRune(pattern, utf8.RuneError)
}
