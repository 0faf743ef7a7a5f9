package clitest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/egress"
	"github.com/charter-dev/charter/internal/imagetest"
)

// TestVerifyImagesSuite runs a suite with a verifyImages rule against a
// registry on loopback, as `charter test --registry` does: the
// resources name ghcr.io images, the registry serves the same
// repositories, a signed image passes and an unsigned one fails with the
// reason.
func TestVerifyImagesSuite(t *testing.T) {
	reg, key := signedAppRegistry(t)
	dir := t.TempDir()
	writeImageSuite(t, dir, "ghcr.io/example", key.PublicPEM)
	rows := runMirrored(t, reg, dir)
	// Each row is checked against both phases' responses, as in
	// Kyverno's CLI: verification (mutating) and verifyDigest/required
	// (validating).
	if c := count(rows); c.Failed != 0 || c.Passed != 4 {
		t.Fatalf("rows: %+v", rows)
	}
	said := false
	for _, r := range rows {
		said = said || (strings.HasSuffix(r.Resource, "/unsigned") &&
			r.Message == "failed to verify image ghcr.io/example/app:unsigned: .attestors[0].entries[0].keys: no signatures found")
	}
	if !said {
		t.Errorf("no row of the unsigned image says why: %+v", rows)
	}

	// Without the registry the same suite cannot verify: the rows fail.
	offline := NewRunner(Options{FileName: DefaultFileName, ImageVerifier: imageverify.New(imageverify.Options{Mirror: "127.0.0.1:1", Egress: egress.Open()})})
	results, err := offline.Run(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if c := count(results[0].Rows); c.Failed == 0 {
		t.Fatalf("an unreachable registry passed the suite: %+v", results[0].Rows)
	}
}

// TestGateVerifiesImages: the GitOps test gate runs a repository's
// verifyImages suite with the verifier it is given; without one the
// rows cannot pass, so the gate refuses the revision.
func TestGateVerifiesImages(t *testing.T) {
	reg, key := signedAppRegistry(t)
	root := t.TempDir()
	suite := filepath.Join(root, "tests")
	if err := os.Mkdir(suite, 0o755); err != nil {
		t.Fatal(err)
	}
	writeImageSuite(t, suite, reg.Host+"/example", key.PublicPEM)

	failures, err := RepositoryTests{ImageVerifier: imageverify.New(imageverify.Options{Egress: reg.Egress()})}.RunTests(context.Background(), root, suite)
	if err != nil || len(failures) != 0 {
		t.Fatalf("gate with a verifier: failures %v, err %v", failures, err)
	}
	failures, err = RepositoryTests{}.RunTests(context.Background(), root, suite)
	if err != nil || len(failures) == 0 || !strings.Contains(strings.Join(failures, "\n"), "no image verifier is configured") {
		t.Fatalf("gate without a verifier: failures %v, err %v", failures, err)
	}
}

// writeImageSuite writes a kyverno-test.yaml suite to dir: an Enforce
// verifyImages policy trusting pem for <prefix>/*, and Pods running
// <prefix>/app:signed (expected pass) and <prefix>/app:unsigned
// (expected fail).
func writeImageSuite(t *testing.T, dir, prefix, pem string) {
	t.Helper()
	key, _ := json.Marshal(pem)
	write := fileWriter(t, dir)
	write("policy.yaml", `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: signed-images}
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: check-signature
    match: {any: [{resources: {kinds: [Pod]}}]}
    verifyImages:
    - imageReferences: ["`+prefix+`/*"]
      attestors:
      - entries:
        - keys:
            publicKeys: `+string(key)+`
            rekor: {url: "http://127.0.0.1:1", ignoreTlog: true}
`)
	write("resources.yaml", `apiVersion: v1
kind: Pod
metadata: {name: signed, namespace: default}
spec: {containers: [{name: app, image: "`+prefix+`/app:signed"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: unsigned, namespace: default}
spec: {containers: [{name: app, image: "`+prefix+`/app:unsigned"}]}
`)
	write(DefaultFileName, `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: images}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: signed-images, rule: check-signature, resources: [signed], kind: Pod, result: pass}
- {policy: signed-images, rule: check-signature, resources: [unsigned], kind: Pod, result: fail}
`)
}

// signedAppRegistry is a registry on loopback holding example/app:signed,
// signed by the key it returns, and example/app:unsigned.
func signedAppRegistry(t *testing.T) (*imagetest.Registry, *imagetest.Key) {
	t.Helper()
	key := imagetest.NewKey(t)
	reg, _, _ := imagetest.NewSignedRegistry(t, "example/app", key)
	return reg, key
}

// runMirrored runs the one suite in dir as `charter test --registry
// <reg>` does, every image pulled from reg, and returns its rows.
func runMirrored(t *testing.T, reg *imagetest.Registry, dir string) []Row {
	t.Helper()
	runner := NewRunner(Options{FileName: DefaultFileName, ImageVerifier: imageverify.New(imageverify.Options{Mirror: reg.Host, Egress: egress.Open()})})
	results, err := runner.Run(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Err != nil {
		t.Fatalf("results: %+v", results)
	}
	return results[0].Rows
}

// fileWriter returns a function writing a file named name into dir.
func fileWriter(t *testing.T, dir string) func(name, content string) {
	return func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestImageExtractorsSuite runs testdata/imageextractors as `charter test
// --registry <loopback>` does: a verifyImages rule with a custom extractor
// for Tekton Task steps verifies their signatures (the suite's test key
// signed example/app:signed only), and one with a jmesPath extractor for
// Argo-style Workflow templates (docker://…) requires a digest.
func TestImageExtractorsSuite(t *testing.T) {
	dir := filepath.Join("testdata", "imageextractors")
	reg, _, _ := imagetest.NewSignedRegistry(t, "example/app", imagetest.LoadKeyFile(t, filepath.Join(dir, "test-signing.key")))
	rows := runMirrored(t, reg, dir)
	// Task rows answer both phases (verification, then required);
	// Workflow rows only the validating one (verifyDigest): an entry
	// without attestors that pins nothing gives no mutating response.
	if c := count(rows); c.Failed != 0 || c.Passed != 6 {
		t.Fatalf("rows: %+v", rows)
	}
	want := map[string]string{
		"ci/build-unsigned": "failed to verify image ghcr.io/example/app:unsigned: .attestors[0].entries[0].keys: no signatures found",
		"ci/release-by-tag": "missing digest for ghcr.io/example/tool:v2",
	}
	for _, r := range rows {
		for suffix, msg := range want {
			if strings.HasSuffix(r.Resource, suffix) && r.Message == msg {
				delete(want, suffix)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("no row says %v: %+v", want, rows)
	}
}
