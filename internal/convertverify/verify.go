// Package convertverify proves a conversion equal: it runs the
// kyverno-test.yaml suites that name a converted policy on the original
// and on its conversion (engine/convert) with charter test's runner, and
// compares their verdicts (charter convert --verify).
package convertverify

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/convert"
	"github.com/charter-dev/charter/internal/clitest"
	"github.com/charter-dev/charter/internal/clitest/manifest"
)

// Verdict is a policy's overall answer for one resource: the first rule
// that fails or errors decides (as a CEL policy stops at its first failing
// validation); else pass when a rule passed; else skip. A policy that
// does not match the resource at all counts as skip: neither blocks nor
// reports a failure.
func Verdict(rules []clitest.RuleOutcome) string {
	passed := false
	for _, r := range rules {
		switch r.Status {
		case "fail", "error", "warn":
			return r.Status
		case "pass":
			passed = true
		}
	}
	if passed {
		return "pass"
	}
	return "skip"
}

// Mismatch is a resource on which a policy and its conversion disagree.
type Mismatch struct {
	Suite, Operation, Resource string
	// Policy is the converted policy's name.
	Policy              string
	Original, Converted string
	// Detail holds the messages of both sides.
	Detail string
}

// Verification is the outcome of running a source policy's suites on both
// forms.
type Verification struct {
	Suites     []string
	Compared   int
	Mismatches []Mismatch
	// Errors are suites that could not run.
	Errors []string
}

// Equal reports whether every compared verdict matched and something was
// compared.
func (v *Verification) Equal() bool {
	return v.Compared > 0 && len(v.Mismatches) == 0 && len(v.Errors) == 0
}

// Verifier runs kyverno-test.yaml suites on policies and their
// conversions.
type Verifier struct {
	Runner *clitest.Runner
	// FileName is the test file name (kyverno-test.yaml).
	FileName string
}

// Verify discovers the suites under paths, and for each that names a
// converted policy, runs the suite's resources through the originals and
// through the conversions and compares verdicts per converted policy,
// resource and operation. results are keyed by the source policy's file
// and identity (see convert.Result.SourceKey): a suite reads its policies
// from its own files, so two policies of one name in different folders are
// each compared on their own suites. The verifications are keyed the same
// way.
func (v *Verifier) Verify(ctx context.Context, paths []string, results map[string]*convert.Result) (map[string]*Verification, error) {
	files, err := clitest.Discover(paths, v.FileName)
	if err != nil {
		return nil, err
	}
	out := map[string]*Verification{}
	for _, f := range files {
		for _, s := range clitest.LoadFile(f) {
			if s.Err != nil || s.Test == nil {
				continue
			}
			v.verifySuite(ctx, s, results, out)
		}
	}
	return out, nil
}

func (v *Verifier) verifySuite(ctx context.Context, s *clitest.Suite, results map[string]*convert.Result, out map[string]*Verification) {
	// The suite's own policies, read as the suite reads them.
	var policies []kyvernov1.PolicyInterface
	var exceptions []*kyvernov2.PolicyException
	repl := &clitest.Replacement{}
	var converted []*convert.Result
	// The suite's converted policies by Key, as its exceptions name them.
	suiteResults := map[string]*convert.Result{}
	for _, p := range s.Test.Policies {
		pf, err := readSuiteFile(s, p)
		if err != nil {
			return
		}
		for _, pol := range pf.Policies {
			if r, ok := results[convert.FileKey(suitePath(s, p), convert.Key(pol))]; ok {
				suiteResults[convert.Key(pol)] = r
			}
		}
		policies = append(policies, pf.Policies...)
		repl.CELExceptions = append(repl.CELExceptions, pf.CELExceptions...)
		exceptions = append(exceptions, pf.Exceptions...)
	}
	for _, p := range s.Test.Exceptions {
		pf, err := readSuiteFile(s, p)
		if err != nil {
			return
		}
		repl.CELExceptions = append(repl.CELExceptions, pf.CELExceptions...)
		exceptions = append(exceptions, pf.Exceptions...)
	}
	// kyverno.io exceptions name ClusterPolicy rules: the conversion runs
	// with theirs converted, and a suite whose exceptions do not convert
	// is not comparable.
	for _, ex := range exceptions {
		r := convert.ConvertException(ex, suiteResults)
		if !r.Clean() {
			return
		}
		repl.CELExceptions = append(repl.CELExceptions, r.Outputs[0].Object.(*policiesv1.PolicyException))
	}
	name := s.Name()
	record := func(r *convert.Result) *Verification {
		k := r.SourceKey()
		if out[k] == nil {
			out[k] = &Verification{}
		}
		vr := out[k]
		if !slices.Contains(vr.Suites, name) {
			vr.Suites = append(vr.Suites, name)
		}
		return vr
	}
	// A values file that does not read fails the suite's run below.
	mocks, _ := readSuiteMocks(s)
	for _, p := range policies {
		r, ok := suiteResults[convert.Key(p)]
		if !ok || len(r.Outputs) == 0 {
			repl.Policies = append(repl.Policies, p)
			continue
		}
		converted = append(converted, r)
		for _, o := range r.Outputs {
			// The suite's mocks of the original's context entries feed
			// the variables that read the cluster in their place.
			mocked, err := mocks.Apply(o, p.GetName())
			if err != nil {
				record(r).Errors = append(record(r).Errors, err.Error())
				mocked = o.Object.(kyvernov1.PolicyInterface)
			}
			repl.Policies = append(repl.Policies, mocked)
		}
	}
	if len(converted) == 0 {
		return
	}
	original, err := v.Runner.EvaluateWith(ctx, s, nil)
	if err == nil {
		var conv []clitest.PolicyOutcome
		conv, err = v.Runner.EvaluateWith(ctx, s, repl)
		if err == nil {
			compare(name, original, conv, converted, record)
			return
		}
	}
	for _, r := range converted {
		vr := record(r)
		vr.Errors = append(vr.Errors, err.Error())
	}
}

