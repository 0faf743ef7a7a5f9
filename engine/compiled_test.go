package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/internal/corpus"
)

// assembleCase is one table row of the Compile-versus-Assemble comparison:
// policies and exceptions to compile both ways, and resources to evaluate
// through both sets.
type assembleCase struct {
	name       string
	policies   []kyvernov1.PolicyInterface
	exceptions []*kyvernov2.PolicyException
	resources  []map[string]any
}

// assembleCases gathers the table: charter's own policy library, the
// engine's compile-fault testdata (units with errors), and the validate
// and mutate conformance suites, each list merged into one set so that
// indexing, ordering and duplicate keys across many policies are covered.
func assembleCases(t testing.TB) []assembleCase {
	var cases []assembleCase
	lib := assembleCase{name: "policies-library"}
	err := filepath.WalkDir(filepath.Join("..", "policies"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		lib.add(t, readDocs(t, path))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, lib)

	files, _ := filepath.Glob("testdata/compile/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var tc compileCase
		if err := yaml.UnmarshalStrict(data, &tc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		cases = append(cases, assembleCase{
			name:       "faults/" + filepath.Base(file),
			policies:   decodePolicies(t, tc.Policies),
			exceptions: tc.Exceptions,
		})
	}

	// The validate testdata merged into one row: it is where the
	// exceptions are (duplicate policy names across files are reported
	// the same way by both paths).
	files, _ = filepath.Glob("testdata/validate/*.yaml")
	merged := assembleCase{name: "testdata/validate"}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var tc validateCase
		if err := yaml.Unmarshal(data, &tc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		merged.policies = append(merged.policies, decodePolicies(t, tc.Policies)...)
		merged.exceptions = append(merged.exceptions, tc.Exceptions...)
		if tc.Request.Object != nil {
			merged.resources = append(merged.resources, tc.Request.Object)
		}
	}
	cases = append(cases, merged)

	conformanceDir, ok := corpus.Optional(t)
	for _, list := range []string{"validate", "mutate"} {
		if !ok {
			break
		}
		suites, err := corpus.Suites(conformanceDir, list)
		if err != nil {
			t.Fatal(err)
		}
		c := assembleCase{name: "conformance/" + list + ".txt"}
		for _, dir := range suites {
			var suite suiteFile
			raw, err := os.ReadFile(filepath.Join(dir, "kyverno-test.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(raw, &suite); err != nil {
				t.Fatalf("%s: %v", dir, err)
			}
			for _, group := range [][]string{suite.Policies, suite.Exceptions, suite.Resources} {
				for _, f := range group {
					c.add(t, readDocs(t, filepath.Join(dir, f)))
				}
			}
		}
		cases = append(cases, c)
	}
	return cases
}

// add sorts YAML documents into policies, exceptions and resources; test
// and values files are neither.
func (c *assembleCase) add(t testing.TB, docs []map[string]any) {
	for _, doc := range docs {
		data, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		switch kind, _ := doc["kind"].(string); kind {
		case "ClusterPolicy", "Policy":
			c.policies = append(c.policies, decodePolicies(t, []json.RawMessage{data})...)
		case "PolicyException":
			var ex kyvernov2.PolicyException
			if err := json.Unmarshal(data, &ex); err != nil {
				t.Fatal(err)
			}
			c.exceptions = append(c.exceptions, &ex)
		case "Test", "Values", "":
		default:
			if _, ok := doc["metadata"].(map[string]any); ok {
				c.resources = append(c.resources, doc)
			}
		}
	}
}

// compileUnits compiles every policy and exception on its own.
func compileUnits(c *Compiler, policies []kyvernov1.PolicyInterface, exceptions []*kyvernov2.PolicyException) ([]*CompiledPolicy, []*CompiledException) {
	pus := make([]*CompiledPolicy, len(policies))
	for i, p := range policies {
		pus[i] = c.Policy(p)
	}
	eus := make([]*CompiledException, len(exceptions))
	for i, e := range exceptions {
		eus[i] = c.Exception(e)
	}
	return pus, eus
}

func errorLines(err error) string {
	if err == nil {
		return ""
	}
	errs, ok := err.(fault.List)
	if !ok {
		return "not fault.List: " + err.Error()
	}
	return errs.Error()
}

// TestAssembleMatchesCompile is the contract of Compiler: for the same
// inputs, a set assembled from units is the set Compile builds, field by
// field, and evaluates every resource of the table to the same responses.
func TestAssembleMatchesCompile(t *testing.T) {
	for _, tc := range assembleCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.policies) == 0 {
				t.Fatal("no policies in this table row")
			}
			// One CompileCache for both, so that their compiled CEL
			// parts are shared: a CEL program holds functions, which
			// compare unequal when compiled twice.
			cache := NewCompileCache()
			want, wantErr := Compile(tc.policies, WithExceptions(tc.exceptions), WithCompileCache(cache))
			pus, eus := compileUnits(NewCompiler(WithCompileCache(cache)), tc.policies, tc.exceptions)
			got, gotErr := NewCompiler().Assemble(pus, eus)
			if w, g := errorLines(wantErr), errorLines(gotErr); w != g {
				t.Errorf("errors differ\nCompile:\n%s\nAssemble:\n%s", w, g)
			}
			compareSets(t, want, got)
			compareEvaluations(t, want, got, tc.resources)
			t.Logf("%d policies (%d compiled), %d exceptions, %d resources", len(tc.policies), len(want.policies), len(tc.exceptions), len(tc.resources))
		})
	}
}

