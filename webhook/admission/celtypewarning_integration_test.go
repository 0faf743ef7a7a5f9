package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// celReplicasPolicy checks Deployments' replicas with validate.cel;
// FIELD is the field the expression reads.
const celReplicasPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: replicas}
spec:
  background: false
  rules:
  - name: few-replicas
    match: {any: [{resources: {kinds: [apps/v1/Deployment]}}]}
    validate:
      failureAction: Audit
      cel:
        expressions:
        - expression: "object.spec.FIELD <= 5"
          messageExpression: "'replicas: ' + string(object.spec.FIELD)"
`

// TestCELTypeWarningsOnRealAPIServer: as Kyverno type-checks a
// validate.cel rule against the schema of the kinds it matches and warns
// ("spec.rules[0].validate.cel.expressions[0].expression:..."), policy
// admission warns of an expression reading a field Deployments do not
// have, naming expression and messageExpression, and admits the policy;
// the same policy reading spec.replicas is admitted without a warning.
func TestCELTypeWarningsOnRealAPIServer(t *testing.T) {
	f := startAdmission(t, withOptions(func(o *Options) { o.Events.Disabled = true }))
	cl, warnings := f.warningClient(t)
	typeWarnings := func(field string) ([]string, error) {
		var policy unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(strings.ReplaceAll(celReplicasPolicy, "FIELD", field)), &policy.Object); err != nil {
			t.Fatal(err)
		}
		return warnings.dryRun(f.ctx, cl, &policy, "spec.rules[0].validate.cel.")
	}
	eventually(t, "type warnings for an unknown field", 30*time.Second, func() error {
		got, err := typeWarnings("replicaz")
		if err != nil {
			return err
		}
		if len(got) != 2 ||
			!strings.HasPrefix(got[0], "spec.rules[0].validate.cel.expressions[0].expression:") ||
			!strings.HasPrefix(got[1], "spec.rules[0].validate.cel.expressions[0].messageExpression:") ||
			!strings.Contains(got[0], "apps/v1, Kind=Deployment") || !strings.Contains(got[0], "undefined field 'replicaz'") {
			return fmt.Errorf("warnings %q", got)
		}
		return nil
	})
	got, err := typeWarnings("replicas")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > 0 {
		t.Fatalf("a policy reading spec.replicas: warnings %q", got)
	}
}
