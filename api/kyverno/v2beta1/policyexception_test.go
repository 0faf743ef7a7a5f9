package v2beta1

import (
	"testing"

	"github.com/charter-dev/charter/api/strict"
)

func TestToV2(t *testing.T) {
	doc := `apiVersion: kyverno.io/v2beta1
kind: PolicyException
metadata: {name: e, namespace: ns}
spec:
  exceptions: [{policyName: p, ruleNames: [r]}]
  match: {any: [{resources: {kinds: [Pod]}}]}
`
	var in PolicyException
	if err := strict.Unmarshal([]byte(doc), &in); err != nil {
		t.Fatal(err)
	}
	out := in.ToV2()
	if out.APIVersion != "kyverno.io/v2" || out.Kind != "PolicyException" || out.Name != "e" || out.Namespace != "ns" {
		t.Errorf("ToV2() meta = %s %s %s/%s", out.APIVersion, out.Kind, out.Namespace, out.Name)
	}
	if !out.Spec.Contains("p", "r") {
		t.Error("ToV2() lost the exceptions")
	}
	out.Spec.Exceptions[0].PolicyName = "changed"
	if in.Spec.Exceptions[0].PolicyName != "p" {
		t.Error("ToV2() shares the spec with the original")
	}
}
