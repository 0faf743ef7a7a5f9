package policycache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/policyid"
)

// library is charter's own policy library (policies/) with the resources
// of its tests, as an API server would hand them out: every object has a
// UID and generation 1.
type library struct {
	policies  []kyvernov1.PolicyInterface
	resources []map[string]any
}

func loadLibrary(t testing.TB) library {
	t.Helper()
	var lib library
	err := filepath.WalkDir(filepath.Join("..", "..", "policies"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			var m map[string]any
			if err := yaml.Unmarshal(doc, &m); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			switch m["kind"] {
			case "ClusterPolicy":
				raw, _ := json.Marshal(m)
				var p kyvernov1.ClusterPolicy
				if err := json.Unmarshal(raw, &p); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				p.UID = types.UID("uid-" + p.Name)
				p.Generation = 1
				lib.policies = append(lib.policies, &p)
			case "Test", "Values", nil:
			default:
				if _, ok := m["metadata"].(map[string]any); ok {
					lib.resources = append(lib.resources, m)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lib.policies) < 10 || len(lib.resources) < 10 {
		t.Fatalf("policy library too small: %d policies, %d resources", len(lib.policies), len(lib.resources))
	}
	return lib
}

// countingBuilder returns a Builder that records the key of every object
// it compiles.
func countingBuilder() (*Builder, *compileLog) {
	b := NewBuilder()
	log := &compileLog{}
	compilePolicy, compileException := b.compilePolicy, b.compileException
	b.compilePolicy = func(p kyvernov1.PolicyInterface) *engine.CompiledPolicy {
		log.add("policy " + policyid.Key(p))
		return compilePolicy(p)
	}
	b.compileException = func(ex *kyvernov2.PolicyException) *engine.CompiledException {
		log.add("exception " + exceptionKey(ex))
		return compileException(ex)
	}
	return b, log
}

type compileLog struct {
	mu   sync.Mutex
	keys []string
}

func (l *compileLog) add(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, key)
}

// take returns the keys compiled since the last take, sorted.
func (l *compileLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.keys
	l.keys = nil
	sort.Strings(out)
	return out
}

// fullSnapshot is the reference: what a snapshot of these inputs is when
// everything is compiled from scratch with engine.Compile, the namespaced
// policies by namespace.
func fullSnapshot(t *testing.T, policies []kyvernov1.PolicyInterface, exceptions []*kyvernov2.PolicyException) *Snapshot {
	t.Helper()
	var fail, ignore []kyvernov1.PolicyInterface
	type byFailurePolicy struct{ fail, ignore []kyvernov1.PolicyInterface }
	namespaced := map[string]*byFailurePolicy{}
	for _, p := range sortedPolicies(policies) {
		ns := namespaced[p.GetNamespace()]
		if p.IsNamespaced() && ns == nil && p.GetSpec().AdmissionProcessingEnabled() {
			ns = &byFailurePolicy{}
			namespaced[p.GetNamespace()] = ns
		}
		switch {
		case !p.GetSpec().AdmissionProcessingEnabled():
		case p.IsNamespaced() && p.GetSpec().GetFailurePolicy() == kyvernov1.Ignore:
			ns.ignore = append(ns.ignore, p)
		case p.IsNamespaced():
			ns.fail = append(ns.fail, p)
		case p.GetSpec().GetFailurePolicy() == kyvernov1.Ignore:
			ignore = append(ignore, p)
		default:
			fail = append(fail, p)
		}
	}
	exceptions = sortedExceptions(exceptions)
	s := &Snapshot{}
	compile := func(group []kyvernov1.PolicyInterface, withExceptionFaults bool) *engine.PolicySet {
		set, err := engine.Compile(group, engine.WithExceptions(exceptions))
		var faults fault.List
		if err != nil && !errors.As(err, &faults) {
			t.Fatal(err)
		}
		for _, f := range faults {
			if withExceptionFaults || f.Kind != exceptionKind {
				s.Errors = append(s.Errors, f)
			}
		}
		return set
	}
	s.Fail = compile(fail, true)
	s.Ignore = compile(ignore, false)
	for _, ns := range slices.Sorted(maps.Keys(namespaced)) {
		if s.Namespaced == nil {
			s.Namespaced = map[string]NamespaceSets{}
		}
		s.Namespaced[ns] = NamespaceSets{Fail: compile(namespaced[ns].fail, false), Ignore: compile(namespaced[ns].ignore, false)}
	}
	return s
}

func setKeys(set *engine.PolicySet) []string {
	var out []string
	for _, p := range set.Policies() {
		out = append(out, p.Key()+" "+strings.Join(p.Rules(), ","))
	}
	return out
}

// sameSnapshot compares a built snapshot with the reference: the same
// policies and rules in each set, the same faults, and the same responses
// for every resource of the library.
func sameSnapshot(t *testing.T, got, want *Snapshot, resources []map[string]any) {
	t.Helper()
	if g, w := got.Errors.Error(), want.Errors.Error(); g != w {
		t.Errorf("faults differ\n got: %s\nwant: %s", g, w)
	}
	type setPair struct {
		name      string
		got, want *engine.PolicySet
	}
	pairs := []setPair{{"Fail", got.Fail, want.Fail}, {"Ignore", got.Ignore, want.Ignore}}
	if g, w := slices.Sorted(maps.Keys(got.Namespaced)), slices.Sorted(maps.Keys(want.Namespaced)); !slices.Equal(g, w) {
		t.Errorf("namespaces with namespaced sets: got %v, want %v", g, w)
	}
	for ns, w := range want.Namespaced {
		g := got.Namespaced[ns]
		if g.Fail == nil || g.Ignore == nil {
			continue
		}
		pairs = append(pairs, setPair{ns + " Fail", g.Fail, w.Fail}, setPair{ns + " Ignore", g.Ignore, w.Ignore})
	}
	for _, pair := range pairs {
		if g, w := setKeys(pair.got), setKeys(pair.want); !reflect.DeepEqual(g, w) {
			t.Errorf("%s set differs\n got: %v\nwant: %v", pair.name, g, w)
			continue
		}
		ctx := context.Background()
		for _, res := range resources {
			ns, _ := res["metadata"].(map[string]any)["namespace"].(string)
			req := &engine.Request{Operation: kyvernov1.Create, Object: res, Namespace: ns}
			what := fmt.Sprintf("%s %v %v", pair.name, res["kind"], res["metadata"].(map[string]any)["name"])
			if g, w := describe(pair.got.Validate(ctx, req).Policies), describe(pair.want.Validate(ctx, req).Policies); g != w {
				t.Errorf("Validate %s differs\n got: %s\nwant: %s", what, g, w)
			}
			gm, wm := pair.got.Mutate(ctx, req), pair.want.Mutate(ctx, req)
			if g, w := describe(gm.Policies), describe(wm.Policies); g != w || !reflect.DeepEqual(gm.Patch, wm.Patch) {
				t.Errorf("Mutate %s differs\n got: %s %v\nwant: %s %v", what, g, gm.Patch, w, wm.Patch)
			}
		}
	}
}

// describe renders responses for comparison. The policy is named by key
// and generation: a reused unit's Source is the object it was compiled
// from, which may differ from the informer's newest copy in status only.
func describe(prs []engine.PolicyResponse) string {
	var b strings.Builder
	for _, pr := range prs {
		fmt.Fprintf(&b, "%s@%d:", pr.Key, pr.Policy.(metav1.Object).GetGeneration())
		for _, r := range pr.Rules {
			var exs []string
			for _, ex := range r.Exceptions {
				exs = append(exs, ex.Namespace+"/"+ex.Name)
			}
			fmt.Fprintf(&b, " [%s %s %s %q %v %v]", r.Name, r.Status, r.Action, r.Message, exs, r.Properties)
		}
		if pr.Patched != nil {
			patched, _ := json.Marshal(pr.Patched)
			fmt.Fprintf(&b, " patched=%s", patched)
		}
		b.WriteString("; ")
	}
	return b.String()
}

// edit returns a copy of p with fn applied and, when the spec changes, the
// generation bumped as the API server would.
func edit(p kyvernov1.PolicyInterface, specChange bool, fn func(kyvernov1.PolicyInterface)) kyvernov1.PolicyInterface {
	out := p.CreateDeepCopy()
	fn(out)
	if specChange {
		out.(metav1.Object).SetGeneration(p.(metav1.Object).GetGeneration() + 1)
	}
	out.(metav1.Object).SetResourceVersion(p.(metav1.Object).GetResourceVersion() + "1")
	return out
}

func exceptionFor(name, policy, rule string) *kyvernov2.PolicyException {
	return &kyvernov2.PolicyException{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "exceptions", UID: types.UID("uid-" + name), Generation: 1},
		Spec: kyvernov2.PolicyExceptionSpec{
			Exceptions: []kyvernov2.Exception{{PolicyName: policy, RuleNames: []string{rule}}},
			Match:      kyvernov2.MatchResources{Any: kyvernov1.ResourceFilters{{ResourceDescription: kyvernov1.ResourceDescription{Kinds: []string{"Pod"}}}}},
		},
	}
}

// TestBuilderCompilesOnlyWhatChanged walks a policy library through a
// series of edits. After each, the builder must have compiled exactly the
// objects the edit touched, and the snapshot must equal a from-scratch
// compile of the same inputs.
func TestBuilderCompilesOnlyWhatChanged(t *testing.T) {
	lib := loadLibrary(t)
	policies := append([]kyvernov1.PolicyInterface{}, lib.policies...)
	first, second := policies[0], policies[1]
	rule0 := first.GetSpec().Rules[0].Name
	exceptions := []*kyvernov2.PolicyException{exceptionFor("skip-first", first.GetName(), rule0)}

	b, compiled := countingBuilder()
	prev, stats := b.Build(policies, exceptions)
	if got := compiled.take(); len(got) != len(policies)+len(exceptions) || !stats.Changed {
		t.Fatalf("first build compiled %d objects (changed %v), want all %d", len(got), stats.Changed, len(policies)+len(exceptions))
	}
	sameSnapshot(t, prev, fullSnapshot(t, policies, exceptions), lib.resources)

	ignore := kyvernov1.Ignore
	no := false
	namespaced := &kyvernov1.Policy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kyverno.io/v1", Kind: "Policy"},
		ObjectMeta: metav1.ObjectMeta{Name: first.GetName(), Namespace: "team-a", UID: "uid-team-a", Generation: 1},
		Spec:       *first.GetSpec().DeepCopy(),
	}
	at := func(key string) int {
		for i, p := range policies {
			if policyid.Key(p) == key {
				return i
			}
		}
		t.Fatalf("no policy %s", key)
		return -1
	}
	steps := []struct {
		name    string
		apply   func()
		compile []string
		changed bool
	}{
		{name: "nothing changed", apply: func() {}},
		{name: "status write, same generation", apply: func() {
			policies[0] = edit(policies[0], false, func(p kyvernov1.PolicyInterface) {
				ready := true
				p.(kyvernov1.StatusHolder).GetStatus().Ready = &ready
			})
		}},
		{name: "one policy's message edited", changed: true, compile: []string{"policy " + first.GetName()}, apply: func() {
			policies[0] = edit(policies[0], true, func(p kyvernov1.PolicyInterface) {
				for i := range p.GetSpec().Rules {
					if v := p.GetSpec().Rules[i].Validation; v != nil {
						v.Message += " (edited)"
					}
				}
			})
		}},
		{name: "one policy's annotation edited", changed: true, compile: []string{"policy " + second.GetName()}, apply: func() {
			policies[1] = edit(policies[1], false, func(p kyvernov1.PolicyInterface) {
				obj := p.(metav1.Object)
				a := map[string]string{}
				for k, v := range obj.GetAnnotations() {
					a[k] = v
				}
				a[kyvernov1.AnnotationPolicyScored] = "false"
				obj.SetAnnotations(a)
			})
		}},
		{name: "exception edited: no policy recompiled", changed: true, compile: []string{"exception exceptions/skip-first"}, apply: func() {
			ex := exceptions[0].DeepCopy()
			ex.Generation++
			ex.Spec.Match.Any[0].ResourceDescription.Namespaces = []string{"default"}
			exceptions[0] = ex
		}},
		{name: "exception added", changed: true, compile: []string{"exception exceptions/skip-second"}, apply: func() {
			exceptions = append(exceptions, exceptionFor("skip-second", second.GetName(), second.GetSpec().Rules[0].Name))
		}},
		{name: "exception deleted", changed: true, apply: func() { exceptions = exceptions[:1] }},
		{name: "failurePolicy flipped to Ignore", changed: true, compile: []string{"policy " + second.GetName()}, apply: func() {
			policies[1] = edit(policies[1], true, func(p kyvernov1.PolicyInterface) {
				p.GetSpec().WebhookConfiguration = &kyvernov1.WebhookConfiguration{FailurePolicy: &ignore}
			})
		}},
		{name: "namespaced Policy of the same name added", changed: true, compile: []string{"policy team-a/" + first.GetName()}, apply: func() {
			policies = append(policies, namespaced)
		}},
		{name: "a Policy in another namespace added: it alone compiled, in a set of its own", changed: true, compile: []string{"policy team-b/" + first.GetName()}, apply: func() {
			other := namespaced.DeepCopy()
			other.Namespace, other.UID = "team-b", "uid-team-b"
			policies = append(policies, other)
		}},
		{name: "policy turned invalid", changed: true, compile: []string{"policy " + first.GetName()}, apply: func() {
			policies[0] = edit(policies[0], true, func(p kyvernov1.PolicyInterface) {
				p.GetSpec().Rules[0].MatchResources = kyvernov1.MatchResources{}
			})
		}},
		{name: "policy set to admission: false: compiled once more, for the controllers' views", changed: true, compile: []string{"policy " + policyid.Key(lib.policies[2])}, apply: func() {
			i := at(policyid.Key(lib.policies[2]))
			policies[i] = edit(policies[i], true, func(p kyvernov1.PolicyInterface) { p.GetSpec().Admission = &no })
		}},
		{name: "policy deleted", changed: true, apply: func() {
			i := at(policyid.Key(lib.policies[3]))
			policies = append(policies[:i:i], policies[i+1:]...)
		}},
		{name: "policy deleted and recreated under the same name (new UID)", changed: true, compile: []string{"policy " + lib.policies[4].GetName()}, apply: func() {
			i := at(policyid.Key(lib.policies[4]))
			policies[i] = edit(policies[i], false, func(p kyvernov1.PolicyInterface) {
				p.(metav1.Object).SetUID("uid-recreated")
			})
		}},
		{name: "informer order shuffled", apply: func() {
			for i, j := 0, len(policies)-1; i < j; i, j = i+1, j-1 {
				policies[i], policies[j] = policies[j], policies[i]
			}
		}},
	}
	for n, step := range steps {
		// Each step evaluates a quarter of the resources, a different
		// quarter each time: the sets are under test, not the requests.
		var sample []map[string]any
		for i := n % 4; i < len(lib.resources); i += 4 {
			sample = append(sample, lib.resources[i])
		}
		t.Run(step.name, func(t *testing.T) {
			step.apply()
			s, stats := b.Build(policies, exceptions)
			if got := compiled.take(); !reflect.DeepEqual(got, step.compile) {
				t.Errorf("compiled %v, want %v", got, step.compile)
			}
			if stats.Changed != step.changed {
				t.Errorf("Changed = %v, want %v", stats.Changed, step.changed)
			}
			if !step.changed && s != prev {
				t.Errorf("an unchanged build returned a new snapshot")
			}
			if step.changed && s == prev {
				t.Errorf("a changed build returned the previous snapshot")
			}
			sameSnapshot(t, s, fullSnapshot(t, policies, exceptions), sample)
			prev = s
		})
	}

	// The invalid policy's faults are on the snapshot, per policy, with
	// the generation they are of.
	u, ok := prev.Compiled(first.GetName())
	if !ok || len(u.Errors()) == 0 || u.Source().(metav1.Object).GetGeneration() != policies[at(first.GetName())].(metav1.Object).GetGeneration() {
		t.Errorf("Compiled(%s) = %v, %v: want the invalid policy's faults at its generation", first.GetName(), u, ok)
	}
	if len(prev.Errors.For("ClusterPolicy", first.GetName())) == 0 {
		t.Errorf("Errors has no faults for %s", first.GetName())
	}
	if u, ok := prev.Compiled(policyid.Key(lib.policies[2])); !ok || u.Source().GetSpec().AdmissionProcessingEnabled() {
		t.Errorf("Compiled(%s) = %v, %v: want the unit of the admission: false policy, for its status", policyid.Key(lib.policies[2]), u, ok)
	}
	if u, ok := prev.Compiled("team-a/" + first.GetName()); !ok || len(u.Errors()) != 0 {
		t.Errorf("Compiled(team-a/%s) = %v, %v: want the valid namespaced policy", first.GetName(), u, ok)
	}
}

