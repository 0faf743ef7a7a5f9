package vpol

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/internal/cachetest"
	"github.com/charter-dev/charter/engine/internal/testpods"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/internal/corpus"
)

// compiledSet is ValidatingPolicies compiled on their own, in order.
type compiledSet struct {
	srcs     []*policiesv1.ValidatingPolicy
	policies []*Policy
}

// compileAll compiles each policy with Compile, known by its name.
func compileAll(t testing.TB, srcs ...*policiesv1.ValidatingPolicy) *compiledSet {
	t.Helper()
	return compileWith(t, nil, srcs...)
}

// compileWith is compileAll with a compile cache.
func compileWith(t testing.TB, cache *celruntime.Cache, srcs ...*policiesv1.ValidatingPolicy) *compiledSet {
	t.Helper()
	set := &compiledSet{srcs: srcs}
	for _, src := range srcs {
		vp, errs := Compile(src, src.GetName(), cache)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		set.policies = append(set.policies, vp)
	}
	return set
}

// lookup returns the compiled policy named name.
func (s *compiledSet) lookup(name string) *Policy {
	for i, src := range s.srcs {
		if src.GetName() == name {
			return s.policies[i]
		}
	}
	return nil
}

// validate evaluates every policy of the set on req as the engine's root
// does, one after another on one view of the request: the responses of
// the policies that select it, by policy name.
func (s *compiledSet) validate(req *review.Request) map[string]review.RuleResponse {
	ctx, opts := context.Background(), &review.Options{}
	in := review.NewView(ctx, req, opts)
	out := map[string]review.RuleResponse{}
	for i, vp := range s.policies {
		if rr, ok := vp.Validate(ctx, in, opts, celruntime.Owner{Source: s.srcs[i]}); ok {
			out[s.srcs[i].GetName()] = rr
		}
	}
	return out
}

// untracked reports whether v runs without cost tracking on req.
func untracked(req *review.Request, v *variant) bool {
	ctx, opts := context.Background(), &review.Options{}
	return evaluationOf(ctx, review.NewView(ctx, req, opts), opts, v, "").eval.Untracked
}

// BenchmarkCompileVPolWithVariables compiles a ValidatingPolicy with
// variables from scratch (no cache), as the CLI does for each policy of a
// suite: the cost of its CEL environment and type checks.
func BenchmarkCompileVPolWithVariables(b *testing.B) {
	pods := admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	spec := &policiesv1.ValidatingPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{pods}},
		Variables: []admissionregistrationv1.Variable{
			{Name: "containers", Expression: "object.spec.containers + object.spec.?initContainers.orValue([])"},
			{Name: "images", Expression: "variables.containers.map(c, c.image)"},
		},
		Validations: []admissionregistrationv1.Validation{
			{Expression: "variables.images.all(i, !i.endsWith(':latest'))", Message: "no latest tag"},
			{Expression: "variables.containers.all(c, has(c.resources))", MessageExpression: "'resources missing in ' + object.metadata.name"},
		},
	}
	b.ReportAllocs()
	for b.Loop() {
		f := &fault.Collector{}
		if compileVariantUncached(spec, "spec", f) == nil || len(f.Errs) > 0 {
			b.Fatal(f.Errs)
		}
	}
}