type outcomeKey struct{ op, resource, kind, policy string }

func compare(suite string, original, conv []clitest.PolicyOutcome, converted []*convert.Result, record func(*convert.Result) *Verification) {
	byKey := map[outcomeKey]clitest.PolicyOutcome{}
	for _, o := range conv {
		byKey[outcomeKey{o.Operation, o.Resource, o.Kind, o.Policy}] = o
	}
	for _, r := range converted {
		vr := record(r)
		src := r.Source
		for _, o := range original {
			if o.Policy != src.GetName() || o.Kind != src.GetKind() {
				continue
			}
			for _, out := range r.Outputs {
				var rules []clitest.RuleOutcome
				for _, rr := range o.Rules {
					if slices.Contains(out.Rules, sourceRule(rr.Name)) {
						rules = append(rules, rr)
					}
				}
				c := byKey[outcomeKey{o.Operation, o.Resource, out.Kind, out.Name}]
				want, got := Verdict(rules), Verdict(c.Rules)
				if o.Invalid != "" {
					want = "invalid"
				}
				if c.Invalid != "" {
					got = "invalid: " + c.Invalid
				}
				if strings.HasSuffix(out.Kind, "MutatingPolicy") {
					// What a mutation does is its patch: a ClusterPolicy
					// reports "skip" where it patched nothing, a
					// MutatingPolicy "pass"; neither changes the object.
					want, got = mutationVerdict(want), mutationVerdict(got)
					if want == got && !samePatch(o.Patched, c.Patched) {
						want, got = want+", patched "+summary(o.Patched), got+", patched "+summary(c.Patched)
					}
				}
				if strings.HasSuffix(out.Kind, "ImageValidatingPolicy") {
					// A verifyImages rule that matches none of the
					// resource's images gives no response ("skip"), an
					// ImageValidatingPolicy passes: neither verified
					// anything, both admit.
					want, got = imageVerdict(want), imageVerdict(got)
				}
				vr.Compared++
				if want != got {
					vr.Mismatches = append(vr.Mismatches, Mismatch{
						Suite: suite, Operation: o.Operation, Resource: o.Resource, Policy: out.Name,
						Original: want, Converted: got, Detail: messages(rules) + " | " + messages(c.Rules),
					})
				}
			}
		}
	}
}

// sourceRule maps an autogen rule's name to the rule it came from.
func sourceRule(name string) string {
	for _, prefix := range []string{"autogen-cronjob-", "autogen-"} {
		if strings.HasPrefix(name, prefix) {
			return strings.TrimPrefix(name, prefix)
		}
	}
	return name
}

func messages(rules []clitest.RuleOutcome) string {
	var parts []string
	for _, r := range rules {
		if r.Message != "" && r.Status != "pass" {
			parts = append(parts, fmt.Sprintf("%s %s: %s", r.Name, r.Status, r.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// samePatch compares two mutation results as charter test compares a
// patched resource; no result (nothing patched) equals no result.
func samePatch(a, b map[string]any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return clitest.SameResource(a, b)
}

func summary(obj map[string]any) string {
	if obj == nil {
		return "nothing"
	}
	b, _ := json.Marshal(obj["spec"])
	if len(b) > 300 {
		b = append(b[:300], "..."...)
	}
	return string(b)
}

func imageVerdict(v string) string {
	if v == "skip" || v == "pass" {
		return "admitted"
	}
	return v
}

func mutationVerdict(v string) string {
	if v == "skip" || v == "pass" {
		return "applied"
	}
	return v
}

// readSuiteFile reads a policy or exception file a suite names, relative
// to the suite's folder.
func readSuiteFile(s *clitest.Suite, p string) (*manifest.Policies, error) {
	docs, err := manifest.ReadFile(suitePath(s, p))
	if err != nil {
		return nil, err
	}
	return manifest.DecodePolicies(docs)
}

// suitePath resolves a file a suite names against the suite's folder.
func suitePath(s *clitest.Suite, p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.Dir, p)
	}
	return p
}

// readSuiteMocks reads the values a suite gives the original's context
// entries: its values file and its inline values.
func readSuiteMocks(s *clitest.Suite) (*convert.Mocks, error) {
	var specs []*clitest.ValuesSpec
	if s.Test.Variables != "" {
		spec, err := clitest.ReadValuesFile(suitePath(s, s.Test.Variables))
		if err != nil {
			return nil, err
		}
		specs = append(specs, spec)
	}
	if s.Test.Values != nil {
		specs = append(specs, s.Test.Values)
	}
	m := &convert.Mocks{Global: map[string]any{}, Rules: map[string]map[string]map[string]any{}, Resources: map[string]map[string]map[string]any{}}
	add := func(into map[string]map[string]map[string]any, policy, name string, values map[string]any) {
		if into[policy] == nil {
			into[policy] = map[string]map[string]any{}
		}
		if into[policy][name] == nil {
			into[policy][name] = map[string]any{}
		}
		maps.Copy(into[policy][name], values)
	}
	for _, spec := range specs {
		maps.Copy(m.Global, spec.GlobalValues)
		for _, p := range spec.Policies {
			for _, r := range p.Rules {
				add(m.Rules, p.Name, r.Name, r.Values)
			}
			for _, r := range p.Resources {
				add(m.Resources, p.Name, r.Name, r.Values)
			}
		}
	}
	return m, nil
}
