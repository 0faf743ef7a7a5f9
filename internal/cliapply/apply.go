// Package cliapply evaluates policies against resource manifests for
// `charter apply`: one compiled PolicySet, resources decoded and evaluated
// concurrently, verdicts kept in input order.
package cliapply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/internal/clitest/manifest"
)

// Options configure Run.
type Options struct {
	// PolicyPaths are policy files or directories.
	PolicyPaths []string
	// ResourcePaths are resource files, directories, or "-" for Stdin.
	ResourcePaths []string
	Stdin         io.Reader
	// AuditWarn reports failures of Audit rules as warn.
	AuditWarn bool
	// Workers bounds concurrent decoding and evaluation; 0 means GOMAXPROCS.
	Workers int
}

// Verdict is one rule's result on one resource.
type Verdict struct {
	Resource engine.ResourceRef
	// Policy is "name", or "namespace/name" for a namespaced Policy.
	Policy string
	Rule   string
	// Action is the rule's effective failure action (validate rules).
	Action engine.Action
	// Result is pass, fail, warn, error or skip; with AuditWarn, a failing
	// Audit rule is warn.
	Result     string
	Message    string
	Properties map[string]string

	source kyvernov1.PolicyInterface
}

// Outcome is what Run found.
type Outcome struct {
	// Verdicts are in resource order, then policy and rule order.
	Verdicts []Verdict
	// Resources is how many resources were evaluated; Policies how many
	// policies and rules they met.
	Resources, Policies, Rules int
	// Blocked is true when a rule whose action is Enforce failed: the
	// request would be denied at admission.
	Blocked  bool
	Warnings []string
	// Mutated are the resources mutate rules changed, as patched; Generated
	// the objects generate rules want to exist (resources.go).
	Mutated, Generated []map[string]any
}

