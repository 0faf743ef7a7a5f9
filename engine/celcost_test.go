package engine

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/environment"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/review"
)

// TestUntrackedCostOption checks that charter can still plan a program
// without cost tracking in the Kubernetes environment, which tracks every
// program: when a cel-go upgrade moves what celenv.UntrackedCost clears, every
// ValidatingPolicy is evaluated tracked (correct, but slower) and this
// test says so.
func TestUntrackedCostOption(t *testing.T) {
	if celenv.UntrackedCost() == nil {
		t.Fatal("celenv.UntrackedCost found no evalOpts field in cel-go's program: every program is tracked; update celenv.UntrackedCost for this cel-go")
	}
	env, err := celruntime.PolicyCompiler()
	if err != nil {
		t.Fatal(err)
	}
	res := env.ForPolicy().CompileChecked(&celruntime.Accessor{Expr: "object.items.all(i, i > 0)", Returns: celruntime.BoolReturn()}, environment.StoredExpressions)
	if res.Error != nil || res.Untracked == nil {
		t.Fatalf("compile: %v, untracked plan %v", res.Error, res.Untracked)
	}
	act := &celruntime.Activation{Object: types.DefaultTypeAdapter.NativeToValue(map[string]any{"items": []any{int64(1), int64(2)}})}
	val, details, err := res.Program.Eval(act)
	if err != nil || val != types.True || details == nil || details.ActualCost() == nil || *details.ActualCost() == 0 {
		t.Fatalf("tracked: %v %v, details %+v: want true with its cost", val, err, details)
	}
	val, details, err = res.Untracked.Eval(act)
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
	env, err := celruntime.PolicyCompiler()
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
		// Strings of the inputs read by string functions and compared
		// with each other: their costs grow with the string bound.
		"object.spec.containers.all(c, c.image.contains('@sha256:') || c.image.matches('^[a-z./:-]+$'))",
		"object.spec.containers.all(c, c.?args.orValue([]).all(a, !a.startsWith('--privileged') && a.lowerAscii() != 'x'))",
		"object.metadata.?annotations.orValue({}).exists(k, object.metadata.annotations[k] == object.metadata.name)",
		"object.spec.containers.all(c, object.spec.containers.exists(d, d.image == c.image + ''))",
		"object.spec.containers.all(c, c.name in ['app', 'sidecar'] || c.image + ':' + c.name != object.metadata.name)",
		"'app' in object.metadata.?labels.orValue({}) && object.metadata.?annotations.orValue({}).all(k, k.size() < 300)",
	}
	// Objects of n containers (and as many volumes, labels, annotations,
	// added capabilities and arguments) whose strings are about long
	// characters: list-heavy ones with short strings, string-heavy ones
	// with few entries, and both.
	object := func(n, long int) map[string]any {
		cs, vols := []any{}, []any{}
		labels, annotations := map[string]any{}, map[string]any{}
		for i := range n {
			add, args := make([]any, n/2), make([]any, n/2)
			for j := range add {
				add[j] = fmt.Sprintf("CAP_%d", j)
				args[j] = fmt.Sprintf("--flag%d=%s", j, strings.Repeat("a", long))
			}
			cs = append(cs, map[string]any{"name": fmt.Sprintf("c%d", i), "args": args,
				"image":           fmt.Sprintf("registry.local/app%d@sha256:%s", i, strings.Repeat("0", max(long-30, 1))),
				"securityContext": map[string]any{"capabilities": map[string]any{"add": add}}})
			vols = append(vols, map[string]any{"name": fmt.Sprint("v", i), "hostPath": map[string]any{"path": "/var/tmp" + strings.Repeat("/x", long/2)}})
			labels[fmt.Sprint("l", i)] = "value"
			annotations[fmt.Sprint("a", i)] = strings.Repeat("p", long)
		}
		return map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "p" + strings.Repeat("p", long), "namespace": "default", "labels": labels, "annotations": annotations},
			"spec":     map[string]any{"containers": cs, "initContainers": cs, "volumes": vols}}
	}
	objects := []map[string]any{}
	for _, shape := range []struct{ n, long int }{{0, 0}, {1, 1}, {5, 1}, {40, 1}, {120, 2}, {1, 2000}, {2, 9000}, {5, 300}, {40, 120}} {
		objects = append(objects, object(shape.n, shape.long))
	}
	for _, expr := range exprs {
		res := env.ForPolicy().CompileChecked(&celruntime.Accessor{Expr: expr, Returns: celruntime.BoolReturn()}, environment.StoredExpressions)
		if res.Error != nil {
			t.Fatalf("%s: %v", expr, res.Error)
		}
		bounds, _, reads := celenv.BoundSizes(res.Env, res.AST.NativeRep(), nil)
		for _, obj := range objects {
			in := newRequestView(context.Background(), &review.Request{Object: obj}, &review.Options{})
			ci := in.celInputs()
			size := ci.InputSizes(reads)
			s := celenv.InputBound{Strings: max(size.Strings, 1), Lists: max(size.Lists, 1)}
			act := &celruntime.Activation{In: ci, Object: ci.Object, OldObject: ci.OldObject, Params: types.NullValue}
			_, details, err := res.Program.Eval(act)
			if err != nil {
				t.Fatalf("%s: %v", expr, err)
			}
			actual := *details.ActualCost()
			if est := celenv.EstimateMaxCost(res.Env, res.AST, bounds, s); est < actual {
				t.Errorf("%s on an object within %+v: estimate %d < actual cost %d", expr, s, est, actual)
			}
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
	set, err := Compile([]kyvernov1.PolicyInterface{bounded, unbounded, images})
	if err != nil {
		t.Fatal(err)
	}
	variant := func(name string) *vpolVariant {
		p, _ := set.Lookup(policyid.For(policiesv1.ValidatingPolicyKind, name))
		return p.vpol.variants[0]
	}
	s := variant("bounded").untrackedWithin
	if s.Lists == 0 || s.Lists == celenv.LargestBound.Lists {
		t.Fatalf("bounded policy: untracked within %+v, want a list bound below %d (two nested loops)", s, celenv.LargestBound.Lists)
	}
	if got := variant("unbounded").untrackedWithin; got != (celenv.InputBound{}) {
		t.Fatalf("unbounded policy: untracked within %+v, want none (a loop over a computed list)", got)
	}
	si := variant("images").untrackedWithin
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
				in := newRequestView(context.Background(), req, &review.Options{})
				if got := vpolEvaluationOf(context.Background(), &in.View, &review.Options{}, variant(key), "").eval.Untracked; got != want {
					t.Errorf("%s: untracked %v, want %v", key, got, want)
				}
			}
			resp := set.Validate(context.Background(), req)
			if len(resp.Policies) != 3 {
				t.Fatalf("%d responses, want 3", len(resp.Policies))
			}
			for _, p := range resp.Policies {
				r := p.Rules[0]
				want := tc.wantStatus[p.Key]
				if r.Status != want {
					t.Errorf("%s: %s %q, want %s", p.Key, r.Status, r.Message, want)
				}
				if want == review.StatusError && !strings.Contains(r.Message, "cost") {
					t.Errorf("%s: %q, want the cost limit named", p.Key, r.Message)
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
	_, vpols := podSecurityPairs(t)
	set, err := Compile(vpols)
	if err != nil {
		t.Fatal(err)
	}
	type verdict struct {
		status  review.RuleStatus
		message string
	}
	verdicts := func(resp *Response) map[string]verdict {
		out := map[string]verdict{}
		for _, p := range resp.Policies {
			for _, r := range p.Rules {
				out[p.Key+"/"+r.Name] = verdict{r.Status, r.Message}
			}
		}
		return out
	}
	// tracked runs validate with every variant of the set tracked (the
	// variants are the compiled ones every set of these sources shares:
	// their bounds are restored after).
	tracked := func(validate func() *Response) *Response {
		saved := map[*vpolVariant]celenv.InputBound{}
		for _, p := range vpols {
			cp, _ := set.Lookup(policyid.Of(p))
			v := cp.vpol.variants[0]
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
	pastStrings := withLongStrings(benchPod(0))
	pastStrings["metadata"].(map[string]any)["annotations"].(map[string]any)["big"] = strings.Repeat("x", celenv.LargestBound.Strings+1)
	pastLists := withLongStrings(benchPod(0))
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
		{"pods with digest images, a 2 KB annotation and a 1 KB script", longStringMix(), true},
		{"a pod with a string past the string bound", []map[string]any{pastStrings}, false},
		{"a pod with a list past the list bound", []map[string]any{pastLists}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, pod := range tc.pods {
				req := &review.Request{Operation: kyvernov1.Create, Object: pod,
					Kind:     schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
					Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}}
				for _, p := range vpols {
					cp, _ := set.Lookup(policyid.Of(p))
					v := cp.vpol.variants[0]
					in := newRequestView(context.Background(), req, &review.Options{})
					if got := vpolEvaluationOf(context.Background(), &in.View, &review.Options{}, v, "").eval.Untracked; got != tc.wantUntracked {
						t.Errorf("pod %d, %s (untracked within %+v): untracked %v, want %v", i, p.GetName(), v.untrackedWithin, got, tc.wantUntracked)
					}
				}
				got := verdicts(set.Validate(context.Background(), req))
				want := verdicts(tracked(func() *Response { return set.Validate(context.Background(), req) }))
				if len(got) != len(vpols) || !reflect.DeepEqual(got, want) {
					t.Errorf("pod %d: verdicts %v, tracked %v", i, got, want)
				}
			}
		})
	}
}