// policySetFields and policyFields are the fields compareSets knows how to
// compare. A field added to PolicySet or Policy fails the test until it is
// listed here, so that Assemble cannot silently fall behind Compile.
var (
	policySetFields = []string{"policies", "byID", "env", "celExceptions", "byKind", "wildcard", "background", "webhookConditioned", "cache"}
	policyFields    = []string{"set", "source", "key", "id", "unscored", "background", "order", "kinds", "namespace", "unsupported", "vpol", "gpol", "mpol", "ivpol", "cpol"}
)

func checkFieldsKnown(t *testing.T, v any, known []string) {
	t.Helper()
	typ := reflect.TypeOf(v)
	listed := map[string]bool{}
	for _, f := range known {
		listed[f] = true
	}
	for i := range typ.NumField() {
		if name := typ.Field(i).Name; !listed[name] {
			t.Errorf("%s has a field %q that Assemble and this test do not know: make Assemble build it as Compile does, then list it here", typ.Name(), name)
		}
	}
}

func policyKeys(ps []*Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.key
	}
	return out
}

// indexKeys lists the buckets of a kind's index by the keys of their
// policies and their response bounds, for comparing two indexes.
func indexKeys(k *kindIndex) map[string]string {
	out := map[string]string{}
	put := func(name string, l *policyList) {
		out[name] = fmt.Sprintf("%v + %d responses", policyKeys(l.policies), l.responses)
	}
	put("any", &k.anyNamespace)
	for ns, l := range k.byNamespace {
		put("namespace "+ns, l)
	}
	for ns, l := range k.byScope {
		put("scope "+ns, l)
	}
	return out
}

