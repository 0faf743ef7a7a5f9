package clitest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/imagetest"
)

// TestVerifyImagesNotarySuite runs a suite whose ClusterPolicy verifies
// images with `type: Notary` (verify-images.md §3.5) against a loopback
// registry, as `charter test --registry` does: the attestor's
// certificates are the signing CA (cert) and nothing else, an image
// Notary-signed by a certificate that CA issued, with a signed CycloneDX
// referrer meeting the attestation's conditions, passes; an unsigned image
// fails, and so does a signed image whose only SBOM referrer is unsigned,
// or one signed under another CA.
func TestVerifyImagesNotarySuite(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	ca := imagetest.NewCA(t, "notary CA")
	signer := ca.NotarySigner(t, "release")
	const sbomType = "application/vnd.cyclonedx+json"
	sbom := map[string]any{"bomFormat": "CycloneDX"}

	signed := reg.Push(t, "example/app", "signed")
	reg.NotarySign(t, signed.DigestRef, signer)
	reg.NotarySign(t, reg.Attach(t, signed, sbomType, sbom).DigestRef, signer)
	reg.Push(t, "example/app", "unsigned")
	unsignedSBOM := reg.Push(t, "example/app", "unsigned-sbom")
	reg.NotarySign(t, unsignedSBOM.DigestRef, signer)
	reg.Attach(t, unsignedSBOM, sbomType, sbom)
	other := reg.Push(t, "example/app", "other-ca")
	otherSigner := imagetest.NewCA(t, "another CA").NotarySigner(t, "release")
	reg.NotarySign(t, other.DigestRef, otherSigner)
	reg.NotarySign(t, reg.Attach(t, other, sbomType, sbom).DigestRef, otherSigner)

	dir := t.TempDir()
	write := fileWriter(t, dir)
	cert, _ := json.Marshal(ca.RootPEM)
	prefix := reg.Host + "/example"
	write("policy.yaml", `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: notary-images}
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: check-notary
    match: {any: [{resources: {kinds: [Pod]}}]}
    verifyImages:
    - imageReferences: ["`+prefix+`/*"]
      type: Notary
      attestors:
      - entries:
        - certificates:
            cert: `+string(cert)+`
      attestations:
      - type: `+sbomType+`
        attestors:
        - entries:
          - certificates:
              cert: `+string(cert)+`
        conditions:
        - all:
          - key: "{{ bomFormat }}"
            operator: Equals
            value: CycloneDX
`)
	var pods, results []string
	for _, c := range []struct{ tag, result string }{{"signed", "pass"}, {"unsigned", "fail"}, {"unsigned-sbom", "fail"}, {"other-ca", "fail"}} {
		pods = append(pods, `apiVersion: v1
kind: Pod
metadata: {name: `+c.tag+`, namespace: default}
spec: {containers: [{name: app, image: "`+prefix+`/app:`+c.tag+`"}]}
`)
		results = append(results, "- {policy: notary-images, rule: check-notary, resources: ["+c.tag+"], kind: Pod, result: "+c.result+"}")
	}
	write("resources.yaml", strings.Join(pods, "---\n"))
	write(DefaultFileName, `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: notary}
policies: [policy.yaml]
resources: [resources.yaml]
results:
`+strings.Join(results, "\n")+"\n")

	runner := NewRunner(Options{FileName: DefaultFileName, ImageVerifier: imageverify.New(imageverify.Options{Egress: reg.Egress()})})
	out, err := runner.Run(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Err != nil {
		t.Fatalf("results: %+v", out)
	}
	rows := out[0].Rows
	if c := count(rows); c.Failed != 0 || c.Passed != 8 {
		t.Fatalf("rows: %+v", rows)
	}
	// Each resource has a row per phase, as in TestVerifyImagesSuite: the
	// verification's says why, verifyDigest's that no digest was pinned.
	why := map[string]string{}
	for _, r := range rows {
		if r.Actual == "fail" && !strings.HasPrefix(r.Message, "missing digest") {
			why[r.Resource[strings.LastIndex(r.Resource, "/")+1:]] = r.Message
		}
	}
	for tag, want := range map[string]string{
		"unsigned":      "failed to verify image " + prefix + "/app:unsigned: .attestors[0].entries[0].certificates: ",
		"unsigned-sbom": "image attestations verification failed, verifiedCount: 0, requiredCount: 1",
		"other-ca":      "failed to verify image " + prefix + "/app:other-ca: .attestors[0].entries[0].certificates: ",
	} {
		if !strings.HasPrefix(why[tag], want) {
			t.Errorf("%s: verification says %q, want it to start %q", tag, why[tag], want)
		}
	}
}
