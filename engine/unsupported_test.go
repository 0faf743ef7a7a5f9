package engine

import (
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/unsupported"
)

// TestUnsupportedCompiled checks that Compile records the findings on the
// compiled policy and the set, and that they read as the status and the
// policy admission show them: an audit-only rule's finding is not
// enforced.
func TestUnsupportedCompiled(t *testing.T) {
	var p kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: verify}
spec:
  validationFailureAction: Enforce
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {assert: {object: {spec: {}}}}
  - name: audit
    match: {any: [{resources: {kinds: [Pod]}}]}
    celPreconditions: [{name: can, expression: "authorizer.group('').resource('pods').check('get').allowed()"}]
    validate: {failureAction: Audit, cel: {expressions: [{expression: "true"}]}}
`), &p); err != nil {
		t.Fatal(err)
	}
	set, err := Compile([]kyvernov1.PolicyInterface{&p})
	if err != nil {
		t.Fatal(err)
	}
	all := set.Unsupported()
	if len(all) != 2 {
		t.Fatalf("findings: %v", all)
	}
	cli := set.Policies()[0].Unsupported().In(unsupported.InCLI)
	if len(cli) != 2 || cli[1].Field != "spec.rules[1].celPreconditions[0].expression" || cli[1].Enforce {
		t.Fatalf("CLI findings: %v", cli)
	}
	want := `spec.rules[0].validate.assert: validate.assert is not supported by charter anywhere yet`
	if got := all.In(unsupported.InCluster).Enforced().Messages(); got != want {
		t.Errorf("messages:\n got %s\nwant %s", got, want)
	}
	if got := cli.Enforced().Error(); got != `ClusterPolicy "verify": spec.rules[0].validate.assert: validate.assert is not supported by charter anywhere yet` {
		t.Errorf("error: %s", got)
	}
}