func compareSets(t *testing.T, want, got *PolicySet) {
	t.Helper()
	checkFieldsKnown(t, PolicySet{}, policySetFields)
	checkFieldsKnown(t, Policy{}, policyFields)
	if w, g := policyKeys(want.policies), policyKeys(got.policies); !reflect.DeepEqual(w, g) {
		t.Fatalf("policies differ:\nCompile:  %v\nAssemble: %v", w, g)
	}
	if w, g := indexKeys(&want.wildcard), indexKeys(&got.wildcard); !reflect.DeepEqual(w, g) {
		t.Errorf("wildcard policies differ: Compile %v, Assemble %v", w, g)
	}
	if w, g := policyKeys(want.background), policyKeys(got.background); !reflect.DeepEqual(w, g) {
		t.Errorf("policies with background rules differ: Compile %v, Assemble %v", w, g)
	}
	if want.webhookConditioned != got.webhookConditioned {
		t.Errorf("policies with webhook matchConditions: Compile %d, Assemble %d", want.webhookConditioned, got.webhookConditioned)
	}
	if len(want.byKind) != len(got.byKind) {
		t.Errorf("byKind has %d kinds from Compile, %d from Assemble", len(want.byKind), len(got.byKind))
	}
	for kind, k := range want.byKind {
		g, ok := got.byKind[kind]
		if !ok {
			t.Errorf("byKind[%s] missing from Assemble", kind)
			continue
		}
		if w, g := indexKeys(k), indexKeys(g); !reflect.DeepEqual(w, g) {
			t.Errorf("byKind[%s] differs: Compile %v, Assemble %v", kind, w, g)
		}
	}
	if len(want.byID) != len(got.byID) {
		t.Errorf("byID has %d entries from Compile, %d from Assemble", len(want.byID), len(got.byID))
	}
	for i, gp := range got.policies {
		if got.byID[gp.id] != gp {
			t.Errorf("byID[%s] is not the set's own policy", gp.id)
		}
		if gp.set != got {
			t.Errorf("policy %s is bound to another set", gp.key)
		}
		wp := want.policies[i]
		wv, gv := reflect.ValueOf(wp).Elem(), reflect.ValueOf(gp).Elem()
		for f := range wv.NumField() {
			name := wv.Type().Field(f).Name
			if name == "set" {
				continue
			}
			// unexported fields: compare through reflect.DeepEqual on the
			// field values, which reads them without exporting them.
			if !reflect.DeepEqual(fieldValue(wv, f), fieldValue(gv, f)) {
				t.Errorf("policy %s: field %s differs between Compile and Assemble", gp.key, name)
			}
		}
	}
	if len(want.env.Exceptions) != len(got.env.Exceptions) {
		t.Fatalf("%d exceptions from Compile, %d from Assemble", len(want.env.Exceptions), len(got.env.Exceptions))
	}
	for i := range want.env.Exceptions {
		if !reflect.DeepEqual(want.env.Exceptions[i], got.env.Exceptions[i]) {
			t.Errorf("exception %s differs between Compile and Assemble", want.env.Exceptions[i].Key)
		}
	}
	if w, g := len(want.celExceptions), len(got.celExceptions); w != g {
		t.Errorf("%d CEL exceptions from Compile, %d from Assemble", w, g)
	}
}

// fieldValue returns field f of struct value v as an interface, for
// DeepEqual; unexported fields are read through a pointer to the field.
func fieldValue(v reflect.Value, f int) any {
	return reflect.NewAt(v.Field(f).Type(), v.Field(f).Addr().UnsafePointer()).Elem().Interface()
}

// compareEvaluations runs Validate and Mutate for every resource through
// both sets and wants the same responses. Resources alternate between
// CREATE and UPDATE (with the object as its own old object): evaluating
// each both ways doubles the run time and adds little, since the sets,
// not the requests, are under test. -short evaluates every tenth resource.
func compareEvaluations(t *testing.T, want, got *PolicySet, resources []map[string]any) {
	t.Helper()
	ctx := context.Background()
	for i, res := range resources {
		if testing.Short() && i%10 != 0 {
			continue
		}
		meta, _ := res["metadata"].(map[string]any)
		req := &review.Request{Operation: kyvernov1.Create, Object: res}
		if i%2 == 1 {
			req.Operation, req.OldObject = kyvernov1.Update, res
		}
		what := fmt.Sprintf("%s %v %v", req.Operation, res["kind"], meta["name"])
		if w, g := want.Validate(ctx, req), got.Validate(ctx, req); !reflect.DeepEqual(w, g) {
			t.Errorf("Validate %s: responses differ\nCompile:  %+v\nAssemble: %+v", what, w, g)
		}
		if w, g := want.Mutate(ctx, req), got.Mutate(ctx, req); !reflect.DeepEqual(w, g) {
			t.Errorf("Mutate %s: responses differ\nCompile:  %+v\nAssemble: %+v", what, w, g)
		}
	}
}

// TestCompiledPolicyKeepsItsFaults: a unit that does not compile carries
// exactly the faults Compile reports for that policy.
func TestCompiledPolicyKeepsItsFaults(t *testing.T) {
	files, _ := filepath.Glob("testdata/compile/*.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	c := NewCompiler()
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var tc compileCase
		if err := yaml.UnmarshalStrict(data, &tc); err != nil {
			t.Fatal(err)
		}
		policies := decodePolicies(t, tc.Policies)
		_, err = Compile(policies)
		all, _ := err.(fault.List)
		for _, p := range policies {
			u := c.Policy(p)
			want := all.For(p.GetKind(), policyid.Key(p))
			if u.Errors().Error() != want.Error() {
				t.Errorf("%s: unit faults\n%s\nwant\n%s", u.Key(), u.Errors().Error(), want.Error())
			}
			if u.Source() != p {
				t.Errorf("%s: Source is not the compiled object", u.Key())
			}
		}
	}
}

