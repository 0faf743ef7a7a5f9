package clitest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/unsupported"
)

// Options configure a Run.
type Options struct {
	// FileName is the test file name looked for in directories.
	FileName string
	// Workers bounds how many suites are evaluated at once; 0 means
	// GOMAXPROCS.
	Workers int
	// Selector, when set, narrows every suite to the expected results it
	// picks; a suite left with none is not run.
	Selector *CaseSelector
	// Root, when set, confines the run to a folder: a test file, or a file
	// a test names, outside it (symbolic links resolved) is an error. The
	// GitOps test gate sets it to the repository's checkout.
	Root string
	// ImageVerifier verifies images for verifyImages rules; without one
	// such rules end in error.
	ImageVerifier loader.ImageVerifier
	// ImageDigestPins pins the images of ImageValidatingPolicies with
	// mutateDigest to their digest before validation, as their mutating
	// webhook does at admission (engine.WithImageDigestPins). Kyverno's
	// CLI does not; charter convert --verify does, so a converted
	// verifyImages rule is compared as admission runs it, the
	// ClusterPolicy pinning its images in the CLI too.
	ImageDigestPins bool
}

// SuiteResult is the outcome of one suite.
type SuiteResult struct {
	Suite *Suite
	// Err is set when the suite could not run (bad file, missing input);
	// Rows is empty then.
	Err  error
	Rows []Row
	// CheckedNothing says why a suite with results checked none of them
	// (checkedNothing); such a suite fails the run.
	CheckedNothing string
	// Warnings are problems that did not stop the suite (duplicate
	// resources, invalid policies).
	Warnings []string
}

// Failed reports whether the suite broke, checked nothing or has a
// failing row.
func (r *SuiteResult) Failed() bool {
	if r.Err != nil || r.CheckedNothing != "" {
		return true
	}
	for _, row := range r.Rows {
		if row.Verdict == Failed {
			return true
		}
	}
	return false
}

// Runner evaluates suites. Files read and policy sets compiled are shared
// by the suites of one Runner that use them at the same time.
type Runner struct {
	opts  Options
	files *fileCache
	sets  weakMap[compiled]
	// cache is the run's compile cache: suites share policies, and a
	// policy compiled into several sets is compiled once.
	cache *engine.CompileCache
}

type compiled struct {
	once sync.Once
	set  *engine.PolicySet
	// invalid maps the key of each policy that failed to compile to its
	// faults.
	invalid  map[string]string
	warnings []string
	err      error
}

// NewRunner returns a Runner.
func NewRunner(opts Options) *Runner {
	files := newFileCache()
	if opts.Root != "" {
		if root, err := filepath.EvalSymlinks(opts.Root); err == nil {
			files.root = root
		} else {
			files.root = filepath.Clean(opts.Root)
		}
	}
	return &Runner{opts: opts, files: files, cache: engine.NewCompileCache()}
}

// Run discovers the test files under paths and evaluates every suite in
// them, concurrently, returning results in discovery order.
func (r *Runner) Run(ctx context.Context, paths []string) ([]*SuiteResult, error) {
	files, err := Discover(paths, r.opts.FileName)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		name := r.opts.FileName
		if name == "" {
			name = DefaultFileName
		}
		return nil, fmt.Errorf("no %s found under %s", name, strings.Join(paths, ", "))
	}
	// Loading is cheap next to evaluation, but it parses YAML too: do it in
	// the pool, one task per file, and flatten in order afterwards.
	perFile := make([][]*SuiteResult, len(files))
	r.parallel(len(files), func(i int) {
		if err := r.files.within(files[i]); err != nil {
			perFile[i] = []*SuiteResult{{Suite: &Suite{File: files[i], Dir: filepath.Dir(files[i]), Err: err}, Err: err}}
			return
		}
		for _, s := range LoadFile(files[i]) {
			if !r.selects(s) {
				continue
			}
			perFile[i] = append(perFile[i], &SuiteResult{Suite: s, Err: s.Err})
		}
	})
	var results []*SuiteResult
	for _, rs := range perFile {
		results = append(results, rs...)
	}
	r.parallel(len(results), func(i int) {
		if res := results[i]; res.Err == nil {
			r.runSuite(ctx, res)
		}
	})
	return results, nil
}

// selects narrows a loaded suite to the results the case selector picks,
// and reports whether any is left. Broken suites are always reported.
func (r *Runner) selects(s *Suite) bool {
	if r.opts.Selector.all() || s.Test == nil {
		return true
	}
	t := *s.Test
	t.Results = r.opts.Selector.selectResults(t.Results)
	s.Test = &t
	return len(t.Results) > 0
}

