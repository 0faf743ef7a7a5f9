package clitest

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/mutate"
)

// Reasons of the rows that compare resources, in Kyverno's words.
const (
	ReasonResourceError     = "Resource error"
	ReasonPatchedMismatch   = "Patched resource didn't match the patched resource in the test result"
	ReasonGeneratedMismatch = "Generated resource didn't match the generated resource in the test result"
)

// expectations holds the documents of the files the results[] entries of
// a suite compare against (patchedResources, generatedResource(s)), read
// through the suite file cache, by the path written in the entry.
type expectations struct {
	docs map[string][]*unstructured.Unstructured
	errs map[string]error
}

// loadExpectations reads every patchedResources and generatedResource(s)
// file of the suite. A file that cannot be read fails only the rows that
// need it.
func loadExpectations(s *Suite, cache *fileCache) *expectations {
	ex := &expectations{docs: map[string][]*unstructured.Unstructured{}, errs: map[string]error{}}
	for i := range s.Test.Results {
		r := &s.Test.Results[i]
		files := append([]string{r.PatchedResources, r.GeneratedResource}, r.GeneratedResources...)
		for _, f := range files {
			if f == "" {
				continue
			}
			if _, done := ex.docs[f]; done {
				continue
			}
			if _, done := ex.errs[f]; done {
				continue
			}
			v, err := cache.get("objects", resolveIn(s.Dir, f), decodeObjectFile)
			if err != nil {
				ex.errs[f] = err
				continue
			}
			ex.docs[f] = v.([]*unstructured.Unstructured)
		}
	}
	return ex
}

