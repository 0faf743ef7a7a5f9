package clitest

import (
	"encoding/json"
	"testing"

	"github.com/charter-dev/charter/internal/imagetest"
)

// TestImageValidatingPolicySuite runs a kyverno-test.yaml suite of an
// ImageValidatingPolicy (isImageValidatingPolicy rows) against a loopback
// registry, as `charter test --registry` does, with a cosign attestor and
// with a notary one (an image signed with notation's signer by a
// certificate of the trusted CA): the signed image passes, the unsigned
// one fails with the validation's message, and the
// NamespacedImageValidatingPolicy answers for its namespace's Pod.
func TestImageValidatingPolicySuite(t *testing.T) {
	t.Run("cosign", func(t *testing.T) {
		reg, key := signedAppRegistry(t)
		pem, _ := json.Marshal(key.PublicPEM)
		imageValidatingPolicySuite(t, reg, "cosign:\n      key: {data: "+string(pem)+"}\n      ctlog: {insecureIgnoreTlog: true, insecureIgnoreSCT: true}")
	})
	t.Run("notary", func(t *testing.T) {
		reg := imagetest.NewRegistry(t)
		ca := imagetest.NewCA(t, "notary CA")
		reg.NotarySign(t, reg.Push(t, "example/app", "signed").DigestRef, ca.NotarySigner(t, "release"))
		reg.Push(t, "example/app", "unsigned")
		pem, _ := json.Marshal(ca.RootPEM)
		imageValidatingPolicySuite(t, reg, "notary: {certs: {value: "+string(pem)+"}}")
	})
}

// imageValidatingPolicySuite runs TestImageValidatingPolicySuite with
// the attestor named key (its YAML after "- name: key") against reg,
// which holds example/app:signed, signed as the attestor verifies, and
// example/app:unsigned.
func imageValidatingPolicySuite(t *testing.T, reg *imagetest.Registry, attestor string) {
	t.Helper()
	dir := t.TempDir()
	write := fileWriter(t, dir)
	attestor = `  attestors:
  - name: key
    ` + attestor + `
  validations:
  - expression: "images.containers.all(i, verifyImageSignatures(i, [attestors.key]) > 0)"
    message: image is not signed by the release key
`
	write("policy.yaml", `apiVersion: policies.kyverno.io/v1alpha1
kind: ImageValidatingPolicy
metadata: {name: signed-images}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}
  matchImageReferences: [{glob: "ghcr.io/example/*"}]
  validationConfigurations: {verifyDigest: false}
`+attestor+`---
apiVersion: policies.kyverno.io/v1
kind: NamespacedImageValidatingPolicy
metadata: {name: team-images, namespace: team-a}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}
  validationConfigurations: {verifyDigest: false}
`+attestor)
	write("resources.yaml", `apiVersion: v1
kind: Pod
metadata: {name: signed, namespace: default}
spec: {containers: [{name: app, image: "ghcr.io/example/app:signed"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: unsigned, namespace: default}
spec: {containers: [{name: app, image: "ghcr.io/example/app:unsigned"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: team-unsigned, namespace: team-a}
spec: {containers: [{name: app, image: "ghcr.io/example/app:unsigned"}]}
`)
	write(DefaultFileName, `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: ivpol}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {isImageValidatingPolicy: true, policy: signed-images, resources: [signed], kind: Pod, result: pass}
- {isImageValidatingPolicy: true, policy: signed-images, resources: [unsigned, team-a/team-unsigned], kind: Pod, result: fail}
- {isImageValidatingPolicy: true, policy: team-images, resources: [team-a/team-unsigned], kind: Pod, result: fail}
`)
	rows := runMirrored(t, reg, dir)
	if c := count(rows); c.Failed != 0 || c.Passed != 4 {
		t.Fatalf("rows: %+v", rows)
	}
	said := false
	for _, r := range rows {
		said = said || r.Resource == "v1/Pod/default/unsigned" && r.Message == "image is not signed by the release key"
	}
	if !said {
		t.Errorf("no row of the unsigned image says why: %+v", rows)
	}
}
