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
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/cpol"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/unsupported"
	"github.com/charter-dev/charter/internal/clitest"
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

	// ExceptionPaths are PolicyException files or directories
	// (--exception); exceptions among the policies apply too.
	ExceptionPaths []string
	// ValuesFile pins variables and namespace labels, as a test's values
	// file does (--values-file); Set pins variables, key=value, over it
	// (--set).
	ValuesFile string
	Set        []string
	// UserInfoFile names who the simulated requests come from, a `kind:
	// UserInfo` file (--userinfo).
	UserInfoFile string
	// Loaders read what context entries, namespaceSelectors, mutate
	// targets and clone sources need (--cluster); unset loaders give the
	// usual error results. Namespace labels come from the values file when
	// Loaders has none.
	Loaders loader.Loaders
	// Objects are resources evaluated after those of ResourcePaths.
	Objects []*unstructured.Unstructured
	// ResourcesFor, when set and no ResourcePaths are given, returns the
	// resources to evaluate for the compiled policies (--cluster reads the
	// kinds they match from the cluster).
	ResourcesFor func(ctx context.Context, policies []kyvernov1.PolicyInterface) ([]*unstructured.Unstructured, error)
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
	// Notes are remarks about the input that are not problems, such as how
	// many files of a policy folder held no policy.
	Notes []string
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
	exceptions, err := loadExceptions(opts.ExceptionPaths)
	if err != nil {
		return nil, err
	}
	set, err := loadPolicies(opts.PolicyPaths, exceptions, out)
	if err != nil {
		return nil, err
	}
	if len(opts.ResourcePaths) == 0 && opts.ResourcesFor != nil {
		var policies []kyvernov1.PolicyInterface
		for _, p := range set.Policies() {
			policies = append(policies, p.Source())
		}
		objs, err := opts.ResourcesFor(ctx, policies)
		if err != nil {
			return nil, err
		}
		if len(objs) == 0 {
			out.Notes = append(out.Notes, "no resources of the kinds the policies match were found")
		}
		opts.Objects = append(opts.Objects, objs...)
	}
	var raws []manifest.RawDocument
	if len(opts.ResourcePaths) > 0 || (len(opts.Objects) == 0 && opts.ResourcesFor == nil) {
		if raws, err = splitResources(opts.ResourcePaths, opts.Stdin); err != nil {
			return nil, err
		}
	}
	ev := &evaluator{set: set, auditWarn: opts.AuditWarn}
	if err := ev.configure(opts); err != nil {
		return nil, err
	}

	// Decode and evaluate each document on a bounded pool; results land in
	// their document's slot so output keeps the input order.
	n := len(raws) + len(opts.Objects)
	perDoc := make([][]Verdict, n)
	blocked := make([]bool, n)
	counts := make([]int, n)
	errs := make([]error, n)
	produced := make([]producedObjects, n)
	parallel(opts.Workers, n, func(i int) {
		if i < len(raws) {
			perDoc[i], blocked[i], counts[i], errs[i] = ev.document(ctx, raws[i], &produced[i])
			return
		}
		obj := opts.Objects[i-len(raws)]
		perDoc[i], blocked[i] = ev.object(ctx, obj, &produced[i])
		counts[i] = 1
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i := range n {
		out.Verdicts = append(out.Verdicts, perDoc[i]...)
		out.Blocked = out.Blocked || blocked[i]
		out.Resources += counts[i]
		out.Mutated = append(out.Mutated, produced[i].mutated...)
		out.Generated = append(out.Generated, produced[i].generated...)
	}
	return out, nil
}

// loadPolicies reads the policies (and the exceptions among them) and
// compiles them with the given exceptions. A file named on the command line
// that holds something other than policies gets a warning; the files of a
// folder that hold no policy at all (tests, values, resources kept beside
// the policies) are passed over with one note.
func loadPolicies(paths []string, exceptions exceptionsOf, out *Outcome) (*engine.PolicySet, error) {
	var policies []kyvernov1.PolicyInterface
	declared := manifest.Declared{}
	// fileOf names the file of each policy and exception read, by kind
	// and key, so a compile fault names where to look.
	fileOf := map[string]string{}
	for _, root := range paths {
		if root == "-" {
			return nil, fmt.Errorf("policies cannot be read from stdin; use --resource - for resources")
		}
		info, err := os.Stat(root)
		if err != nil {
			return nil, err
		}
		files, err := manifest.Files([]string{root})
		if err != nil {
			return nil, err
		}
		skipped := 0
		for _, f := range files {
			docs, err := manifest.ReadFile(f)
			if err != nil {
				if info.IsDir() && !mayHoldPolicy(f) {
					skipped++
					continue
				}
				return nil, err
			}
			p, err := manifest.DecodePolicies(docs)
			if err != nil {
				if info.IsDir() && !holdsPolicy(docs) {
					skipped++
					continue
				}
				return nil, err
			}
			if info.IsDir() && len(p.Policies) == 0 && len(p.Exceptions) == 0 && len(p.CELExceptions) == 0 && len(p.Unsupported) == 0 {
				skipped++
				continue
			}
			if err := declared.Add(f, p.Policies...); err != nil {
				return nil, err
			}
			policies = append(policies, p.Policies...)
			exceptions.add(p)
			for _, pol := range p.Policies {
				fileOf[pol.GetKind()+" "+policyid.Key(pol)] = f
			}
			for _, ex := range p.Exceptions {
				fileOf["PolicyException "+ex.Namespace+"/"+ex.Name] = f
			}
			for _, ex := range p.CELExceptions {
				fileOf["PolicyException "+ex.Namespace+"/"+ex.Name] = f
			}
			for name, kind := range p.Unsupported {
				out.Warnings = append(out.Warnings, fmt.Sprintf("policy %s (%s) is not supported yet, skipped", name, kind))
			}
			for _, other := range p.Others {
				out.Warnings = append(out.Warnings, fmt.Sprintf("%s is not a policy, skipped", other))
			}
		}
		if skipped > 0 {
			out.Notes = append(out.Notes, fmt.Sprintf("%s: skipped %d file(s) without policies (tests, values, resources)", root, skipped))
		}
	}
	if len(policies) == 0 {
		return nil, fmt.Errorf("no ClusterPolicy or Policy found in %v", paths)
	}
	// A policies.kyverno.io PolicyException acts in its own namespace
	// only, as in charter test.
	set, err := engine.Compile(policies, engine.WithExceptions(exceptions.kyverno), engine.WithCELExceptions(exceptions.cel))
	if err != nil {
		return nil, fmt.Errorf("invalid policies:\n%w", inFiles(err, fileOf))
	}
	// The warnings Kyverno gives when it admits a policy (deprecated
	// operators, ...), as admission gives them.
	for _, p := range policies {
		for _, w := range cpol.Warnings(p) {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s %q: %s", p.GetKind(), policyid.Key(p), w))
		}
	}
	// What charter does not run in the CLI gives no verdict to trust:
	// name each such field.
	for _, u := range set.Unsupported().In(unsupported.InCLI) {
		out.Warnings = append(out.Warnings, u.Error())
	}
	out.Policies = len(set.Policies())
	for _, p := range set.Policies() {
		out.Rules += len(p.Rules())
	}
	return set, nil
}

// inFiles puts the file each compile fault's object was read from before
// the fault ("policies/x.yaml: ClusterPolicy "x": spec.rules[0]...: ..."):
// in a folder of policies the kind and name alone take a search. Faults of
// objects read from no file (exceptions given with --exception are named
// by their flag) and errors that are not compile faults pass unchanged.
func inFiles(err error, fileOf map[string]string) error {
	faults, ok := err.(fault.List)
	if !ok {
		return err
	}
	lines := make([]string, len(faults))
	for i, f := range faults {
		lines[i] = f.Error()
		if file, ok := fileOf[f.Kind+" "+f.Name]; ok {
			lines[i] = file + ": " + lines[i]
		}
	}
	return &filedFaults{faults: faults, text: strings.Join(lines, "\n")}
}

// filedFaults is fault.List with the file of each fault in its
// text; errors.As still finds the faults.
type filedFaults struct {
	faults fault.List
	text   string
}

func (e *filedFaults) Error() string { return e.text }
func (e *filedFaults) Unwrap() error { return e.faults }

// holdsPolicy reports whether documents include a kyverno.io or
// policies.kyverno.io one: a folder's file that does is read strictly.
func holdsPolicy(docs []manifest.Document) bool {
	for _, d := range docs {
		apiVersion, _ := d.TypeMeta()
		if group, _, _ := strings.Cut(apiVersion, "/"); strings.HasSuffix(group, "kyverno.io") && group != "cli.kyverno.io" {
			return true
		}
	}
	return false
}

// mayHoldPolicy reports whether a file that is not valid YAML may still
// have been meant as a policy: its text names a kyverno.io kind.
func mayHoldPolicy(file string) bool {
	data, err := os.ReadFile(file)
	if err != nil {
		return true
	}
	text := string(data)
	return strings.Contains(text, "kyverno.io/") && !strings.Contains(text, "cli.kyverno.io/")
}

// exceptionsOf are the PolicyExceptions of both groups read.
type exceptionsOf struct {
	kyverno []*kyvernov2.PolicyException
	cel     []*policiesv1.PolicyException
}

func (e *exceptionsOf) add(p *manifest.Policies) {
	e.kyverno = append(e.kyverno, p.Exceptions...)
	e.cel = append(e.cel, p.CELExceptions...)
}

// loadExceptions reads the PolicyExceptions (kyverno.io and
// policies.kyverno.io) of --exception files and folders; a document that
// is not one is an error.
func loadExceptions(paths []string) (exceptionsOf, error) {
	var out exceptionsOf
	if len(paths) == 0 {
		return out, nil
	}
	files, err := manifest.Files(paths)
	if err != nil {
		return out, err
	}
	for _, f := range files {
		docs, err := manifest.ReadFile(f)
		if err != nil {
			return out, err
		}
		p, err := manifest.DecodePolicies(docs)
		if err != nil {
			return out, err
		}
		if len(p.Policies) > 0 || len(p.Unsupported) > 0 || len(p.Others) > 0 {
			return out, fmt.Errorf("--exception %s: holds documents that are not PolicyExceptions", f)
		}
		out.add(p)
	}
	if len(out.kyverno) == 0 && len(out.cel) == 0 {
		return out, fmt.Errorf("--exception %v: no PolicyException found", paths)
	}
	return out, nil
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

// evaluator evaluates resources against one compiled set, with the run's
// values, loaders and user.
type evaluator struct {
	set       *engine.PolicySet
	opts      []engine.EvalOption
	user      *clitest.UserInfo
	auditWarn bool
}

// configure reads the values file, --set and the user info file, and sets
// the evaluation options.
func (ev *evaluator) configure(opts Options) error {
	var specs []*clitest.ValuesSpec
	if opts.ValuesFile != "" {
		spec, err := clitest.ReadValuesFile(opts.ValuesFile)
		if err != nil {
			return fmt.Errorf("--values-file: %w", err)
		}
		specs = append(specs, spec)
	}
	if len(opts.Set) > 0 {
		set := &clitest.ValuesSpec{GlobalValues: map[string]any{}}
		for _, kv := range opts.Set {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return fmt.Errorf("--set %q: want key=value", kv)
			}
			set.GlobalValues[strings.TrimSpace(k)] = v
		}
		specs = append(specs, set)
	}
	loaders := opts.Loaders
	if len(specs) > 0 {
		ev.opts = append(ev.opts, engine.WithValues(clitest.NewValues(specs...)))
		if loaders.Namespaces == nil {
			loaders.Namespaces = clitest.NewNamespaceLabels(specs...)
		}
	}
	ev.opts = append(ev.opts, engine.WithLoaders(loaders))
	if opts.UserInfoFile != "" {
		u, err := clitest.ReadUserInfoFile(opts.UserInfoFile)
		if err != nil {
			return fmt.Errorf("--userinfo: %w", err)
		}
		ev.user = u
	}
	return nil
}

func (ev *evaluator) document(ctx context.Context, raw manifest.RawDocument, produced *producedObjects) ([]Verdict, bool, int, error) {
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
		v, b := ev.object(ctx, obj, produced)
		verdicts, blocked = append(verdicts, v...), blocked || b
	}
	return verdicts, blocked, len(objs), nil
}

// object evaluates one object: mutation first, then validation of the
// mutated object and generation for it, as admission does (resources.go).
func (ev *evaluator) object(ctx context.Context, obj *unstructured.Unstructured, produced *producedObjects) ([]Verdict, bool) {
	mutation, resp, generation := ev.evaluateObject(ctx, obj, produced)
	var verdicts []Verdict
	verdicts = append(verdicts, verdictsOf(obj, mutation, ev.auditWarn)...)
	verdicts = append(verdicts, verdictsOf(obj, resp, ev.auditWarn)...)
	verdicts = append(verdicts, verdictsOf(obj, generation, ev.auditWarn)...)
	return verdicts, resp.Blocked() || imageBlocked(mutation)
}

// request is the simulated admission request for an object: a CREATE by
// the run's user.
func (ev *evaluator) request(object map[string]any) *engine.Request {
	req := &engine.Request{Operation: kyvernov1.Create, Object: object}
	if u := ev.user; u != nil {
		req.UserInfo, req.Roles, req.ClusterRoles = u.AdmissionUser, u.Roles, u.ClusterRoles
	}
	return req
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