// existingObjects reads the objects mutate-existing targets, generate
// clone sources and validate.cel params are taken from: the suite's
// resources, targetResources, clusterResources, paramResources and every
// cloneSourceResource file, as Kyverno's CLI puts them all in its fake
// cluster.
func existingObjects(s *Suite, cache *fileCache, in *inputs) (*objectSet, error) {
	set := &objectSet{}
	for _, o := range in.resources {
		set.add(o)
	}
	if in.cluster != nil {
		for _, o := range in.cluster.objects {
			set.add(o)
		}
	}
	files := slices.Concat(s.Test.TargetResources, s.Test.ParamResources)
	for i := range s.Test.Results {
		if f := s.Test.Results[i].CloneSourceResource; f != "" && !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	for _, f := range files {
		v, err := cache.get("objects", resolveIn(s.Dir, f), decodeObjectFile)
		if err != nil {
			return nil, err
		}
		for _, o := range v.([]*unstructured.Unstructured) {
			set.add(o)
		}
	}
	return set, nil
}

func resolveIn(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// objectSet serves a suite's existing objects to the engine.
type objectSet struct {
	objs []map[string]any
	keys map[resourceKey]bool
}

func (s *objectSet) add(o *unstructured.Unstructured) {
	if s.keys == nil {
		s.keys = map[resourceKey]bool{}
	}
	k := keyOf(o)
	if s.keys[k] {
		return
	}
	s.keys[k] = true
	s.objs = append(s.objs, o.Object)
}

// Objects returns the objects of the kind; the engine filters by namespace,
// name and selector.
func (s *objectSet) Objects(_ context.Context, q loader.ObjectQuery) ([]map[string]any, error) {
	var out []map[string]any
	for _, o := range s.objs {
		u := unstructured.Unstructured{Object: o}
		if u.GetKind() == q.Kind && (q.APIVersion == "" || u.GetAPIVersion() == q.APIVersion) {
			out = append(out, o)
		}
	}
	return out, nil
}

// outputs is what mutation and generation did to one request, kept to be
// merged into the evaluations of its policies (by policyid.Of).
type outputs struct {
	mutation   map[string]*engine.PolicyResponse
	generation map[string]*engine.PolicyResponse
	resource   *unstructured.Unstructured
}

// mutateAndGenerate runs the request through the mutate rules of the set
// (mutate-existing included), points the request at the mutated object so
// validation sees it, as Kyverno's CLI does, and runs the generate rules
// the way Kyverno's CLI does, skipped foreach rules generating too (spec
// §9.4 row 50, engine.WithCLIGeneration).
func mutateAndGenerate(ctx context.Context, set *engine.PolicySet, req *engine.Request, resource *unstructured.Unstructured, opts []engine.EvalOption) *outputs {
	out := &outputs{mutation: map[string]*engine.PolicyResponse{}, generation: map[string]*engine.PolicyResponse{}, resource: resource}
	m := set.Mutate(ctx, req, append(slices.Clone(opts), engine.WithMutateExisting())...)
	for i := range m.Policies {
		out.mutation[m.Policies[i].ID()] = &m.Policies[i]
	}
	if req.Object != nil {
		req.Object = m.Object
	}
	g := set.Generate(ctx, req, append(slices.Clone(opts), engine.WithCLIGeneration())...)
	for i := range g.Policies {
		out.generation[g.Policies[i].ID()] = &g.Policies[i]
	}
	return out
}

// annotate adds the policy's mutate responses (before its validate ones)
// and generate responses (after) to e, with the patched object.
func (o *outputs) annotate(e *evaluation, policyID string, ex *expectations) {
	e.expected = ex
	var rules []ruleOutcome
	if pr := o.mutation[policyID]; pr != nil {
		e.Patched = pr.Patched
		for _, rr := range pr.Rules {
			if rr.Target != nil {
				// Responses about targets are rows of the target (see
				// targetEvaluations) as well as of the trigger.
				rules = append(rules, outcomeOf(rr))
				continue
			}
			if rr.Status == engine.StatusError {
				e.MutationFailed = true
			}
			rules = append(rules, outcomeOf(rr))
		}
	}
	rules = append(rules, e.Rules...)
	if pr := o.generation[policyID]; pr != nil {
		for _, rr := range pr.Rules {
			rules = append(rules, outcomeOf(rr))
		}
	}
	e.Rules = rules
}

// targetEvaluations returns one evaluation per existing resource a
// mutate-existing rule patched, holding that rule's response and the
// patched target (spec §5.3).
func (o *outputs) targetEvaluations(op string, ex *expectations) []evaluation {
	var out []evaluation
	keys := slices.Sorted(maps.Keys(o.mutation))
	for _, k := range keys {
		pr := o.mutation[k]
		for _, rr := range pr.Rules {
			if rr.PatchedTarget == nil {
				continue
			}
			t := rr.Target
			out = append(out, evaluation{
				Operation: op,
				Resource:  resourceKey{APIVersion: t.APIVersion, Kind: t.Kind, Namespace: t.Namespace, Name: t.Name},
				Policy:    pr.Policy.GetName(),
				Kind:      pr.Policy.GetKind(),
				Rules:     []ruleOutcome{outcomeOf(rr)},
				Patched:   rr.PatchedTarget,
				expected:  ex,
			})
		}
	}
	return out
}

func outcomeOf(rr engine.RuleResponse) ruleOutcome {
	out := ruleOutcome{Name: rr.Name, Status: string(rr.Status), Message: rr.Message, Type: string(rr.Type)}
	for _, g := range rr.Generated {
		out.Generated = append(out.Generated, g.Object)
	}
	return out
}

// judgeOutputs turns the row of one rule response into the rows Kyverno
// prints when the entry also compares resources (spec §9.2, §9.4):
//   - patchedResources: the policy's patched object must equal the document
//     of the same apiVersion, kind, namespace and name; a document missing
//     from the file drops the row (a failure with failOnMissingResources);
//     so does a policy whose mutation errored, as Kyverno's patched object
//     is empty then;
//   - generatedResource(s): one row per generated object, which must equal
//     the document of its identity (generatedResource) or any document
//     (generatedResources); without generated objects only the status is
//     compared.
func judgeOutputs(exp *TestResult, e *evaluation, rr ruleOutcome, row Row) []Row {
	failed := func(r Row, reason, msg string) []Row {
		r.Verdict, r.Reason, r.Message = Failed, reason, msg
		return []Row{r}
	}
	if exp.PatchedResources != "" && rr.Type == string(engine.TypeMutation) && e.expected != nil {
		if e.MutationFailed || e.Patched == nil {
			if exp.FailOnMissingResources {
				return failed(row, ReasonResourceError, "no patched resource")
			}
			return nil
		}
		if err := e.expected.errs[exp.PatchedResources]; err != nil {
			return failed(row, ReasonResourceError, err.Error())
		}
		want := e.expected.find(exp.PatchedResources, e.Patched)
		if want == nil {
			if exp.FailOnMissingResources {
				return failed(row, ReasonResourceError, fmt.Sprintf("resource %s not found in manifest %s", objectKey(e.Patched), exp.PatchedResources))
			}
			return nil
		}
		if !SameResource(e.Patched, want) {
			return failed(row, ReasonPatchedMismatch, diffSummary(e.Patched, want))
		}
		return []Row{row}
	}
	if (exp.GeneratedResource != "" || len(exp.GeneratedResources) > 0) && len(rr.Generated) > 0 && e.expected != nil {
		var rows []Row
		for _, g := range rr.Generated {
			r := row
			r.Resource = objectKey(g).String()
			rows = append(rows, judgeGenerated(exp, e.expected, g, r)...)
		}
		return rows
	}
	return []Row{row}
}

func judgeGenerated(exp *TestResult, ex *expectations, got map[string]any, row Row) []Row {
	fail := func(reason, msg string) []Row {
		row.Verdict, row.Reason, row.Message = Failed, reason, msg
		return []Row{row}
	}
	if exp.GeneratedResource != "" {
		if err := ex.errs[exp.GeneratedResource]; err != nil {
			return fail(ReasonResourceError, err.Error())
		}
		want := ex.find(exp.GeneratedResource, got)
		if want == nil {
			return fail(ReasonResourceError, fmt.Sprintf("resource %s not found in manifest %s", objectKey(got), exp.GeneratedResource))
		}
		if !SameResource(got, want) {
			return fail(ReasonGeneratedMismatch, diffSummary(got, want))
		}
		return []Row{row}
	}
	for _, f := range exp.GeneratedResources {
		if err := ex.errs[f]; err != nil {
			return fail(ReasonResourceError, err.Error())
		}
		for _, d := range ex.docs[f] {
			if SameResource(got, d.Object) {
				return []Row{row}
			}
		}
	}
	return fail(ReasonGeneratedMismatch, fmt.Sprintf("%s equals no document of %s", objectKey(got), strings.Join(exp.GeneratedResources, ", ")))
}

// find returns the document of file with the identity of obj (apiVersion,
// kind, namespace, name), or nil.
func (ex *expectations) find(file string, obj map[string]any) map[string]any {
	k := objectKey(obj)
	for _, d := range ex.docs[file] {
		if keyOf(d) == k {
			return d.Object
		}
	}
	return nil
}

func objectKey(obj map[string]any) resourceKey {
	return keyOf(&unstructured.Unstructured{Object: obj})
}

// SameResource compares an actual and an expected resource the way
// `kyverno test` does (spec §9.2): generate.kyverno.io/* labels are
// dropped and app.kubernetes.io/managed-by defaults to kyverno on both
// sides; null values, empty maps and empty lists are dropped; what remains
// must be equal as JSON (list order counts; 1 equals 1.0, "1" does not).
func SameResource(actual, expected map[string]any) bool {
	return mutate.Equal(normalise(actual), normalise(expected))
}

func normalise(obj map[string]any) any {
	t := tidy(obj)
	m, _ := t.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		m["metadata"] = meta
	}
	labels, _ := meta["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
		meta["labels"] = labels
	}
	for k := range labels {
		if strings.HasPrefix(k, "generate.kyverno.io/") {
			delete(labels, k)
		}
	}
	if _, ok := labels["app.kubernetes.io/managed-by"]; !ok {
		labels["app.kubernetes.io/managed-by"] = "kyverno"
	}
	return m
}

// tidy returns a copy of v without null values, empty maps and empty
// lists, recursively; nil when nothing is left.
func tidy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			if c := tidy(val); c != nil {
				out[k] = c
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		out := make([]any, 0, len(t))
		for _, val := range t {
			if c := tidy(val); c != nil {
				out = append(out, c)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	default:
		return v
	}
}

// diffSummary describes how actual differs from expected: the RFC 6902
// operations that would turn the actual resource into the expected one.
func diffSummary(actual, expected map[string]any) string {
	a, _ := normalise(actual).(map[string]any)
	e, _ := normalise(expected).(map[string]any)
	ops := mutate.Diff(a, e)
	const limit = 5
	var parts []string
	for i, op := range ops {
		if i == limit {
			parts = append(parts, fmt.Sprintf("and %d more", len(ops)-limit))
			break
		}
		if op.Op == "remove" {
			parts = append(parts, "unexpected "+op.Path)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: want %s", op.Path, compact(op.Value)))
	}
	return strings.Join(parts, "; ")
}

func compact(v any) string {
	s := fmt.Sprintf("%v", v)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
