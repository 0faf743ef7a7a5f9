package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/vpol"
)

// readCELPolicies decodes the policies.kyverno.io documents of a testdata
// file: policies and PolicyExceptions, and kyverno.io ClusterPolicies and
// Policies beside them. file is under testdata/vpol unless it names its
// folder ("gpol/policies.yaml").
func readCELPolicies(t *testing.T, file string) ([]kyvernov1.PolicyInterface, []*policiesv1.PolicyException) {
	t.Helper()
	if !strings.Contains(file, "/") {
		file = filepath.Join("vpol", file)
	}
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var policies []kyvernov1.PolicyInterface
	var exceptions []*policiesv1.PolicyException
	for _, doc := range splitYAML(data) {
		var probe struct{ Kind string }
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			t.Fatal(err)
		}
		var into any
		switch probe.Kind {
		case kyvernov1.ClusterPolicyKind:
			p := &kyvernov1.ClusterPolicy{}
			policies, into = append(policies, p), p
		case kyvernov1.PolicyKind:
			p := &kyvernov1.Policy{}
			policies, into = append(policies, p), p
		case policiesv1.ValidatingPolicyKind:
			p := &policiesv1.ValidatingPolicy{}
			policies, into = append(policies, p), p
		case policiesv1.NamespacedValidatingPolicyKind:
			p := &policiesv1.NamespacedValidatingPolicy{}
			policies, into = append(policies, p), p
		case policiesv1.MutatingPolicyKind:
			p := &policiesv1.MutatingPolicy{}
			policies, into = append(policies, p), p
		case policiesv1.NamespacedMutatingPolicyKind:
			p := &policiesv1.NamespacedMutatingPolicy{}
			policies, into = append(policies, p), p
		case policiesv1.GeneratingPolicyKind:
			p := &policiesv1.GeneratingPolicy{}
			policies, into = append(policies, p), p
		case policiesv1.NamespacedGeneratingPolicyKind:
			p := &policiesv1.NamespacedGeneratingPolicy{}
			policies, into = append(policies, p), p
		case policiesv1.ImageValidatingPolicyKind:
			p := &policiesv1.ImageValidatingPolicy{}
			policies, into = append(policies, p), p
		case policiesv1.NamespacedImageValidatingPolicyKind:
			p := &policiesv1.NamespacedImageValidatingPolicy{}
			policies, into = append(policies, p), p
		case policiesv1.PolicyExceptionKind:
			ex := &policiesv1.PolicyException{}
			exceptions, into = append(exceptions, ex), ex
		default:
			t.Fatalf("%s: unexpected kind %q", file, probe.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	return policies, exceptions
}

// resourceMap serves resource.Get from a fixed list.
type resourceMap []map[string]any

func (r resourceMap) Resource(_ context.Context, apiVersion, resource, namespace, name string) (map[string]any, error) {
	for _, o := range r {
		meta := o["metadata"].(map[string]any)
		if o["apiVersion"] == apiVersion && match.ResourceForKind(o["kind"].(string)) == resource && meta["namespace"] == namespace && meta["name"] == name {
			return o, nil
		}
	}
	return nil, nil
}

func (r resourceMap) Resources(context.Context, string, string, string) ([]map[string]any, error) {
	return r, nil
}

type nsLabels map[string]map[string]string

func (n nsLabels) NamespaceLabels(_ context.Context, ns string) (map[string]string, error) {
	return n[ns], nil
}

func pod(namespace, name string, labels map[string]any, images ...string) map[string]any {
	var containers []any
	for _, img := range images {
		containers = append(containers, map[string]any{"name": "c", "image": img})
	}
	meta := map[string]any{"name": name, "namespace": namespace}
	if labels != nil {
		meta["labels"] = labels
	}
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": map[string]any{"containers": containers}}
}

// TestValidatingPolicies covers the ValidatingPolicy pipeline
// (cel-policy-types.md §3.3.1, §3.4, §5): one result per policy with rule
// "", matchConditions, first failing validation and its message, runtime
// errors, audit annotations, failurePolicy, namespace selectors, the
// resource library, exceptions (full and partial), autogen and the scope
// of namespaced policies.
func TestValidatingPolicies(t *testing.T) {
	policies, exceptions := readCELPolicies(t, "policies.yaml")
	_, more := readCELPolicies(t, "exceptions.yaml")
	exceptions = append(exceptions, more...)
	set, err := Compile(policies, WithCELExceptions(exceptions))
	if err != nil {
		t.Fatal(err)
	}
	loaders := loader.Loaders{
		Resources: resourceMap{{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "registries", "namespace": "default"},
			"data":     map[string]any{"list": "registry.local/,ghcr.io/"}}},
		Namespaces: nsLabels{"prod": {"env": "prod"}},
	}
	cm := func(ns string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": ns}}
	}
	deployment := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "default"},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{}},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "registry.local/web"}}},
		}}}
	type result struct {
		rule, status, message string
		props                 map[string]string
	}
	tests := []struct {
		name   string
		object map[string]any
		op     kyvernov1.AdmissionOperation
		want   map[string]result // by policy key; a policy not listed must not respond
	}{{
		name:   "labelled pod from a known registry",
		object: pod("default", "web", map[string]any{"team": "a"}, "registry.local/web"),
		want: map[string]result{
			"team-label":         {"", "pass", "success", map[string]string{"team": "a"}},
			"allowed-registries": {"", "pass", "success", nil},
		},
	}, {
		name:   "unlabelled pod: messageExpression",
		object: pod("default", "web", nil, "registry.local/web"),
		want: map[string]result{
			"team-label":         {"", "fail", "pod web needs a team label", map[string]string{vpol.ValidationIndexProperty: "0"}},
			"allowed-registries": {"", "pass", "success", nil},
		},
	}, {
		name:   "second validation fails without a message: its index",
		object: pod("default", "web", map[string]any{"team": "nobody"}, "registry.local/web"),
		want: map[string]result{
			"team-label":         {"", "fail", "CEL expression validation failed at index 1", map[string]string{vpol.ValidationIndexProperty: "1", "team": "nobody"}},
			"allowed-registries": {"", "pass", "success", nil},
		},
	}, {
		name:   "a validation that cannot evaluate is an error",
		object: pod("default", "web", map[string]any{"team": "crash"}, "registry.local/web"),
		want: map[string]result{
			"team-label":         {"", "error", "error: ", map[string]string{vpol.ValidationIndexProperty: "2"}},
			"allowed-registries": {"", "pass", "success", nil},
		},
	}, {
		name:   "matchCondition false skips",
		object: pod("kube-system", "web", nil, "registry.local/web"),
		want: map[string]result{
			"team-label":         {"", "skip", "skip", nil},
			"allowed-registries": {"", "pass", "success", nil},
		},
	}, {
		name:   "an exception exempts the debug pod, reporting pass",
		object: pod("default", "debug-1", nil, "registry.local/web"),
		want: map[string]result{
			"team-label":         {"exception", "pass", "rule is passed due to policy exception: default/debug-pods", map[string]string{"exceptions": "debug-pods"}},
			"allowed-registries": {"", "pass", "success", nil},
		},
	}, {
		name:   "an exception in team-b does not act in default; allowedImages let the mirror through",
		object: pod("default", "web", map[string]any{"team": "a"}, "mirror.local/busybox", "ghcr.io/x"),
		want: map[string]result{
			"team-label":         {"", "pass", "success", map[string]string{"team": "a"}},
			"allowed-registries": {"", "pass", "success", nil},
		},
	}, {
		name:   "unknown registry fails",
		object: pod("default", "web", map[string]any{"team": "a"}, "docker.io/x"),
		want: map[string]result{
			"team-label":         {"", "pass", "success", map[string]string{"team": "a"}},
			"allowed-registries": {"", "fail", "image from an unknown registry", map[string]string{vpol.ValidationIndexProperty: "0"}},
		},
	}, {
		name:   "the namespaced policy acts in team-a, the team-b exception only there",
		object: pod("team-a", "web", map[string]any{"team": "a"}, "registry.local/web"),
		want: map[string]result{
			"team-label":         {"", "pass", "success", map[string]string{"team": "a"}},
			"allowed-registries": {"", "pass", "success", nil},
			"team-a/team-a-only": {"", "fail", "team-a refuses every Pod", map[string]string{vpol.ValidationIndexProperty: "0"}},
		},
	}, {
		name:   "an exception with no conditions exempts in its namespace",
		object: pod("team-b", "web", nil, "registry.local/web"),
		want: map[string]result{
			"team-label":         {"exception", "skip", "rule is skipped due to policy exception: team-b/elsewhere", map[string]string{"exceptions": "elsewhere"}},
			"allowed-registries": {"", "pass", "success", nil},
		},
	}, {
		name:   "operations: DELETE is not matched",
		object: pod("default", "web", nil, "registry.local/web"),
		op:     kyvernov1.Delete,
		want:   map[string]result{},
	}, {
		name:   "failurePolicy Ignore skips on a matchCondition error; Fail errs in namespaces the selector picks",
		object: cm("prod"),
		want: map[string]result{
			"cm-needs-owner": {"", "skip", "skip", nil},
			"cm-context":     {"evaluation", "error", "failed to load context: ", nil},
		},
	}, {
		name:   "namespaceSelector leaves other namespaces alone",
		object: cm("dev"),
		want:   map[string]result{"cm-needs-owner": {"", "skip", "skip", nil}},
	}, {
		name:   "autogen: the Pod policy judges the Deployment's template",
		object: deployment,
		want: map[string]result{
			"team-label":         {"", "fail", "pod web needs a team label", map[string]string{vpol.ValidationIndexProperty: "0"}},
			"allowed-registries": {"", "pass", "success", nil},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &review.Request{Operation: tt.op, Object: tt.object}
			if tt.op == kyvernov1.Delete {
				req.Object, req.OldObject = nil, tt.object
			}
			resp := set.Validate(context.Background(), req, WithLoaders(loaders))
			got := map[string]bool{}
			for _, pr := range resp.Policies {
				got[pr.Key] = true
				want, ok := tt.want[pr.Key]
				if !ok {
					t.Errorf("%s responded: %+v", pr.Key, pr.Rules)
					continue
				}
				if len(pr.Rules) != 1 {
					t.Fatalf("%s: %d results, want one", pr.Key, len(pr.Rules))
				}
				rr := pr.Rules[0]
				if rr.Name != want.rule || string(rr.Status) != want.status || !strings.HasPrefix(rr.Message, want.message) {
					t.Errorf("%s: got rule %q %s %q, want rule %q %s %q", pr.Key, rr.Name, rr.Status, rr.Message, want.rule, want.status, want.message)
				}
				gotProps, _ := json.Marshal(rr.Properties)
				wantProps, _ := json.Marshal(want.props)
				if string(gotProps) != string(wantProps) {
					t.Errorf("%s: properties %s, want %s", pr.Key, gotProps, wantProps)
				}
			}
			for key := range tt.want {
				if !got[key] {
					t.Errorf("%s did not respond", key)
				}
			}
		})
	}
}

