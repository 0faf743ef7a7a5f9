package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/cel/environment"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// TestUntrackedCostOption checks that charter can still plan a program
// without cost tracking in the Kubernetes environment, which tracks every
// program: when a cel-go upgrade moves what untrackedCost clears, every
// ValidatingPolicy is evaluated tracked (correct, but slower) and this
// test says so.
func TestUntrackedCostOption(t *testing.T) {
	if untrackedCost() == nil {
		t.Fatal("untrackedCost found no evalOpts field in cel-go's program: every program is tracked; update untrackedCost for this cel-go")
	}
	env, err := celPolicyCompiler()
	if err != nil {
		t.Fatal(err)
	}
	res := env.forPolicy().compileChecked(&celAccessor{expr: "object.items.all(i, i > 0)", returns: boolReturn()}, environment.StoredExpressions)
	if res.Error != nil || res.untracked == nil {
		t.Fatalf("compile: %v, untracked plan %v", res.Error, res.untracked)
	}
	act := &celActivation{object: types.DefaultTypeAdapter.NativeToValue(map[string]any{"items": []any{int64(1), int64(2)}})}
	val, details, err := res.Program.Eval(act)
	if err != nil || val != types.True || details == nil || details.ActualCost() == nil || *details.ActualCost() == 0 {
		t.Fatalf("tracked: %v %v, details %+v: want true with its cost", val, err, details)
	}
	val, details, err = res.untracked.Eval(act)
	if err != nil || val != types.True {
		t.Fatalf("untracked: %v %v, want true", val, err)
	}
	if details != nil && details.ActualCost() != nil {
		t.Fatalf("untracked program tracked a cost of %d", *details.ActualCost())
	}
}

// TestCostEstimatesBoundActualCost checks the estimate untracked
// evaluation rests on, for the shapes of expression ValidatingPolicies
// use: whatever an object within S makes an expression cost at runtime,
// the estimate at S (the object's own input size) is at least that.
func TestCostEstimatesBoundActualCost(t *testing.T) {
	env, err := celPolicyCompiler()
	if err != nil {
		t.Fatal(err)
	}
	exprs := []string{
		"object.spec.containers.all(c, c.?securityContext.?privileged.orValue(false) == false)",
		"(object.spec.containers + object.spec.?initContainers.orValue([])).all(c, c.image.startsWith('registry.local/'))",
		"object.spec.containers.all(c, c.?securityContext.?capabilities.?add.orValue([]).all(a, a in ['CHOWN', 'KILL']))",
		"object.spec.containers.exists(c, object.spec.containers.exists(d, c.name != d.name && c.image == d.image))",
		"object.spec.containers.map(c, c.name).size() < 10",
		"object.spec.containers.filter(c, c.name.matches('^[a-z]+$')).size() == size(object.spec.containers)",
		"object.metadata.?labels.orValue({}).all(k, k.size() < 64 && object.metadata.labels[k].contains('x') == false)",
		"object.spec.volumes.all(v, !has(v.hostPath) || v.hostPath.path.endsWith('/tmp'))",
		"object.metadata.name + '-' + object.metadata.namespace != request.name",
	}
	container := func(i, caps int) map[string]any {
		add := make([]any, caps)
		for j := range add {
			add[j] = fmt.Sprintf("CAP_%d", j)
		}
		return map[string]any{"name": fmt.Sprintf("c%d", i), "image": "registry.local/app" + strings.Repeat("x", i),
			"securityContext": map[string]any{"capabilities": map[string]any{"add": add}}}
	}
	objects := []map[string]any{}
	for _, n := range []int{0, 1, 5, 40} {
		var cs, vols []any
		labels := map[string]any{}
		for i := range n {
			cs = append(cs, container(i, n/2))
			vols = append(vols, map[string]any{"name": fmt.Sprint("v", i), "hostPath": map[string]any{"path": "/var/tmp"}})
			labels[fmt.Sprint("l", i)] = "value"
		}
		if cs == nil {
			cs = []any{}
			vols = []any{}
		}
		objects = append(objects, map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "p", "namespace": "default", "labels": labels},
			"spec":     map[string]any{"containers": cs, "initContainers": cs, "volumes": vols}})
	}
	for _, expr := range exprs {
		res := env.forPolicy().compileChecked(&celAccessor{expr: expr, returns: boolReturn()}, environment.StoredExpressions)
		if res.Error != nil {
			t.Fatalf("%s: %v", expr, res.Error)
		}
		bounds, _, reads := boundSizes(res.ast.NativeRep(), nil)
		for _, obj := range objects {
			in := newRequestView(context.Background(), &Request{Object: obj}, &evalConfig{})
			ci := in.celInputs()
			s := max(ci.inputSize(reads), 1)
			act := &celActivation{in: ci, object: ci.object, oldObject: ci.oldObject, params: types.NullValue}
			_, details, err := res.Program.Eval(act)
			if err != nil {
				t.Fatalf("%s: %v", expr, err)
			}
			actual := *details.ActualCost()
			if est := estimateMaxCost(res.env, res.ast, bounds, s); est < actual {
				t.Errorf("%s on an object within %d: estimate %d < actual cost %d", expr, s, est, actual)
			}
		}
	}
}