// TestValidatingPolicyCostBound checks when a ValidatingPolicy runs
// without cost tracking, and that an expression that runs away still
// fails closed: a policy bounded at small bounds runs untracked on a
// small Pod and tracked on one past either of its bounds (its string
// bound or its list bound), erring at the cost limit when its loops run
// away; a policy whose estimate is unbounded (a loop over a list it
// computes) is always tracked.
func TestValidatingPolicyCostBound(t *testing.T) {
	pods := admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	policy := func(name string, vars []admissionregistrationv1.Variable, expr string) *policiesv1.ValidatingPolicy {
		p := &policiesv1.ValidatingPolicy{}
		p.Name = name
		p.Spec = policiesv1.ValidatingPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{pods}},
			Variables:        vars,
			Validations:      []admissionregistrationv1.Validation{{Expression: expr, Message: "duplicate"}},
		}
		return p
	}
	nested := "object.spec.containers.all(a, object.spec.containers.exists_one(b, b.name == a.name))"
	bounded := policy("bounded", nil, nested)
	unbounded := policy("unbounded", []admissionregistrationv1.Variable{{Name: "names", Expression: "object.spec.containers.map(c, c.name)"}},
		"variables.names.all(a, variables.names.exists_one(b, b == a))")
	// Two nested loops comparing two strings of the input: its cost grows
	// with both bounds.
	images := policy("images", nil, "object.spec.containers.all(a, object.spec.containers.exists_one(b, b.image == a.image))")
	set := compileAll(t, bounded, unbounded, images)
	variantOf := func(name string) *variant { return set.lookup(name).variants[0] }
	s := variantOf("bounded").untrackedWithin
	if s.Lists == 0 || s.Lists == celenv.LargestBound.Lists {
		t.Fatalf("bounded policy: untracked within %+v, want a list bound below %d (two nested loops)", s, celenv.LargestBound.Lists)
	}
	if got := variantOf("unbounded").untrackedWithin; got != (celenv.InputBound{}) {
		t.Fatalf("unbounded policy: untracked within %+v, want none (a loop over a computed list)", got)
	}
	si := variantOf("images").untrackedWithin
	if si.Strings == 0 || si.Strings == celenv.LargestBound.Strings {
		t.Fatalf("images policy: untracked within %+v, want a string bound below %d (strings compared in two nested loops)", si, celenv.LargestBound.Strings)
	}
	// Containers with distinct images of about image characters.
	podOf := func(n, image int) map[string]any {
		cs := make([]any, n)
		for i := range cs {
			cs[i] = map[string]any{"name": fmt.Sprint("c", i), "image": fmt.Sprint(i, "-", strings.Repeat("i", image))}
		}
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "default"},
			"spec": map[string]any{"containers": cs}}
	}
	all := func(st review.RuleStatus) map[string]review.RuleStatus {
		return map[string]review.RuleStatus{"bounded": st, "unbounded": st, "images": st}
	}
	for _, tc := range []struct {
		name              string
		containers, image int
		user              string
		wantUntracked     map[string]bool
		wantStatus        map[string]review.RuleStatus
	}{
		{"a small pod", 3, 3, "", map[string]bool{"bounded": true, "unbounded": false, "images": true}, all(review.StatusPass)},
		// Only the inputs a policy reads count: these read object alone.
		{"a small pod from a user with a long name", 3, 3, strings.Repeat("u", 2*celenv.LargestBound.Strings),
			map[string]bool{"bounded": true, "unbounded": false, "images": true}, all(review.StatusPass)},
		{"a pod with images of 100 characters and more", 3, 100, "", map[string]bool{"bounded": true, "images": true}, all(review.StatusPass)},
		{"a pod past a list bound, within the cost limit", s.Lists + 1, 3, "", map[string]bool{"bounded": false, "unbounded": false}, all(review.StatusPass)},
		{"a pod past a string bound, within the cost limit", 2, si.Strings + 1, "", map[string]bool{"images": false, "unbounded": false}, all(review.StatusPass)},
		{"a pod whose loops run away", 600, 3, "", map[string]bool{"bounded": false, "unbounded": false, "images": false}, all(review.StatusError)},
		{"a pod whose string comparisons run away", 40, celenv.LargestBound.Strings + 1, "", map[string]bool{"bounded": false, "images": false},
			map[string]review.RuleStatus{"bounded": review.StatusPass, "unbounded": review.StatusPass, "images": review.StatusError}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &review.Request{Operation: kyvernov1.Create, Object: podOf(tc.containers, tc.image)}
			req.UserInfo.Username = tc.user
			for key, want := range tc.wantUntracked {
				if got := untracked(req, variantOf(key)); got != want {
					t.Errorf("%s: untracked %v, want %v", key, got, want)
				}
			}
			resp := set.validate(req)
			if len(resp) != 3 {
				t.Fatalf("%d responses, want 3", len(resp))
			}
			for key, r := range resp {
				want := tc.wantStatus[key]
				if r.Status != want {
					t.Errorf("%s: %s %q, want %s", key, r.Status, r.Message, want)
				}
				if want == review.StatusError && !strings.Contains(r.Message, "cost") {
					t.Errorf("%s: %q, want the cost limit named", key, r.Message)
				}
			}
		})
	}
}

