package clitest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/internal/clitest/manifest"
	"github.com/charter-dev/charter/internal/corpus"
)

// conformanceDir is the shared corpus; the test skips without it.
func conformanceDir(t testing.TB) string {
	t.Helper()
	dir, err := corpus.Dir()
	if err != nil {
		t.Skipf("conformance corpus not present: %v", err)
	}
	return dir
}

// conformanceList returns the suite folders a list names.
func conformanceList(t testing.TB, name string) []string {
	t.Helper()
	dir := conformanceDir(t)
	data, err := os.ReadFile(filepath.Join(dir, "suites", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Fields(string(data)) {
		out = append(out, filepath.Join(dir, line))
	}
	return out
}

// TestConformanceValidatingPolicies runs every ValidatingPolicy suite of
// the corpus (suites/vpol.txt) through `charter test` and wants every row
// to pass, none failing, none skipped as an invalid policy, and every
// expected result of the suites' files run and checked: each suite's rows
// are the ones kyvernoRowTally counts, 1183 in all.
//
// Kyverno v1.19's summary line says 1220 for the same suites. The other 37
// (the number changes from run to run) are "Pass / Excluded" rows that its
// CLI prints for no expected result: a Pod-matching ValidatingPolicy is
// evaluated as itself plus one autogen copy per config, "defaults"
// (apps/v1 and batch/v1 rules) and "cronjobs", in Go map order; the CLI
// keeps an empty response when the policy's match is not one rule (spec
// cel-policy-types.md §6.1), so when "defaults" comes first for a CronJob,
// its empty response prints an Excluded row before the real one. About one
// CronJob row in eight gets one: 307 CronJob rows of such policies here.
func TestConformanceValidatingPolicies(t *testing.T) {
	results, c := runPassingList(t, "vpol.txt")
	want := rowTally(t, results)
	if want != 1183 || c.Passed != want {
		t.Errorf("%d rows passed, the suites' expected results make %d, want 1183", c.Passed, want)
	}
}

// TestClusterPolicyAndValidatingPolicyPairsAgree runs each ValidatingPolicy
// suite's resources through the policy and through the ClusterPolicy it
// translates (the same folder without -vpol: pod-security-vpol/baseline/x
// and pod-security/baseline/x) and wants the same verdict per resource:
// failed (a rule or the policy failed) or not (passed, skipped, or not
// matched: the translations use matchConditions where the ClusterPolicies
// use preconditions, so one skips where the other passes). Pairs whose
// ClusterPolicy loads configMap, apiCall, imageRegistry or
// globalReference context are left out: their suites mock those per
// resource name, and the two suites name different resources.
func TestClusterPolicyAndValidatingPolicyPairsAgree(t *testing.T) {
	pairs, compared, skipped := 0, 0, 0
	for _, suiteDir := range conformanceList(t, "vpol.txt") {
		vpolDir := filepath.Dir(suiteDir)
		cpolDir := strings.Replace(vpolDir, "-vpol"+string(filepath.Separator), string(filepath.Separator), 1)
		if cpolDir == vpolDir {
			continue
		}
		cpols := clusterPolicies(t, cpolDir)
		if len(cpols) == 0 {
			continue
		}
		if loadsContext(cpols) {
			skipped++
			continue
		}
		pairs++
		suites := LoadFile(filepath.Join(suiteDir, DefaultFileName))
		for _, s := range suites {
			if s.Err != nil {
				t.Fatalf("%s: %v", suiteDir, s.Err)
			}
			in, err := loadInputs(s, newFileCache())
			if err != nil {
				t.Fatalf("%s: %v", suiteDir, err)
			}
			vset, err := engine.Compile(in.policies)
			if err != nil {
				t.Fatalf("%s: %v", suiteDir, err)
			}
			cset, err := engine.Compile(cpols)
			if err != nil {
				var faults fault.List
				if !errors.As(err, &faults) {
					t.Fatalf("%s: %v", cpolDir, err)
				}
			}
			// Each policy reads its context (ConfigMaps, API calls, image
			// data, namespaces) from its own suite: the ClusterPolicy's
			// values file mocks what the ValidatingPolicy's context file
			// serves.
			cin := in
			if cs := LoadFile(filepath.Join(cpolDir, ".kyverno-test", DefaultFileName)); len(cs) == 1 && cs[0].Err == nil {
				if loaded, err := loadInputs(cs[0], newFileCache()); err == nil {
					cin = loaded
				}
			}
			for _, obj := range in.resources {
				req := buildRequest(obj, "CREATE", in)
				where := strings.TrimPrefix(vpolDir, conformanceDir(t)+"/") + ": " + keyOf(obj).String()
				got, verr := failed(vset.Validate(context.Background(), req, suiteEvalOptions(in)...))
				want, cerr := failed(cset.Validate(context.Background(), buildRequest(obj, "CREATE", cin), suiteEvalOptions(cin)...))
				if verr != "" {
					t.Errorf("%s: the ValidatingPolicy errs: %s", where, verr)
				}
				if cerr != "" {
					// The ClusterPolicy cannot judge a resource its own
					// suite does not have (restrict-wildcard-resources'
					// JMESPath over a Role without resources); nothing
					// to compare.
					t.Logf("%s: the ClusterPolicy errs, not compared: %s", where, cerr)
					continue
				}
				compared++
				if got != want {
					t.Errorf("%s: ValidatingPolicy failed: %v, ClusterPolicy failed: %v", where, got, want)
				}
			}
		}
	}
	t.Logf("%d pairs, %d resources compared; %d pairs load context and are left out", pairs, compared, skipped)
	if pairs < 60 || compared < 1000 {
		t.Errorf("compared %d pairs and %d resources, want the corpus's 60 and 1000 or more", pairs, compared)
	}
}

// suiteEvalOptions are the loaders and values a suite's policies see.
func suiteEvalOptions(in *inputs) []engine.EvalOption {
	return []engine.EvalOption{engine.WithLoaders(loader.Loaders{
		Namespaces: namespaceSource{in.namespaces, namespaceObjects(in.specs...)},
		Resources:  in.celContext, Images: in.celContext, Objects: in.existing,
		ConfigMaps: in.cluster, APICalls: in.cluster, GlobalContext: in.cluster,
	}), engine.WithValues(in.values)}
}

// clusterPolicies decodes the ClusterPolicies of a folder's YAML files.
func clusterPolicies(t *testing.T, dir string) []kyvernov1.PolicyInterface {
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var out []kyvernov1.PolicyInterface
	for _, f := range files {
		docs, err := manifest.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := manifest.DecodePolicies(docs)
		if err != nil {
			continue // not a policy file (artifacthub-pkg.yaml)
		}
		for _, p := range pf.Policies {
			if p.GetKind() == kyvernov1.ClusterPolicyKind {
				out = append(out, p)
			}
		}
	}
	return out
}

// loadsContext reports whether a policy's rules load external context.
func loadsContext(policies []kyvernov1.PolicyInterface) bool {
	for _, p := range policies {
		// Context entries nest in foreach too: look for them anywhere.
		data, _ := json.Marshal(p.GetSpec())
		for _, entry := range []string{`"configMap":`, `"apiCall":`, `"imageRegistry":`, `"globalReference":`} {
			if strings.Contains(string(data), entry) {
				return true
			}
		}
	}
	return false
}

// failed reports whether some rule of the response failed (or warned, for
// an unscored policy); errored reports an error result and its message.
func failed(r *engine.Response) (failed bool, errored string) {
	for _, p := range r.Policies {
		for _, rr := range p.Rules {
			switch rr.Status {
			case engine.StatusFail, engine.StatusWarn:
				failed = true
			case engine.StatusError:
				errored = rr.Message
			}
		}
	}
	return failed, errored
}

// runPassingList runs every suite of a claimed conformance list through
// `charter test`, reports each suite that cannot run and each row that
// does not pass as a test error, and returns the number of suites and the
// row counts.
func runPassingList(t *testing.T, list string) ([]*SuiteResult, Counts) {
	t.Helper()
	results, err := NewRunner(Options{}).Run(context.Background(), conformanceList(t, list))
	if err != nil {
		t.Fatal(err)
	}
	var c Counts
	for _, r := range results {
		if r.Err != nil {
			t.Errorf("%v", r.Err)
			continue
		}
		c.Add(r.Rows)
		for _, row := range r.Rows {
			if row.Verdict != Passed || row.Reason != ReasonOK {
				t.Errorf("%s #%d %s %s: %s, %s (%s)", row.Suite, row.ID, row.Policy, row.Resource, row.Verdict, row.Reason, row.Message)
			}
		}
	}
	t.Logf("%s: %d suites, %+v", list, len(results), c)
	return results, c
}