// TestValidatingPolicyCostBound checks when a ValidatingPolicy runs
// without cost tracking, and that an expression that runs away still
// fails closed: a policy bounded at a small S runs untracked on a small
// Pod and tracked, erring at the cost limit, on one beyond S; a policy
// whose estimate is unbounded (a loop over a list it computes) is always
// tracked.
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
	set, err := Compile([]kyvernov1.PolicyInterface{bounded, unbounded})
	if err != nil {
		t.Fatal(err)
	}
	variant := func(name string) *vpolVariant {
		p, _ := set.Lookup(PolicyIDFor(policiesv1.ValidatingPolicyKind, name))
		return p.vpol.variants[0]
	}
	s := variant("bounded").untrackedUpTo
	if s == 0 || s == untrackedBounds[0] {
		t.Fatalf("bounded policy: untracked up to %d, want a bound below %d (two nested loops)", s, untrackedBounds[0])
	}
	if got := variant("unbounded").untrackedUpTo; got != 0 {
		t.Fatalf("unbounded policy: untracked up to %d, want 0 (a loop over a computed list)", got)
	}
	podOf := func(n int) map[string]any {
		cs := make([]any, n)
		for i := range cs {
			cs[i] = map[string]any{"name": fmt.Sprint("c", i), "image": "app"}
		}
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "default"},
			"spec": map[string]any{"containers": cs}}
	}
	for _, tc := range []struct {
		name          string
		containers    int
		user          string
		wantUntracked map[string]bool
		wantStatus    RuleStatus
	}{
		{"a small pod", 3, "", map[string]bool{"bounded": true, "unbounded": false}, StatusPass},
		// Only the inputs a policy reads count: these read object alone.
		{"a small pod from a user with a long name", 3, strings.Repeat("u", 2*untrackedBounds[0]), map[string]bool{"bounded": true, "unbounded": false}, StatusPass},
		{"a pod beyond the bound, within the cost limit", s + 1, "", map[string]bool{"bounded": false, "unbounded": false}, StatusPass},
		{"a pod whose loops run away", 600, "", map[string]bool{"bounded": false, "unbounded": false}, StatusError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &Request{Operation: kyvernov1.Create, Object: podOf(tc.containers)}
			req.UserInfo.Username = tc.user
			for key, want := range tc.wantUntracked {
				in := newRequestView(context.Background(), req, &evalConfig{})
				if got := in.vpolEvaluation(context.Background(), &evalConfig{}, variant(key), "").eval.untracked; got != want {
					t.Errorf("%s: untracked %v, want %v", key, got, want)
				}
			}
			resp := set.Validate(context.Background(), req)
			if len(resp.Policies) != 2 {
				t.Fatalf("%d responses, want 2", len(resp.Policies))
			}
			for _, p := range resp.Policies {
				r := p.Rules[0]
				if r.Status != tc.wantStatus {
					t.Errorf("%s: %s %q, want %s", p.Key, r.Status, r.Message, tc.wantStatus)
				}
				if tc.wantStatus == StatusError && !strings.Contains(r.Message, "cost") {
					t.Errorf("%s: %q, want the cost limit named", p.Key, r.Message)
				}
			}
		})
	}
}