// TestValidatingPolicyFaults checks that a broken ValidatingPolicy is
// refused with every fault and its field path.
func TestValidatingPolicyFaults(t *testing.T) {
	policies, _ := readCELPolicies(t, "faults.yaml")
	_, err := Compile(policies)
	if err == nil {
		t.Fatal("the faulty policy compiled")
	}
	for _, want := range []string{
		`spec.validationActions[0]: unknown action "Block"`,
		`spec.evaluation.mode: evaluation mode "Envoy" is not supported`,
		"spec.matchConstraints: a matchConstraints with at least one resource rule is required",
		"spec.matchConditions[0].expression: ",
		"spec.validations[0].expression: ",
		"spec.validations[1].expression: ",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("faults do not say %q:\n%v", want, err)
		}
	}
}

// TestValidatingPolicyPromotion checks that a staged Audit policy enforces
// in a namespace labelled charter.dev/enforcement=enforce, and only there.
func TestValidatingPolicyPromotion(t *testing.T) {
	policies, _ := readCELPolicies(t, "staged.yaml")
	set, err := Compile(policies)
	if err != nil {
		t.Fatal(err)
	}
	loaders := WithLoaders(loader.Loaders{Namespaces: nsLabels{"shop": {"charter.dev/enforcement": "enforce"}}})
	for ns, want := range map[string]review.Action{"shop": review.Enforce, "dev": review.Audit} {
		resp := set.Validate(context.Background(), &review.Request{Object: pod(ns, "web", nil, "nginx:latest")}, loaders)
		if len(resp.Policies) != 1 || resp.Policies[0].Rules[0].Action != want || resp.Policies[0].Rules[0].Status != review.StatusFail {
			t.Errorf("%s: got %+v, want a fail with action %s", ns, resp.Policies, want)
		}
		if got := resp.Blocked(); got != (want == review.Enforce) {
			t.Errorf("%s: blocked %v", ns, got)
		}
	}
}
