package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/celruntime"
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