// TestBuilderWithoutGenerations covers objects that never came from an
// API server (the CLI, tests): they are compared by spec.
func TestBuilderWithoutGenerations(t *testing.T) {
	b, compiled := countingBuilder()
	a, c := policy("a", nil), policy("c", nil)
	b.Build([]kyvernov1.PolicyInterface{a, c}, nil)
	compiled.take()

	same := a.DeepCopy()
	changed := c.DeepCopy()
	changed.Spec.Rules[0].Validation.Message = "other"
	_, stats := b.Build([]kyvernov1.PolicyInterface{same, changed}, nil)
	if got := compiled.take(); !reflect.DeepEqual(got, []string{"policy c"}) || !stats.Changed {
		t.Errorf("compiled %v (changed %v), want [policy c]", got, stats.Changed)
	}
}

// TestBuilderSnapshotsAreSafeForReaders builds snapshot after snapshot
// while readers evaluate the ones already published (run with -race).
func TestBuilderSnapshotsAreSafeForReaders(t *testing.T) {
	lib := loadLibrary(t)
	policies := append([]kyvernov1.PolicyInterface{}, lib.policies...)
	b := NewBuilder()
	s, _ := b.Build(policies, nil)
	var current sync.Map
	current.Store("s", s)
	done := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				v, _ := current.Load("s")
				snap := v.(*Snapshot)
				for _, res := range lib.resources[:20] {
					req := &engine.Request{Operation: kyvernov1.Create, Object: res}
					snap.Fail.Validate(context.Background(), req)
					snap.Fail.Mutate(context.Background(), req)
				}
			}
		})
	}
	for i := range 20 {
		j := i % len(policies)
		policies[j] = edit(policies[j], true, func(p kyvernov1.PolicyInterface) {
			p.GetSpec().Rules[0].Name += fmt.Sprintf("-%d", i)
		})
		s, _ := b.Build(policies, nil)
		current.Store("s", s)
	}
	close(done)
	readers.Wait()
}