// parallel calls fn(0..n-1) on a bounded pool of goroutines.
func (r *Runner) parallel(n int, fn func(int)) {
	workers := r.opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func (r *Runner) runSuite(ctx context.Context, res *SuiteResult) {
	s := res.Suite
	in, err := loadInputs(s, r.files)
	if err != nil {
		res.Err = fmt.Errorf("%s: %w", s.Name(), err)
		return
	}
	res.Warnings = append(res.Warnings, in.warnings...)
	c := r.compile(in)
	if c.err != nil {
		res.Err = fmt.Errorf("%s: %w", s.Name(), c.err)
		return
	}
	res.Warnings = append(res.Warnings, c.warnings...)
	for _, id := range slices.Sorted(maps.Keys(c.invalid)) {
		_, key := policyid.Parse(id)
		res.Warnings = append(res.Warnings, fmt.Sprintf("policy %s is invalid: %s", key, c.invalid[id]))
	}
	evals := evaluate(ctx, c, in, operations(s.Test), r.opts)
	res.Rows = judge(s.Name(), s.Test, evals)
	res.CheckedNothing = checkedNothing(s.Test, res.Rows)
}

// compile compiles a suite's policies and exceptions, once per distinct
// list of files while a suite uses them.
func (r *Runner) compile(in *inputs) *compiled {
	c := r.sets.get(strings.Join(in.policyFiles, "\x00"))
	c.once.Do(func() { c.build(in, r.cache) })
	return c
}

// build compiles the inputs' policies and exceptions into c, reusing the
// parts cache holds.
func (c *compiled) build(in *inputs, cache *engine.CompileCache) {
	set, err := engine.Compile(in.policies, engine.WithExceptions(in.exceptions), engine.WithCELExceptions(in.celExceptions),
		engine.WithCompileCache(cache))
	var faults fault.List
	switch {
	case err == nil:
	case errors.As(err, &faults):
		c.invalid = map[string]string{}
		for _, f := range faults {
			if f.Kind == "PolicyException" {
				c.err = err
				return
			}
			msg := f.Fault
			if f.Field != "" {
				msg = f.Field + ": " + f.Fault
			}
			// Keyed by ID: a ClusterPolicy and a ValidatingPolicy of
			// one name are two policies.
			id := policyid.For(f.Kind, f.Name)
			if prev := c.invalid[id]; prev != "" {
				msg = prev + "; " + msg
			}
			c.invalid[id] = msg
		}
	default:
		c.err = err
		return
	}
	c.set = set
}

// operations lists the operations the suite's results ask for; each is a
// separate evaluation run.
func operations(t *Test) []string {
	var ops []string
	for _, res := range t.Results {
		op := res.Operation
		if op == "" {
			op = "CREATE"
		}
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	return ops
}

// evaluate runs every resource of the suite through the policy set once per
// operation and records one evaluation per policy × resource.
func evaluate(ctx context.Context, c *compiled, in *inputs, ops []string, opts Options) []evaluation {
	loaders := loader.Loaders{
		ImageVerifier: opts.ImageVerifier,
		ConfigMaps:    in.cluster,
		APICalls:      in.cluster,
		GlobalContext: in.cluster,
		Namespaces:    namespaceSource{in.namespaces, namespaceObjects(in.specs...)},
		Objects:       in.existing,
		Resources:     in.celContext,
		Images:        in.celContext,
	}
	evalOpts := []engine.EvalOption{engine.WithLoaders(loaders), engine.WithValues(in.values)}
	if opts.ImageDigestPins {
		evalOpts = append(evalOpts, engine.WithImageDigestPins())
	}
	var evals []evaluation
	for _, op := range ops {
		for _, obj := range in.resources {
			key := keyOf(obj)
			ref := engine.ResourceRef{APIVersion: key.APIVersion, Kind: key.Kind, Namespace: key.Namespace, Name: key.Name}
			req := buildRequest(obj, op, in)
			out := mutateAndGenerate(ctx, c.set, req, obj, evalOpts)
			resp := c.set.Validate(ctx, req, evalOpts...)
			byID := make(map[string]*engine.PolicyResponse, len(resp.Policies))
			for i := range resp.Policies {
				byID[resp.Policies[i].ID()] = &resp.Policies[i]
			}
			for _, p := range in.policies {
				id := policyid.Of(p)
				e := evaluation{Operation: op, Resource: key, Policy: p.GetName(), Kind: p.GetKind()}
				if fault, bad := c.invalid[id]; bad {
					e.Invalid = fault
					evals = append(evals, e)
					continue
				}
				pr := byID[id]
				// Kyverno's CLI builds each policy's request on its own: a
				// request.operation of UPDATE or DELETE among the policy's
				// values for this resource turns the request into one.
				if valueOp := operationFromValues(in.values.Variables(p, ref)); valueOp != "" && valueOp != op {
					if compiled, ok := c.set.Lookup(id); ok {
						own := compiled.Validate(ctx, buildRequest(obj, valueOp, in), evalOpts...)
						pr = &own
					}
				}
				if pr != nil {
					e.Rules = make([]ruleOutcome, len(pr.Rules))
					for i, rr := range pr.Rules {
						e.Rules[i] = ruleOutcome{Name: rr.Name, Status: string(rr.Status), Message: rr.Message}
					}
				}
				if compiled, ok := c.set.Lookup(id); ok {
					e.unsupportedRules = cliUnsupported(compiled)
				}
				out.annotate(&e, id, in.expected)
				evals = append(evals, e)
			}
			evals = append(evals, out.targetEvaluations(op, in.expected)...)
			for _, name := range slices.Sorted(maps.Keys(in.unsupported)) {
				evals = append(evals, evaluation{Operation: op, Resource: key, Policy: name, Unsupported: true,
					Invalid: in.unsupported[name] + " is not supported by charter yet"})
			}
		}
	}
	return evals
}

// cliUnsupported maps each rule of the policy that uses a feature charter
// does not run in the CLI to the findings' messages; a finding outside
// spec.rules concerns every rule.
func cliUnsupported(p *engine.Policy) map[string]string {
	findings := p.Unsupported().In(unsupported.InCLI)
	if len(findings) == 0 {
		return nil
	}
	rules := p.Source().GetSpec().Rules
	out := map[string]string{}
	add := func(name, msg string) {
		if prev := out[name]; prev != "" {
			msg = prev + "; " + msg
		}
		out[name] = msg
	}
	for _, f := range findings {
		var i int
		if _, err := fmt.Sscanf(f.Field, "spec.rules[%d]", &i); err == nil && i >= 0 && i < len(rules) {
			add(rules[i].Name, f.Message())
			continue
		}
		for _, r := range rules {
			add(r.Name, f.Message())
		}
	}
	return out
}

// operationFromValues returns UPDATE or DELETE when the values set
// request.operation to it.
func operationFromValues(vars map[string]any) string {
	switch op, _ := vars["request.operation"].(string); op {
	case "UPDATE", "DELETE":
		return op
	}
	return ""
}

// buildRequest makes the admission request the CLI simulates for a
// resource: CREATE of the object; UPDATE with the object as its own old
// object; DELETE of the object. User info and subresources come from the
// suite.
func buildRequest(obj *unstructured.Unstructured, op string, in *inputs) *engine.Request {
	req := &engine.Request{Operation: kyvernov1.AdmissionOperation(op)}
	switch op {
	case "UPDATE":
		req.Object, req.OldObject = obj.Object, obj.Object
	case "DELETE":
		req.OldObject = obj.Object
		req.Kind = obj.GroupVersionKind()
		req.Namespace, req.Name = obj.GetNamespace(), obj.GetName()
	default:
		req.Object = obj.Object
	}
	if u := in.user; u != nil {
		req.UserInfo, req.Roles, req.ClusterRoles = u.AdmissionUser, u.Roles, u.ClusterRoles
	}
	gvk := obj.GroupVersionKind()
	for _, spec := range in.specs {
		for _, sr := range spec.Subresources {
			sub := sr.Subresource
			if sub.Kind != gvk.Kind || sub.Group != gvk.Group || sub.Version != gvk.Version {
				continue
			}
			// Kyverno's CLI evaluates a subresource object (PodExecOptions)
			// as a request for its parent kind and the subresource.
			parent := sr.ParentResource
			_, subName, _ := strings.Cut(sub.Name, "/")
			req.Kind = schema.GroupVersionKind{Group: parent.Group, Version: parent.Version, Kind: parent.Kind}
			req.Resource = schema.GroupVersionResource{Group: parent.Group, Version: parent.Version, Resource: parent.Name}
			req.SubResource = subName
		}
	}
	return req
}