// TestPodSecurityValidatingPoliciesUntracked checks that the Pod Security
// set as ValidatingPolicies runs untracked on Pods with the long strings
// real clusters have (a digest image of about 100 characters, a 2 KB
// annotation, a 1 KB script) and gives the verdicts it gives tracked, and
// that a Pod past either bound runs every policy tracked.
func TestPodSecurityValidatingPoliciesUntracked(t *testing.T) {
	vpols, _ := testpods.PodSecurityValidatingPolicies(t, filepath.Join(corpus.Require(t), "kyverno-policies"))
	if len(vpols) == 0 {
		t.Fatal("no ValidatingPolicies in the Pod Security set")
	}
	set := compileAll(t, vpols...)
	type verdict struct {
		status  review.RuleStatus
		message string
	}
	verdicts := func(resp map[string]review.RuleResponse) map[string]verdict {
		out := map[string]verdict{}
		for key, r := range resp {
			out[key+"/"+r.Name] = verdict{r.Status, r.Message}
		}
		return out
	}
	// tracked runs validate with every variant of the set tracked (the
	// variants are the compiled ones every set of these sources shares:
	// their bounds are restored after).
	tracked := func(validate func() map[string]review.RuleResponse) map[string]review.RuleResponse {
		saved := map[*variant]celenv.InputBound{}
		for _, vp := range set.policies {
			v := vp.variants[0]
			saved[v] = v.untrackedWithin
			v.untrackedWithin = celenv.InputBound{}
		}
		defer func() {
			for v, b := range saved {
				v.untrackedWithin = b
			}
		}()
		return validate()
	}
	pastStrings := testpods.WithLongStrings(testpods.Pod(0))
	pastStrings["metadata"].(map[string]any)["annotations"].(map[string]any)["big"] = strings.Repeat("x", celenv.LargestBound.Strings+1)
	pastLists := testpods.WithLongStrings(testpods.Pod(0))
	env := make([]any, celenv.LargestBound.Lists+1)
	for i := range env {
		env[i] = map[string]any{"name": fmt.Sprint("E", i), "value": "v"}
	}
	pastLists["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["env"] = env
	for _, tc := range []struct {
		name          string
		pods          []map[string]any
		wantUntracked bool
	}{
		{"pods with digest images, a 2 KB annotation and a 1 KB script", testpods.LongStringMix(), true},
		{"a pod with a string past the string bound", []map[string]any{pastStrings}, false},
		{"a pod with a list past the list bound", []map[string]any{pastLists}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, pod := range tc.pods {
				req := &review.Request{Operation: kyvernov1.Create, Object: pod,
					Kind:     schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
					Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}}
				for j, vp := range set.policies {
					v := vp.variants[0]
					if got := untracked(req, v); got != tc.wantUntracked {
						t.Errorf("pod %d, %s (untracked within %+v): untracked %v, want %v", i, set.srcs[j].GetName(), v.untrackedWithin, got, tc.wantUntracked)
					}
				}
				got := verdicts(set.validate(req))
				want := verdicts(tracked(func() map[string]review.RuleResponse { return set.validate(req) }))
				if len(got) != len(vpols) || !reflect.DeepEqual(got, want) {
					t.Errorf("pod %d: verdicts %v, tracked %v", i, got, want)
				}
			}
		})
	}
}

// podPolicy is a ValidatingPolicy named name for Pod creations.
func podPolicy(name string, spec policiesv1.ValidatingPolicySpec) *policiesv1.ValidatingPolicy {
	p := &policiesv1.ValidatingPolicy{Spec: spec}
	p.Kind, p.Name = policiesv1.ValidatingPolicyKind, name
	p.Spec.MatchConstraints = &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
		},
	}}}
	return p
}

// TestValidationIndexesShared: the properties naming the validation that
// failed are shared by every such result (validationIndexes), so an audit
// annotation beside one goes into a copy of them, never into them.
func TestValidationIndexesShared(t *testing.T) {
	set := compileAll(t, podPolicy("annotated", policiesv1.ValidatingPolicySpec{
		Validations:      []admissionregistrationv1.Validation{{Expression: "object.metadata.name == 'web'"}, {Expression: "false", Message: "second"}},
		AuditAnnotations: []admissionregistrationv1.AuditAnnotation{{Key: "pod", ValueExpression: "string(object.metadata.name)"}},
	}))
	for _, tc := range []struct {
		name  string
		want  map[string]string
		index string
	}{
		{"web", map[string]string{ValidationIndexProperty: "1", "pod": "web"}, "1"},
		{"db", map[string]string{ValidationIndexProperty: "0", "pod": "db"}, "0"},
	} {
		pod := testpods.Pod(0)
		pod["metadata"].(map[string]any)["name"] = tc.name
		rr := set.validate(&review.Request{Operation: kyvernov1.Create, Object: pod,
			Kind:     schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}})["annotated"]
		if rr.Status != review.StatusFail || !reflect.DeepEqual(rr.Properties, tc.want) {
			t.Errorf("pod %s: %s %q %v, want fail with %v", tc.name, rr.Status, rr.Message, rr.Properties, tc.want)
		}
	}
	for i, props := range validationIndexes {
		if len(props) != 1 || props[ValidationIndexProperty] != strconv.Itoa(i) {
			t.Fatalf("validationIndexes[%d] = %v", i, props)
		}
	}
}

// TestVariantsAreSharedThenReleased: a compiled variant is shared by the
// policies compiled from the same spec with one cache while one holds it,
// and dropped from the cache once none does, so a process that compiles
// policy after policy does not keep them all. Without a cache, or across
// two, nothing is shared.
func TestVariantsAreSharedThenReleased(t *testing.T) {
	const marker = "TestVariantsAreSharedThenReleased"
	src := podPolicy("released", policiesv1.ValidatingPolicySpec{
		Variables:   []admissionregistrationv1.Variable{{Name: "released", Expression: "'" + marker + "'"}},
		Validations: []admissionregistrationv1.Validation{{Expression: "variables.released != ''"}},
	})
	cachetest.SharedThenReleased(t, marker, func(cache *celruntime.Cache) any {
		return compileWith(t, cache, src).policies[0].variants[0]
	})
}