// TestAssembleReplacesOnePolicy is the incremental path: after one policy
// changes, old units plus the one recompiled unit give the set Compile
// builds from scratch for the new inputs; the old set is untouched.
func TestAssembleReplacesOnePolicy(t *testing.T) {
	cases := assembleCases(t)
	lib := cases[0]
	// One CompileCache for the Compiler and Compile (see
	// TestAssembleMatchesCompile).
	cache := NewCompileCache()
	c := NewCompiler(WithCompileCache(cache))
	pus, eus := compileUnits(c, lib.policies, lib.exceptions)
	before, err := c.Assemble(pus, eus)
	if err != nil {
		t.Fatal(err)
	}
	snapshot := policyKeys(before.policies)

	// Change the first policy: drop its first rule (kept valid by the
	// library having more rules or by replacing it with a copy).
	i := 0
	changed := lib.policies[i].CreateDeepCopy()
	spec := changed.GetSpec()
	spec.Rules = append([]kyvernov1.Rule{}, spec.Rules...)
	spec.Rules[0].Name += "-renamed"
	policies := append([]kyvernov1.PolicyInterface{}, lib.policies...)
	policies[i] = changed
	next := append([]*CompiledPolicy{}, pus...)
	next[i] = c.Policy(changed)

	got, gotErr := c.Assemble(next, eus)
	want, wantErr := Compile(policies, WithExceptions(lib.exceptions), WithCompileCache(cache))
	if w, g := errorLines(wantErr), errorLines(gotErr); w != g {
		t.Fatalf("errors differ\nCompile:\n%s\nAssemble:\n%s", w, g)
	}
	compareSets(t, want, got)
	compareEvaluations(t, want, got, lib.resources)
	if p, _ := got.Lookup(changed.GetName()); p == nil || p.Rules()[0] != spec.Rules[0].Name {
		t.Errorf("the new set does not serve the changed policy")
	}
	if p, _ := before.Lookup(changed.GetName()); p == nil || strings.HasSuffix(p.Rules()[0], "-renamed") {
		t.Errorf("the old set changed")
	}
	if !reflect.DeepEqual(policyKeys(before.policies), snapshot) {
		t.Errorf("the old set's policies changed")
	}
	// Unchanged units are shared, not recompiled: the rules are the same.
	for j := 1; j < len(pus); j++ {
		if pus[j].policy == nil {
			continue
		}
		p, _ := got.Lookup(pus[j].key)
		if p == nil || p.cpol == nil || p.cpol != pus[j].policy.cpol {
			t.Errorf("%s: compiled rules not shared with the unit", pus[j].key)
		}
	}
}

// TestAssembledSetsShareUnitsConcurrently assembles new sets from shared
// units while other goroutines evaluate earlier ones (run with -race).
func TestAssembledSetsShareUnitsConcurrently(t *testing.T) {
	lib := assembleCases(t)[0]
	c := NewCompiler()
	pus, eus := compileUnits(c, lib.policies, lib.exceptions)
	first, err := c.Assemble(pus, eus)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			set := first
			for n := range 3 {
				if g%2 == 0 {
					// Reassemble a rotated order: positions change, units do not.
					k := (g + n) % len(pus)
					rotated := append(append([]*CompiledPolicy{}, pus[k:]...), pus[:k]...)
					s, err := c.Assemble(rotated, eus)
					if err != nil {
						t.Error(err)
						return
					}
					set = s
				}
				for _, res := range lib.resources[:min(40, len(lib.resources))] {
					req := &review.Request{Operation: kyvernov1.Create, Object: res}
					set.Validate(context.Background(), req)
					set.Mutate(context.Background(), req)
				}
			}
		})
	}
	wg.Wait()
	if !reflect.DeepEqual(policyKeys(first.policies), policyKeys(mustAssemble(t, c, pus, eus).policies)) {
		t.Error("assembling again gives another order")
	}
}

func mustAssemble(t *testing.T, c *Compiler, pus []*CompiledPolicy, eus []*CompiledException) *PolicySet {
	t.Helper()
	s, err := c.Assemble(pus, eus)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