// Counts tallies verdicts by result.
func (o *Outcome) Counts() map[string]int {
	c := map[string]int{"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0}
	for _, v := range o.Verdicts {
		c[v.Result]++
	}
	return c
}

// SummaryLine is "pass: N, fail: N, warn: N, error: N, skip: N".
func (o *Outcome) SummaryLine() string {
	c := o.Counts()
	return fmt.Sprintf("pass: %d, fail: %d, warn: %d, error: %d, skip: %d", c["pass"], c["fail"], c["warn"], c["error"], c["skip"])
}

// Run loads and compiles the policies, then evaluates every resource.
func Run(ctx context.Context, opts Options) (*Outcome, error) {
	out := &Outcome{}
	set, err := loadPolicies(opts.PolicyPaths, out)
	if err != nil {
		return nil, err
	}
	raws, err := splitResources(opts.ResourcePaths, opts.Stdin)
	if err != nil {
		return nil, err
	}

	// Decode and evaluate each document on a bounded pool; results land in
	// their document's slot so output keeps the input order.
	perDoc := make([][]Verdict, len(raws))
	blocked := make([]bool, len(raws))
	counts := make([]int, len(raws))
	errs := make([]error, len(raws))
	produced := make([]producedObjects, len(raws))
	parallel(opts.Workers, len(raws), func(i int) {
		perDoc[i], blocked[i], counts[i], errs[i] = evaluateDocument(ctx, set, raws[i], opts.AuditWarn, &produced[i])
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i := range raws {
		out.Verdicts = append(out.Verdicts, perDoc[i]...)
		out.Blocked = out.Blocked || blocked[i]
		out.Resources += counts[i]
		out.Mutated = append(out.Mutated, produced[i].mutated...)
		out.Generated = append(out.Generated, produced[i].generated...)
	}
	return out, nil
}

func loadPolicies(paths []string, out *Outcome) (*engine.PolicySet, error) {
	files, err := manifest.Files(paths)
	if err != nil {
		return nil, err
	}
	var policies []kyvernov1.PolicyInterface
	var all manifest.Policies
	for _, f := range files {
		if f == "-" {
			return nil, fmt.Errorf("policies cannot be read from stdin; use --resource - for resources")
		}
		docs, err := manifest.ReadFile(f)
		if err != nil {
			return nil, err
		}
		p, err := manifest.DecodePolicies(docs)
		if err != nil {
			return nil, err
		}
		policies = append(policies, p.Policies...)
		all.Exceptions = append(all.Exceptions, p.Exceptions...)
		for name, kind := range p.Unsupported {
			out.Warnings = append(out.Warnings, fmt.Sprintf("policy %s (%s) is not supported yet, skipped", name, kind))
		}
		for _, other := range p.Others {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s is not a policy, skipped", other))
		}
	}
	if len(policies) == 0 {
		return nil, fmt.Errorf("no ClusterPolicy or Policy found in %v", paths)
	}
	set, err := engine.Compile(policies, engine.WithExceptions(all.Exceptions))
	if err != nil {
		return nil, fmt.Errorf("invalid policies:\n%w", err)
	}
	out.Policies = len(set.Policies())
	for _, p := range set.Policies() {
		out.Rules += len(p.Rules())
	}
	return set, nil
}

// splitResources reads every resource file (stdin for "-") and cuts it into
// raw documents; decoding happens later, concurrently.
func splitResources(paths []string, stdin io.Reader) ([]manifest.RawDocument, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("no resources: pass --resource FILE|DIR|-")
	}
	files, err := manifest.Files(paths)
	if err != nil {
		return nil, err
	}
	var raws []manifest.RawDocument
	for _, f := range files {
		var data []byte
		if f == "-" {
			if stdin == nil {
				stdin = os.Stdin
			}
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(f)
		}
		if err != nil {
			return nil, err
		}
		docs, err := manifest.SplitRaw(data, f)
		if err != nil {
			return nil, err
		}
		raws = append(raws, docs...)
	}
	return raws, nil
}

func evaluateDocument(ctx context.Context, set *engine.PolicySet, raw manifest.RawDocument, auditWarn bool, produced *producedObjects) ([]Verdict, bool, int, error) {
	doc, err := raw.Decode()
	if err != nil || doc.Value == nil {
		return nil, false, 0, err
	}
	objs, err := manifest.Objects([]manifest.Document{doc})
	if err != nil {
		return nil, false, 0, err
	}
	var verdicts []Verdict
	blocked := false
	for _, obj := range objs {
		manifest.DefaultNamespace(obj)
		// Mutation first, then validation of the mutated object and
		// generation for it, as admission does (resources.go).
		mutation, resp, generation := evaluateObject(ctx, set, obj, produced)
		blocked = blocked || resp.Blocked()
		verdicts = append(verdicts, verdictsOf(obj, mutation, auditWarn)...)
		verdicts = append(verdicts, verdictsOf(obj, resp, auditWarn)...)
		verdicts = append(verdicts, verdictsOf(obj, generation, auditWarn)...)
	}
	return verdicts, blocked, len(objs), nil
}

func verdictsOf(obj *unstructured.Unstructured, resp *engine.Response, auditWarn bool) []Verdict {
	ref := resp.Resource
	if ref.Name == "" {
		ref = engine.ResourceRef{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
	}
	var out []Verdict
	for _, pr := range resp.Policies {
		for _, rr := range pr.Rules {
			result := string(rr.Status)
			if auditWarn && rr.Status == engine.StatusFail && rr.Action != engine.Enforce {
				result = string(engine.StatusWarn)
			}
			out = append(out, Verdict{
				Resource: ref, Policy: pr.Key, Rule: rr.Name, Action: rr.Action,
				Result: result, Message: rr.Message, Properties: rr.Properties, source: pr.Policy,
			})
		}
	}
	return out
}

// parallel calls fn(0..n-1) on a bounded pool of goroutines.
func parallel(workers, n int, fn func(int)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	// Hand out indexes in chunks: documents are small and a channel send
	// per document would cost more than some evaluations.
	const chunk = 16
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				next.Lock()
				start := i
				i += chunk
				next.Unlock()
				if start >= n {
					return
				}
				for j := start; j < min(start+chunk, n); j++ {
					fn(j)
				}
			}
		})
	}
	wg.Wait()
}
