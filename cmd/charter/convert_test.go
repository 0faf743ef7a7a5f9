package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/charter-dev/charter/internal/clitest/manifest"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/corpus"
	"github.com/charter-dev/charter/internal/imagetest"
)

// TestConvertVerifiesThePolicyLibrary: every policy of policies/ converts
// cleanly (add-namespace-labels' apiCall as a resource.Get variable, which
// its suite's values mock as they mock the original's context entry), and
// their own kyverno-test suites give the same verdict (and patched object)
// for every resource on the original and the conversion;
// --check passes; -o DIR writes each policy file's conversion at the same
// relative path, as documents charter decodes as ValidatingPolicies.
func TestConvertVerifiesThePolicyLibrary(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	lib := []string{filepath.Join(root, "policies")}
	out := t.TempDir()
	stdout, stderr, err := runCharter(t, append([]string{"convert", "--verify", "--check", "-o", out}, lib...)...)
	if err != nil {
		t.Fatalf("convert --check failed: %v\n%s%s", err, stdout, stderr)
	}
	if !everyPolicyVerified(stdout) {
		t.Fatalf("want every policy converted and verified, got:\n%s", stdout)
	}
	written := filepath.Join(out, "best-practices", "disallow-latest-tag", "disallow-latest-tag.yaml")
	docs, err := manifest.ReadFile(written)
	if err != nil {
		t.Fatalf("-o %s: %v", out, err)
	}
	pf, err := manifest.DecodePolicies(docs)
	if err != nil || len(pf.Policies) != 1 || pf.Policies[0].GetKind() != "ValidatingPolicy" {
		t.Fatalf("%s: want one ValidatingPolicy, got %v (%v)", written, pf, err)
	}
}

// TestConvertCheckFailsOnWhatDoesNotConvert: --check exits 1 and the table
// names each rule that did not convert with its reason; -o yaml prints
// nothing of that policy without --partial, and its converted rules with
// it.
func TestConvertCheckFailsOnWhatDoesNotConvert(t *testing.T) {
	policy := filepath.Join("..", "..", "engine", "convert", "testdata", "unconvertible", "policy.yaml")
	stdout, _, err := runCharter(t, "convert", "--check", policy)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("want exit 1, got %v\n%s", err, stdout)
	}
	// Two of its three rules convert (the mutate rule and a validate
	// rule); podSecurity at v1.24 does not.
	for _, want := range []string{`rule baseline: validate\.podSecurity`, `mixed\s+3\s+2\s`} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	stdout, stderr, err := runCharter(t, "convert", "-o", "yaml", policy)
	if err != nil || strings.TrimSpace(stdout) != "" || !strings.Contains(stderr, "podSecurity") {
		t.Errorf("without --partial: err %v, stdout %q, stderr %q", err, stdout, stderr)
	}
	stdout, _, err = runCharter(t, "convert", "--partial", "-o", "yaml", policy)
	if err != nil || !strings.Contains(stdout, "kind: ValidatingPolicy") || !strings.Contains(stdout, "app.kubernetes.io/name") {
		t.Errorf("with --partial: err %v, stdout:\n%s", err, stdout)
	}
}

