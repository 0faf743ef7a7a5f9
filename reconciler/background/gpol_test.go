package background

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
)

// createCELPolicies creates the GeneratingPolicies, MutatingPolicies,
// their Namespaced variants and the policies.kyverno.io PolicyExceptions
// of a testdata file.
func (e *env) createCELPolicies(file string) []client.Object {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []client.Object
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var probe struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &probe); err != nil {
			e.t.Fatal(err)
		}
		var obj client.Object
		switch probe.Kind {
		case policiesv1.GeneratingPolicyKind:
			obj = &policiesv1.GeneratingPolicy{}
		case policiesv1.NamespacedGeneratingPolicyKind:
			obj = &policiesv1.NamespacedGeneratingPolicy{}
		case policiesv1.MutatingPolicyKind:
			obj = &policiesv1.MutatingPolicy{}
		case policiesv1.NamespacedMutatingPolicyKind:
			obj = &policiesv1.NamespacedMutatingPolicy{}
		case policiesv1.PolicyExceptionKind:
			obj = &policiesv1.PolicyException{}
		default:
			e.t.Fatalf("%s: kind %q", file, probe.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			e.t.Fatal(err)
		}
		e.create(obj)
		out = append(out, obj)
	}
	return out
}

func (e *env) gpolNetworkPolicy(ns string) error {
	var np networkingv1.NetworkPolicy
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "gpol-deny"}, &np); err != nil {
		return err
	}
	if np.Labels["generate.kyverno.io/policy-name"] != "gpol-netpol" || np.Labels["generate.kyverno.io/rule-name"] != "gpol-netpol" {
		return fmt.Errorf("labels %v", np.Labels)
	}
	return nil
}

// TestGeneratingPolicy drives GeneratingPolicies through the background
// controller on a real API server, as ClusterPolicy generate rules go:
// existing triggers (generateExisting), a new trigger's UpdateRequest,
// drift undone (synchronize), the trigger's deletion and the policy's
// deletion removing the downstream objects; and a
// NamespacedGeneratingPolicy that acts in its own namespace only.
func TestGeneratingPolicy(t *testing.T) {
	e := startEnv(t)
	e.namespace("existing")
	for _, ns := range []string{"team-a", "team-b"} {
		e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old", Labels: map[string]string{"copy": "yes"}}})
	}
	// team-a's NamespacedGeneratingPolicy writes as team-a's
	// charter-policy, which the tenant lets write ConfigMaps.
	e.grantPolicyServiceAccount("team-a")
	metrics := &generatingMetrics{}
	e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond, Metrics: metrics})
	policies := e.createCELPolicies("gpol-netpol.yaml")

	e.eventually("generateExisting: NetworkPolicy in the existing namespace", func() error { return e.gpolNetworkPolicy("existing") })
	e.eventually("generateExisting: team-a's ConfigMap copied in team-a", func() error {
		return e.cl.Get(e.ctx, client.ObjectKey{Namespace: "team-a", Name: "old-copy"}, &corev1.ConfigMap{})
	})

	created := e.namespace("created")
	e.admit(kyvernov1.Create, created, nil)
	e.eventually("NetworkPolicy in the new namespace", func() error { return e.gpolNetworkPolicy("created") })
	// Each run is counted: generateExisting's for the existing namespace
	// (no admission operation), the UpdateRequest's with its CREATE.
	for _, want := range []string{"gpol-netpol Namespace existing  pass", "gpol-netpol Namespace created CREATE pass"} {
		if !metrics.saw(want) {
			t.Errorf("no GeneratingPolicy run %q among %q", want, metrics.seen())
		}
	}

	var np networkingv1.NetworkPolicy
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "created", Name: "gpol-deny"}, &np); err != nil {
		t.Fatal(err)
	}
	if err := e.cl.Delete(e.ctx, &np); err != nil {
		t.Fatal(err)
	}
	e.eventually("synchronize: the deleted NetworkPolicy is back", func() error { return e.gpolNetworkPolicy("created") })

	if err := e.cl.Delete(e.ctx, created); err != nil {
		t.Fatal(err)
	}
	e.admit(kyvernov1.Delete, nil, created)
	e.eventually("the deleted namespace's NetworkPolicy is deleted", func() error {
		if err := e.gpolNetworkPolicy("created"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})

	// Tenancy: team-a's policy copies team-a's ConfigMaps only, and may
	// not write a cluster-scoped object.
	escalate := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "escalate", Labels: map[string]string{"copy": "yes"}}}
	e.create(escalate)
	e.admit(kyvernov1.Create, escalate, nil)
	e.eventually("the UpdateRequest of the escalation fails naming why", func() error {
		for _, ur := range e.updateRequests() {
			if strings.Contains(ur.Status.Message, "cluster-scoped: a namespaced policy generates only into its own namespace team-a") {
				return nil
			}
		}
		return fmt.Errorf("no failed UpdateRequest yet")
	})
	if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "team-a-escalated"}, &rbacv1.ClusterRole{}); !apierrors.IsNotFound(err) {
		t.Errorf("the namespaced policy created a ClusterRole (err %v)", err)
	}
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "team-b", Name: "old-copy"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("team-a's policy copied team-b's ConfigMap (err %v)", err)
	}

	// The synchronized policy goes: so do its downstream objects.
	if err := e.cl.Delete(e.ctx, policies[0]); err != nil {
		t.Fatal(err)
	}
	e.eventually("the deleted policy's NetworkPolicy is deleted", func() error {
		if err := e.gpolNetworkPolicy("existing"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

// generatingMetrics records the runs handed to Options.Metrics as
// "policy kind name operation result".
type generatingMetrics struct {
	mu   sync.Mutex
	runs []string
}

func (m *generatingMetrics) ObserveGenerating(trigger engine.ResourceRef, op string, p engine.PolicyResponse) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rr := range p.Rules {
		if p.Duration <= 0 {
			rr.Status = "untimed"
		}
		m.runs = append(m.runs, fmt.Sprintf("%s %s %s %s %s", p.Policy.GetName(), trigger.Kind, trigger.Name, op, rr.Status))
	}
}

func (m *generatingMetrics) seen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.runs)
}

func (m *generatingMetrics) saw(run string) bool { return slices.Contains(m.seen(), run) }
