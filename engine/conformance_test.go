package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/internal/corpus"
)

// The engine-level conformance check runs the validate suites the way
// `kyverno test` does, with the subset of the test format the engine needs
// (policies, resources, exceptions, values, user info), and compares each
// expected result with the engine's rule responses. It is a fast feedback
// loop for the engine; `charter test` is the full implementation.
type suiteFile struct {
	Policies   []string `json:"policies"`
	Resources  []string `json:"resources"`
	Exceptions []string `json:"exceptions"`
	Variables  string   `json:"variables"`
	UserInfo   string   `json:"userinfo"`
	Results    []struct {
		Policy    string   `json:"policy"`
		Rule      string   `json:"rule"`
		Resources []string `json:"resources"`
		Result    string   `json:"result"`
		Operation string   `json:"operation"`
	} `json:"results"`
}

type suiteValues struct {
	GlobalValues map[string]any `json:"globalValues"`
	Policies     []struct {
		Name      string `json:"name"`
		Resources []struct {
			Name   string         `json:"name"`
			Values map[string]any `json:"values"`
		} `json:"resources"`
		Rules []struct {
			Name   string         `json:"name"`
			Values map[string]any `json:"values"`
		} `json:"rules"`
	} `json:"policies"`
	NamespaceSelector []struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"namespaceSelector"`
}

func (v *suiteValues) Variables(p kyvernov1.PolicyInterface, r review.ResourceRef) map[string]any {
	out := map[string]any{}
	for k, val := range v.GlobalValues {
		out[k] = val
	}
	for _, pv := range v.Policies {
		if pv.Name != p.GetName() {
			continue
		}
		for _, rv := range pv.Resources {
			if rv.Name == r.Name {
				for k, val := range rv.Values {
					out[k] = val
				}
			}
		}
	}
	return out
}

func (v *suiteValues) ContextEntries(p kyvernov1.PolicyInterface, rule string) map[string]any {
	for _, pv := range v.Policies {
		if pv.Name != p.GetName() {
			continue
		}
		for _, rv := range pv.Rules {
			if rv.Name == rule || "autogen-"+rv.Name == rule || "autogen-cronjob-"+rv.Name == rule {
				return rv.Values
			}
		}
	}
	return nil
}

func (v *suiteValues) ForeachElements(kyvernov1.PolicyInterface, string) map[string][]any { return nil }

func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	flush := func() {
		if strings.TrimSpace(cur.String()) != "" {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
		}
		cur.Reset()
	}
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "---") {
			flush()
			continue
		}
		cur.Write(sc.Bytes())
		cur.WriteByte('\n')
	}
	flush()
	return docs
}

func readDocs(t testing.TB, file string) []map[string]any {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, d := range splitYAML(data) {
		var m map[string]any
		if err := yaml.Unmarshal(d, &m); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

func loadSuitePolicies(t testing.TB, dir string, files []string) []kyvernov1.PolicyInterface {
	var raws []json.RawMessage
	for _, f := range files {
		for _, doc := range readDocs(t, filepath.Join(dir, f)) {
			if k := doc["kind"]; k != "ClusterPolicy" && k != "Policy" {
				continue
			}
			data, _ := json.Marshal(doc)
			raws = append(raws, data)
		}
	}
	return decodePolicies(t, raws)
}

type conformanceTally struct {
	rows, failed int
	failures     []string
}

func runSuite(t *testing.T, dir string, tally *conformanceTally) {
	var suite suiteFile
	data, err := os.ReadFile(filepath.Join(dir, "kyverno-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &suite); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	var exceptions []*kyvernov2.PolicyException
	for _, f := range suite.Exceptions {
		for _, doc := range readDocs(t, filepath.Join(dir, f)) {
			data, _ := json.Marshal(doc)
			var ex kyvernov2.PolicyException
			if err := json.Unmarshal(data, &ex); err != nil {
				t.Fatal(err)
			}
			exceptions = append(exceptions, &ex)
		}
	}
	set, err := Compile(loadSuitePolicies(t, dir, suite.Policies), WithExceptions(exceptions))
	if err != nil {
		tally.failures = append(tally.failures, fmt.Sprintf("%s: compile: %v", dir, err))
	}
	var values *suiteValues
	nsLabels := map[string]map[string]string{}
	if suite.Variables != "" {
		values = &suiteValues{}
		data, _ := os.ReadFile(filepath.Join(dir, suite.Variables))
		if err := yaml.Unmarshal(data, values); err != nil {
			t.Fatal(err)
		}
		for _, s := range values.NamespaceSelector {
			nsLabels[s.Name] = s.Labels
		}
	}
	var user struct {
		Roles        []string                  `json:"roles"`
		ClusterRoles []string                  `json:"clusterRoles"`
		UserInfo     authenticationv1.UserInfo `json:"userInfo"`
	}
	if suite.UserInfo != "" {
		data, _ := os.ReadFile(filepath.Join(dir, suite.UserInfo))
		_ = yaml.Unmarshal(data, &user)
	}
	var resources []map[string]any
	for _, f := range suite.Resources {
		resources = append(resources, readDocs(t, filepath.Join(dir, f))...)
	}
	type key struct{ op, policy, resource string }
	responses := map[key][]review.RuleResponse{}
	for _, op := range []string{"CREATE", "UPDATE", "DELETE"} {
		for _, res := range resources {
			meta, _ := res["metadata"].(map[string]any)
			name, _ := meta["name"].(string)
			ns, _ := meta["namespace"].(string)
			req := &review.Request{Operation: kyvernov1.AdmissionOperation(op), Object: res, UserInfo: user.UserInfo, Roles: user.Roles, ClusterRoles: user.ClusterRoles}
			switch op {
			case "UPDATE":
				req.OldObject = res
			case "DELETE":
				req.Object, req.OldObject = nil, res
			}
			if l, ok := nsLabels[ns]; ok {
				req.NamespaceLabels = l
			}
			if values != nil {
				// As kyverno test does, an operation pinned by the values
				// file is the request's operation.
				ref := review.ResourceRef{Name: name}
				for _, p := range set.Policies() {
					if o, ok := values.Variables(p.Source(), ref)["request.operation"].(string); ok && op == "CREATE" && o == "UPDATE" {
						req.Operation, req.OldObject = kyvernov1.Update, res
					}
				}
			}
			var opts []EvalOption
			if values != nil {
				opts = append(opts, WithValues(values))
			}
			for _, p := range set.Policies() {
				pr := p.Validate(context.Background(), req, opts...)
				k := key{op, p.Source().GetName(), name}
				responses[k] = append(responses[k], pr.Rules...)
			}
		}
	}
	for _, r := range suite.Results {
		op := r.Operation
		if op == "" {
			op = "CREATE"
		}
		policy := r.Policy[strings.LastIndex(r.Policy, "/")+1:]
		for _, res := range r.Resources {
			name := res[strings.LastIndex(res, "/")+1:]
			for _, rr := range responses[key{op, policy, name}] {
				if r.Rule != "" && rr.Name != r.Rule && rr.Name != "autogen-"+r.Rule && rr.Name != "autogen-cronjob-"+r.Rule {
					continue
				}
				tally.rows++
				if string(rr.Status) != r.Result {
					tally.failed++
					tally.failures = append(tally.failures, fmt.Sprintf("%s: %s/%s %s %s: got %s (%s), want %s",
						suiteName(dir), policy, rr.Name, op, res, rr.Status, rr.Message, r.Result))
				}
			}
		}
	}
}

// suiteName is a suite folder's path inside the policy library
// (best-practices/disallow-latest-tag/.kyverno-test).
func suiteName(dir string) string {
	if _, after, ok := strings.Cut(filepath.ToSlash(dir), "/kyverno-policies/"); ok {
		return after
	}
	return dir
}

func TestConformanceValidateSuites(t *testing.T) {
	suites, err := corpus.Suites(corpus.Require(t), "validate")
	if err != nil {
		t.Fatal(err)
	}
	var tally conformanceTally
	for _, dir := range suites {
		runSuite(t, dir, &tally)
	}
	t.Logf("%d rows, %d failed", tally.rows, tally.failed)
	for _, f := range tally.failures {
		t.Error(f)
	}
}