// TestConvertCleanupPolicies: charter convert reads the kyverno.io cleanup
// kinds of the kind table, a ClusterCleanupPolicy into a DeletingPolicy
// and a CleanupPolicy (in "default" when it names no namespace) into a
// NamespacedDeletingPolicy; a DeletingPolicy is converted already and is
// left alone.
func TestConvertCleanupPolicies(t *testing.T) {
	cluster, err := os.ReadFile(filepath.Join("..", "..", "engine", "convert", "testdata", "cleanup", "cleanup.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const namespaced = `apiVersion: kyverno.io/v2
kind: CleanupPolicy
metadata:
  name: old-jobs
spec:
  schedule: "0 * * * *"
  match:
    any:
    - resources:
        kinds: [Job]
---
apiVersion: policies.kyverno.io/v1
kind: DeletingPolicy
metadata:
  name: converted-already
spec:
  schedule: "0 * * * *"
  matchConstraints:
    resourceRules:
    - apiGroups: [batch]
      apiVersions: [v1]
      operations: ["*"]
      resources: [jobs]
`
	file := filepath.Join(t.TempDir(), "cleanup.yaml")
	if err := os.WriteFile(file, []byte(string(cluster)+"---\n"+namespaced), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runCharter(t, "convert", "--check", "-o", "yaml", file)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	for _, want := range []string{"kind: DeletingPolicy\nmetadata:\n  name: stale-test-pods\n",
		"kind: NamespacedDeletingPolicy\nmetadata:\n  name: old-jobs\n  namespace: default\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "converted-already") {
		t.Errorf("the DeletingPolicy was converted:\n%s", stdout)
	}
}

// TestConvertVerifiesTestdataSuites: each testdata case with its own
// kyverno-test suite converts cleanly and gives the same verdicts on the
// original and the conversion, with the output kinds the table names.
func TestConvertVerifiesTestdataSuites(t *testing.T) {
	cases := []struct{ dir, output string }{
		// generate clone and cloneList read their sources with
		// resource.Get and resource.List; the suite's sources are
		// cluster resources that both the original's clone and the
		// conversion's reads see.
		{"clone", "2 GeneratingPolicy"},
		// a quoted '{{ element.name }}' inside a filter, a boolean's
		// truthiness, lists missing on some resources.
		{"foreach-filter", "ValidatingPolicy"},
		// foreach context entries read for each element (an apiCall of
		// the suite's cluster resources, an imageRegistry read the suite
		// mocks), a multi-select hash, a pattern value that is the
		// requester's service account (from the suite's user info), the
		// registries of the images variable.
		{"foreach-context", "4 ValidatingPolicy"},
		// mutate existing: the trigger's verdict and each target's patched
		// object, the targets given as cluster resources (which the
		// MutatingPolicy's resource.List reads, as the original does).
		{"mutate-existing", "MutatingPolicy"},
		// podSecurity at both levels, with exclusions by control and by
		// image, on Pods for the relaxations of the latest version.
		{"podsecurity", "verdicts equal: 4 of 4"},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			dir := filepath.Join("..", "..", "engine", "convert", "testdata", c.dir)
			stdout, stderr, err := runCharter(t, "convert", "--verify", "--check", dir)
			if err != nil {
				t.Fatalf("convert --verify --check: %v\n%s%s", err, stdout, stderr)
			}
			if !everyPolicyVerified(stdout) || !strings.Contains(stdout, c.output) {
				t.Fatalf("want the policy converted to %s and verified:\n%s", c.output, stdout)
			}
		})
	}
}

// everyPolicyVerified reads the summary line of convert --verify: every
// policy converted cleanly and every one verified equal, at least one.
func everyPolicyVerified(stdout string) bool {
	m := regexp.MustCompile(`Converted cleanly: (\d+) of (\d+) policies; verdicts equal: (\d+) of (\d+) verified`).FindStringSubmatch(stdout)
	return m != nil && m[1] == m[2] && m[3] == m[4] && m[1] == m[3] && m[1] != "0"
}

// TestConvertPodSecurityMatchesTheEngine: the podSecurity policies of
// testdata/podsecurity (both levels, with and without exclusions) give the
// same verdict converted as the engine's Pod Security Standards check on
// every Pod of the corpus's pod-security suites (one suite each: their Pods
// share names), several hundred Pods that each break one control.
func TestConvertPodSecurityMatchesTheEngine(t *testing.T) {
	dir, err := corpus.Dir()
	if err != nil {
		t.Fatal(err)
	}
	policies := filepath.Join("..", "..", "engine", "convert", "testdata", "podsecurity")
	var policyFiles []string
	for _, name := range []string{"policy.yaml", "baseline.yaml"} {
		data, err := os.ReadFile(filepath.Join(policies, name))
		if err != nil {
			t.Fatal(err)
		}
		policyFiles = append(policyFiles, string(data))
	}
	sources, err := filepath.Glob(filepath.Join(dir, "kyverno-policies", "pod-security", "*", "*", ".kyverno-test", "resource.yaml"))
	if err != nil || len(sources) < 10 {
		t.Fatalf("want the pod-security suites' resources, found %d (%v)", len(sources), err)
	}
	work := t.TempDir()
	for i, src := range sources {
		resources, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		suite := filepath.Join(work, strconv.Itoa(i))
		files := map[string]string{
			"policies.yaml":  strings.Join(policyFiles, "\n---\n"),
			"resources.yaml": string(resources),
			"kyverno-test.yaml": "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nmetadata:\n  name: podsecurity\n" +
				"policies: [policies.yaml]\nresources: [resources.yaml]\n" +
				// A suite runs the operations its results name; verify
				// compares every resource, whatever the results expect.
				"results:\n- {policy: baseline, rule: baseline, kind: Pod, resources: [any], result: pass}\n",
		}
		if err := os.MkdirAll(suite, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(suite, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	stdout, stderr, err := runCharter(t, "convert", "--verify", "--check", work)
	if err != nil || !everyPolicyVerified(stdout) {
		t.Fatalf("convert --verify --check: %v\n%s%s", err, stdout, stderr)
	}
	// Each policy is compared on every suite's Pods (and the Pod
	// templates of its controllers).
	compared := 0
	for _, m := range regexp.MustCompile(`yes \((\d+)\)`).FindAllStringSubmatch(stdout, -1) {
		n, _ := strconv.Atoi(m[1])
		compared += n
	}
	if want := 4 * 500; compared < want {
		t.Errorf("want at least %d verdicts compared, got %d:\n%s", want, compared, stdout)
	}
	t.Logf("%d verdicts compared", compared)
}

// TestConvertVerifiesImageVerification: the verifyImages rules of
// testdata/verify-images (a release key; either of two keys, one of
// them required; keyless under a test CA; a provenance attestation with
// a condition on its predicate; notation signatures and a signed SBOM
// referrer under the test CA), and a Policy's under Audit, convert to
// ImageValidatingPolicies (a NamespacedImageValidatingPolicy) that
// give the same verdict as the original for every resource of the suite,
// both verified against a loopback registry holding its images signed
// as their tags say (charter convert --verify --registry): signed images
// admitted, unsigned ones, other keys, another identity, another builder
// and a missing attestation refused, an image no rule names ignored. The
// suite's own expectations of the original hold too (charter test).
func TestConvertVerifiesImageVerification(t *testing.T) {
	dir := filepath.Join("..", "..", "engine", "convert", "testdata", "verify-images")
	reg := verifyImagesRegistry(t, dir)
	stdout, stderr, err := runCharter(t, "convert", "--verify", "--check", "--registry", reg.Host, dir)
	if err != nil {
		t.Fatalf("convert --verify --check: %v\n%s%s", err, stdout, stderr)
	}
	// 19 resources, compared for each of the ClusterPolicy's five
	// converted policies and the Policy's one.
	for _, want := range []string{`verify-images\s+5\s+5\s+5 ImageValidatingPolicy\s+yes \(95\)`, `team-a/team-images\s+1\s+1\s+NamespacedImageValidatingPolicy\s+yes \(19\)`} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	if !everyPolicyVerified(stdout) {
		t.Fatalf("want every policy converted and verified on every resource:\n%s", stdout)
	}
	stdout, stderr, err = runCharter(t, "test", "--registry", reg.Host, dir)
	if err != nil {
		t.Fatalf("charter test of the original: %v\n%s%s", err, stdout, stderr)
	}
}

// verifyImagesRegistry starts the registry of testdata/verify-images:
// each image signed or attested as its tag says, with the suite's test
// keys and a keyless certificate its test CA issues now.
func verifyImagesRegistry(t *testing.T, dir string) *imagetest.Registry {
	t.Helper()
	release := imagetest.LoadKeyFile(t, filepath.Join(dir, "release.key"))
	backup := imagetest.LoadKeyFile(t, filepath.Join(dir, "backup.key"))
	ca := imagetest.LoadCA(t, filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"))
	keyless := func(email string) func(*imagetest.Registry, imagetest.Image) {
		return func(reg *imagetest.Registry, img imagetest.Image) {
			signer, cert := ca.Leaf(t, imagetest.Identity{Email: email, Issuer: "https://token.example.com"})
			reg.Sign(t, img, signer, imagetest.SignOptions{Cert: cert, Chain: []byte(ca.RootPEM)})
		}
	}
	signedBy := func(key *imagetest.Key) func(*imagetest.Registry, imagetest.Image) {
		return func(reg *imagetest.Registry, img imagetest.Image) {
			reg.Sign(t, img, key.Signer, imagetest.SignOptions{})
		}
	}
	builtBy := func(builder string) func(*imagetest.Registry, imagetest.Image) {
		return func(reg *imagetest.Registry, img imagetest.Image) {
			st := imagetest.Statement(img, "https://slsa.dev/provenance/v0.2", map[string]any{"builder": map[string]any{"id": builder}})
			reg.Attest(t, img, release.Signer, st, nil)
		}
	}
	notary := ca.NotarySigner(t, "release")
	notarized := func(sbom bool) func(*imagetest.Registry, imagetest.Image) {
		return func(reg *imagetest.Registry, img imagetest.Image) {
			reg.NotarySign(t, img.DigestRef, notary)
			if sbom {
				att := reg.Attach(t, img, "application/vnd.cyclonedx+json", map[string]any{"bomFormat": "CycloneDX"})
				reg.NotarySign(t, att.DigestRef, notary)
			}
		}
	}
	unsigned := func(*imagetest.Registry, imagetest.Image) {}
	images := []struct {
		repo, tag string
		sign      func(*imagetest.Registry, imagetest.Image)
	}{
		{"example/app", "signed", signedBy(release)},
		{"example/app", "unsigned", unsigned},
		{"example/app", "backup-signed", signedBy(backup)},
		{"example/tool", "backup-signed", signedBy(backup)},
		{"example/tool", "unsigned", unsigned},
		{"example/keyless", "signed", keyless("dev@example.com")},
		{"example/keyless", "outsider", keyless("dev@example.net")},
		{"example/built", "ci", builtBy("https://ci.example.com/builder")},
		{"example/built", "elsewhere", builtBy("https://elsewhere.example.net/builder")},
		{"example/built", "unattested", unsigned},
		{"example/notarized", "sbom", notarized(true)},
		{"example/notarized", "no-sbom", notarized(false)},
		{"example/notarized", "unsigned", unsigned},
	}
	reg := imagetest.NewRegistry(t)
	for _, img := range images {
		img.sign(reg, reg.Push(t, img.repo, img.tag))
	}
	return reg
}
