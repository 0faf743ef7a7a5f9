package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// vpolTeamLabel denies Pods in namespace ns whose label team is not
// "a", read through a variable. Pods without labels make the variable err
// at runtime ("no such key: labels"), which is what failurePolicy decides
// on; so do Pods without annotations, through a matchCondition.
func vpolTeamLabel(t *testing.T, name, ns, failurePolicy string) *policiesv1.ValidatingPolicy {
	t.Helper()
	manifest := fmt.Sprintf(`
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: %s}
spec:
  validationActions: [Deny]
  failurePolicy: %s
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %s}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  matchConditions:
  - name: not-opted-out
    expression: "!has(object.metadata.labels) || !('check-annotations' in object.metadata.labels) || object.metadata.annotations.checked == 'yes'"
  variables:
  - {name: team, expression: "object.metadata.labels.team"}
  validations:
  - expression: "variables.team == 'a'"
    message: team must be a
`, name, failurePolicy, ns)
	var p policiesv1.ValidatingPolicy
	if err := yaml.UnmarshalStrict([]byte(manifest), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func podIn(name, ns string, labels map[string]string) *corev1.Pod {
	p := pod(name, labels)
	p.Namespace = ns
	return p
}

// TestValidatingPolicyOnRealAPIServer: a ValidatingPolicy under
// validationActions [Deny] fails closed: an expression that errs at
// runtime denies the request under failurePolicy Fail (the default) and
// admits it under Ignore, as Kyverno's vpol handler does; a failing
// validation denies under both. Denials read as Kyverno's
// ("Policy <name> failed: <message>", "Policy <name> error: <message>").
func TestValidatingPolicyOnRealAPIServer(t *testing.T) {
	f := startAdmission(t, withNamespaces("closed", "open"))
	ctx, cl := f.ctx, f.client
	for _, p := range []*policiesv1.ValidatingPolicy{
		vpolTeamLabel(t, "team-closed", "closed", "Fail"),
		vpolTeamLabel(t, "team-open", "open", "Ignore"),
	} {
		eventually(t, "policy "+p.Name+" created", 30*time.Second, func() error { return cl.Create(ctx, p.DeepCopy()) })
	}
	// Both policies are served once a failing Pod is refused in each
	// namespace.
	for _, ns := range []string{"closed", "open"} {
		eventually(t, "policy served in "+ns, 30*time.Second, func() error {
			p := podIn("probe", ns, map[string]string{"team": "b"})
			if err := cl.Create(ctx, p); err == nil {
				_ = cl.Delete(ctx, p)
				return errNotYet("Pod with team b admitted in " + ns)
			}
			return nil
		})
	}

	t.Run("a runtime error under failurePolicy Fail denies", func(t *testing.T) {
		for _, c := range []struct {
			what   string
			labels map[string]string
			want   string
		}{
			{"variable", nil, `denied the request: Policy team-closed error: error: composited variable "team" fails to evaluate: no such key: labels`},
			// The API server evaluates the policy's matchConditions in
			// the policy's own webhook, and answers, as for Kyverno.
			{"matchcondition", map[string]string{"check-annotations": "", "team": "a"}, `object.metadata.annotations.checked == 'yes')' resulted in error: no such key: annotations`},
		} {
			err := cl.Create(ctx, podIn("erring-"+c.what, "closed", c.labels))
			if err == nil {
				t.Fatalf("Pod whose %s errs was admitted under failurePolicy Fail", c.what)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("denial %q, want it to contain %q", err, c.want)
			}
		}
	})

	t.Run("a runtime error under failurePolicy Ignore admits", func(t *testing.T) {
		for _, labels := range []map[string]string{nil, {"check-annotations": "", "team": "b"}} {
			p := podIn("erring", "open", labels)
			if err := cl.Create(ctx, p); err != nil {
				t.Fatalf("Pod labelled %v whose policy errs was denied under failurePolicy Ignore: %v", labels, err)
			}
			if err := cl.Delete(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("a failing validation denies under both, with Kyverno's message", func(t *testing.T) {
		for _, c := range []struct{ ns, policy string }{{"closed", "team-closed"}, {"open", "team-open"}} {
			err := cl.Create(ctx, podIn("team-b", c.ns, map[string]string{"team": "b"}))
			if err == nil {
				t.Fatalf("Pod with team b admitted in %s", c.ns)
			}
			want := `denied the request: Policy ` + c.policy + ` failed: team must be a`
			if !strings.Contains(err.Error(), want) {
				t.Errorf("denial %q, want it to contain %q", err, want)
			}
		}
	})

	t.Run("a policies.kyverno.io PolicyException exempts what it selects", func(t *testing.T) {
		ex := &policiesv1.PolicyException{
			ObjectMeta: metav1.ObjectMeta{Namespace: "closed", Name: "exempt-labelled"},
			Spec: policiesv1.PolicyExceptionSpec{
				PolicyRefs: []policiesv1.PolicyRef{{Name: "team-closed", Kind: policiesv1.ValidatingPolicyKind}},
				MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "labelled",
					Expression: "has(object.metadata.labels) && object.metadata.labels.?exempt.orValue('') == 'yes'"}},
			},
		}
		eventually(t, "exception created", 30*time.Second, func() error { return cl.Create(ctx, ex) })
		eventually(t, "exempt Pod admitted", 30*time.Second, func() error {
			return cl.Create(ctx, podIn("exempt", "closed", map[string]string{"exempt": "yes", "team": "b"}))
		})
		if err := cl.Create(ctx, podIn("not-exempt", "closed", map[string]string{"exempt": "no", "team": "b"})); err == nil {
			t.Error("a Pod the exception does not select was admitted")
		}
	})

	t.Run("a passing Pod is admitted", func(t *testing.T) {
		if err := cl.Create(ctx, podIn("team-a", "closed", map[string]string{"team": "a"})); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a namespaced policy calling http.* is refused", func(t *testing.T) {
		var p policiesv1.NamespacedValidatingPolicy
		if err := yaml.UnmarshalStrict([]byte(`
apiVersion: policies.kyverno.io/v1
kind: NamespacedValidatingPolicy
metadata: {name: remote, namespace: closed}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  validations:
  - expression: "http.Get('https://verdicts.example/' + object.metadata.name).allowed == true"
`), &p); err != nil {
			t.Fatal(err)
		}
		err := cl.Create(ctx, &p)
		want := `NamespacedValidatingPolicy "closed/remote": spec.validations[0].expression: http.* is not allowed in namespaced policies; set --allow-http-in-namespaced-policies to enable`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want the policy webhook's refusal %q", err, want)
		}
	})
}
