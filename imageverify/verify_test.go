package imageverify_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/imagetest"
)

// fixture is a loopback registry with images signed in different ways.
type fixture struct {
	reg                               *imagetest.Registry
	key, key2, other                  *imagetest.Key
	ca, otherCA                       *imagetest.CA
	signed, unsigned, wrongKey, multi imagetest.Image
	keyless, keylessNoEKU, copied     imagetest.Image
	attested, tampered, otherSubject  imagetest.Image
	annotated, referrer               imagetest.Image
	// expired and expiredUnlogged are signed by a leaf that expired 40
	// minutes ago; expired carries a bundle of rekor logged while the
	// leaf was valid.
	rekor, otherRekor        *imagetest.Rekor
	expired, expiredUnlogged imagetest.Image
}

const slsa = "https://slsa.dev/provenance/v0.2"

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{reg: imagetest.NewRegistry(t), key: imagetest.NewKey(t), key2: imagetest.NewKey(t), other: imagetest.NewKey(t),
		ca: imagetest.NewCA(t, "fulcio"), otherCA: imagetest.NewCA(t, "not-fulcio")}
	r := f.reg
	f.signed = r.Push(t, "app", "signed")
	r.Sign(t, f.signed, f.key.Signer, imagetest.SignOptions{})
	f.unsigned = r.Push(t, "app", "unsigned")
	f.wrongKey = r.Push(t, "app", "other-key")
	r.Sign(t, f.wrongKey, f.other.Signer, imagetest.SignOptions{})
	f.multi = r.Push(t, "app", "second-key")
	r.Sign(t, f.multi, f.key2.Signer, imagetest.SignOptions{})
	f.referrer = r.Push(t, "app", "referrer")
	r.Sign(t, f.referrer, f.key.Signer, imagetest.SignOptions{OCI11: true})
	f.annotated = r.Push(t, "app", "annotated")
	r.Sign(t, f.annotated, f.key.Signer, imagetest.SignOptions{Annotations: map[string]any{"env": "prod"}})

	id := imagetest.Identity{Email: "dev@example.com", Issuer: "https://token.actions.example.com",
		Extensions: map[string]string{"1.3.6.1.4.1.57264.1.5": "org/app"}}
	leaf, cert := f.ca.Leaf(t, id)
	f.keyless = r.Push(t, "app", "keyless")
	r.Sign(t, f.keyless, leaf, imagetest.SignOptions{Cert: cert, Chain: []byte(f.ca.RootPEM)})
	noEKU, noEKUCert := f.ca.Leaf(t, imagetest.Identity{Email: "dev@example.com", Issuer: id.Issuer, NoCodeSigning: true})
	f.keylessNoEKU = r.Push(t, "app", "keyless-no-eku")
	r.Sign(t, f.keylessNoEKU, noEKU, imagetest.SignOptions{Cert: noEKUCert, Chain: []byte(f.ca.RootPEM)})

	f.rekor, f.otherRekor = imagetest.NewRekor(t), imagetest.NewRekor(t)
	now := time.Now()
	expiredID := id
	expiredID.NotBefore, expiredID.NotAfter = now.Add(-50*time.Minute), now.Add(-40*time.Minute)
	expiredLeaf, expiredCert := f.ca.Leaf(t, expiredID)
	f.expired = r.Push(t, "app", "expired")
	r.Sign(t, f.expired, expiredLeaf, imagetest.SignOptions{Cert: expiredCert, Chain: []byte(f.ca.RootPEM), Rekor: f.rekor, LoggedAt: now.Add(-45 * time.Minute)})
	f.expiredUnlogged = r.Push(t, "app", "expired-unlogged")
	r.Sign(t, f.expiredUnlogged, expiredLeaf, imagetest.SignOptions{Cert: expiredCert, Chain: []byte(f.ca.RootPEM)})

	// A's signature copied onto B: it is about A's digest.
	f.copied = r.Push(t, "app", "copied")
	r.CopySignatures(t, f.signed, f.copied)

	f.attested = r.Push(t, "app", "attested")
	r.Sign(t, f.attested, f.key.Signer, imagetest.SignOptions{})
	r.Attest(t, f.attested, f.key.Signer, imagetest.Statement(f.attested, slsa, map[string]any{"builder": map[string]any{"id": "https://ci.example.com/builder"}}), nil)
	f.tampered = r.Push(t, "app", "tampered")
	r.Attest(t, f.tampered, f.key.Signer, imagetest.Statement(f.tampered, slsa, map[string]any{"builder": map[string]any{"id": "https://evil.example.com"}}),
		func(st map[string]any) {
			st["predicate"] = map[string]any{"builder": map[string]any{"id": "https://ci.example.com/builder"}}
		})
	f.otherSubject = r.Push(t, "app", "other-subject")
	r.Attest(t, f.otherSubject, f.key.Signer, imagetest.Statement(f.signed, slsa, map[string]any{"builder": map[string]any{"id": "https://ci.example.com/builder"}}), nil)
	return f
}

// policy is a ClusterPolicy in Enforce with one verifyImages rule on
// Pods; entry is the YAML of its verifyImages list.
func policy(t testing.TB, entry string) kyvernov1.PolicyInterface {
	t.Helper()
	return policyDoc(t, "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: check-images}\nspec:\n  validationFailureAction: Enforce\n  rules:\n  - name: verify\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    verifyImages:\n"+indent(entry, 4))
}

// policyDoc parses a ClusterPolicy.
func policyDoc(t testing.TB, doc string) kyvernov1.PolicyInterface {
	t.Helper()
	var p kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
		t.Fatalf("policy: %v\n%s", err, doc)
	}
	return &p
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = pad + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// keyEntry is an entry trusting the PEM keys, offline (no tlog).
func keyEntry(refs string, pem string, extra string) string {
	return fmt.Sprintf("- imageReferences: [%q]\n  attestors:\n  - entries:\n    - keys:\n        publicKeys: %s\n        rekor: {url: \"http://127.0.0.1:1\", ignoreTlog: true}\n        ctlog: {ignoreSCT: true}\n%s", refs, jsonString(pem), extra)
}

func keylessEntry(refs, roots, identity string) string {
	return fmt.Sprintf("- imageReferences: [%q]\n  attestors:\n  - entries:\n    - keyless:\n        roots: %s\n        rekor: {url: \"http://127.0.0.1:1\", ignoreTlog: true}\n        ctlog: {ignoreSCT: true}\n%s", refs, jsonString(roots), indent(identity, 8))
}

// bundledEntry is a keyless entry that requires the transparency log
// and trusts the log key rekorPEM: with an unreachable log URL, only a
// bundle that key signed can pass.
func bundledEntry(refs, roots, rekorPEM string) string {
	return fmt.Sprintf("- imageReferences: [%q]\n  attestors:\n  - entries:\n    - keyless:\n        roots: %s\n        subject: \"*@example.com\"\n        rekor: {url: \"http://127.0.0.1:1\", pubkey: %s}\n        ctlog: {ignoreSCT: true}\n", refs, jsonString(roots), jsonString(rekorPEM))
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func pod(images ...string) map[string]any {
	var containers []any
	for i, img := range images {
		containers = append(containers, map[string]any{"name": fmt.Sprintf("c%d", i), "image": img})
	}
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "default"},
		"spec": map[string]any{"containers": containers}}
}

// run compiles the policy and runs the mutating phase and then the
// validating phase on its result, as admission does.
func run(t *testing.T, v loader.ImageVerifier, p kyvernov1.PolicyInterface, obj map[string]any) (*engine.MutateResponse, *engine.Response) {
	t.Helper()
	set, err := engine.Compile([]kyvernov1.PolicyInterface{p})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	ctx := context.Background()
	opts := []engine.EvalOption{engine.WithLoaders(loader.Loaders{ImageVerifier: v})}
	m := set.Mutate(ctx, &engine.Request{Operation: kyvernov1.Create, Object: obj}, opts...)
	val := set.Validate(ctx, &engine.Request{Operation: kyvernov1.Create, Object: m.Object}, opts...)
	return m, val
}

func onlyRule(t *testing.T, policies []engine.PolicyResponse) engine.RuleResponse {
	t.Helper()
	var out []engine.RuleResponse
	for _, p := range policies {
		out = append(out, p.Rules...)
	}
	if len(out) != 1 {
		t.Fatalf("want one rule response, got %+v", out)
	}
	return out[0]
}

func newVerifier() *imageverify.Verifier {
	return imageverify.New(imageverify.Options{Egress: imagetest.LoopbackEgress(), Cache: imageverify.NewCache(100, time.Hour, nil), PublicTrust: offlineTrust()})
}

// offlineTrust is public trust material that cannot be had: its TUF
// mirror is a closed port on loopback, so nothing is fetched from the
// network.
func offlineTrust() imageverify.PublicTrust {
	return imageverify.NewTUFTrust(imageverify.TUFOptions{Mirror: "http://127.0.0.1:1", Egress: imagetest.LoopbackEgress()})
}

func TestMustPass(t *testing.T) {
	f := newFixture(t)
	v := newVerifier()
	host := f.reg.Host
	both := f.key.PublicPEM + f.key2.PublicPEM
	cases := []struct {
		name, entry, image string
		msg                string
	}{
		{"P1 key-signed", keyEntry(host+"/app:*", f.key.PublicPEM, ""), f.signed.Ref, "verified image signatures for " + f.signed.Ref},
		{"P2 already pinned", keyEntry(host+"/app*", f.key.PublicPEM, ""), f.signed.DigestRef, "verified image signatures for " + f.signed.DigestRef},
		{"P3 second of two keys, count 1", strings.Replace(keyEntry(host+"/app:*", both, ""), "  - entries:", "  - count: 1\n    entries:", 1), f.multi.Ref, "verified image signatures"},
		{"P4 keyless subject wildcard", keylessEntry(host+"/app:*", f.ca.RootPEM, "subject: \"*@example.com\"\nissuer: \"https://token.actions.*\""), f.keyless.Ref, "verified image signatures"},
		{"P5 keyless regexps and extensions", keylessEntry(host+"/app:*", f.ca.RootPEM, "subjectRegExp: \"^dev@.*$\"\nissuerRegExp: \"^https://token\"\nadditionalExtensions: {githubWorkflowRepository: \"org/*\"}"), f.keyless.Ref, "verified image signatures"},
		{"P6 attestation with condition", attestationEntry(host+"/app:*", f.key.PublicPEM, "{{ builder.id }}", "https://ci.example.com/*"), f.attested.Ref, "verified image attestations for " + f.attested.Ref},
		{"P7 nested attestor", fmt.Sprintf("- imageReferences: [%q]\n  attestors:\n  - entries:\n    - attestor:\n        entries:\n        - keys:\n            publicKeys: %s\n            rekor: {url: \"http://127.0.0.1:1\", ignoreTlog: true}\n", host+"/app:*", jsonString(f.key.PublicPEM)), f.signed.Ref, "verified image signatures"},
		{"P11 cosignOCI11 with a referrer signature", keyEntry(host+"/app:*", f.key.PublicPEM, "  cosignOCI11: true\n"), f.referrer.Ref, "verified image signatures for " + f.referrer.Ref},
		{"P12 Rekor bundle, expired leaf", bundledEntry(host+"/app:*", f.ca.RootPEM, f.rekor.PublicPEM), f.expired.Ref, "verified image signatures for " + f.expired.Ref},
		{"annotations present", keyEntry(host+"/app:*", f.key.PublicPEM, "")[:0] + annotatedEntry(host+"/app:*", f.key.PublicPEM, "prod"), f.annotated.Ref, "verified image signatures"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, val := run(t, v, policy(t, c.entry), pod(c.image))
			rr := onlyRule(t, m.Policies)
			if rr.Status != engine.StatusPass || !strings.Contains(rr.Message, c.msg) {
				t.Fatalf("mutating phase: %s %q, want pass %q", rr.Status, rr.Message, c.msg)
			}
			if m.Blocked() {
				t.Fatal("a pass must not block")
			}
			vr := onlyRule(t, val.Policies)
			if vr.Status != engine.StatusPass || vr.Message != "image verified" {
				t.Fatalf("validating phase: %s %q", vr.Status, vr.Message)
			}
			if val.Blocked() {
				t.Fatal("validating phase blocked")
			}
		})
	}
}

func attestationEntry(refs, pem, key, value string) string {
	return fmt.Sprintf(`- imageReferences: [%q]
  attestations:
  - type: %s
    name: provenance
    attestors:
    - entries:
      - keys:
          publicKeys: %s
          rekor: {url: "http://127.0.0.1:1", ignoreTlog: true}
    conditions:
    - all:
      - key: %q
        operator: Equals
        value: %q
        message: built elsewhere
`, refs, slsa, jsonString(pem), key, value)
}

func annotatedEntry(refs, pem, env string) string {
	return fmt.Sprintf("- imageReferences: [%q]\n  attestors:\n  - entries:\n    - keys:\n        publicKeys: %s\n        rekor: {url: \"http://127.0.0.1:1\", ignoreTlog: true}\n      annotations: {env: %q}\n", refs, jsonString(pem), env)
}

func TestMustRefuse(t *testing.T) {
	f := newFixture(t)
	v := newVerifier()
	host := f.reg.Host
	keyless := func(identity string) string { return keylessEntry(host+"/app:*", f.ca.RootPEM, identity) }
	twoSets := keyEntry(host+"/app:*", f.key.PublicPEM, "") + fmt.Sprintf("  - entries:\n    - keys:\n        publicKeys: %s\n        rekor: {url: \"http://127.0.0.1:1\", ignoreTlog: true}\n", jsonString(f.other.PublicPEM))
	twoSets = strings.Replace(twoSets, "  - entries:\n    - keys:\n        publicKeys: "+jsonString(f.other.PublicPEM), "  - entries:\n    - keys:\n        publicKeys: "+jsonString(f.other.PublicPEM), 1)
	cases := []struct {
		name, entry, image string
		want               []string
	}{
		{"N1 wrong key", keyEntry(host+"/app:*", f.key.PublicPEM, ""), f.wrongKey.Ref,
			[]string{"failed to verify image " + f.wrongKey.Ref + ": .attestors[0].entries[0].keys: no matching signatures:"}},
		{"N2 unsigned", keyEntry(host+"/app:*", f.key.PublicPEM, ""), f.unsigned.Ref, []string{"no signatures found"}},
		{"N3 wrong subject", keyless("subject: \"*@other.com\""), f.keyless.Ref,
			[]string{".attestors[0].entries[0].keyless: subject mismatch: expected *@other.com, received dev@example.com"}},
		{"N4 wrong issuer", keyless("issuer: \"https://accounts.other.com\""), f.keyless.Ref,
			[]string{"issuer mismatch: expected https://accounts.other.com, received https://token.actions.example.com"}},
		{"N5 leaf not under roots", keylessEntry(host+"/app:*", f.otherCA.RootPEM, "subject: \"*\""), f.keyless.Ref, []string{"no matching signatures:"}},
		{"N5 no code signing EKU", keyless("subject: \"*\""), f.keylessNoEKU.Ref, []string{"no matching signatures:"}},
		{"N6 signature of another digest", keyEntry(host+"/app:*", f.key.PublicPEM, ""), f.copied.Ref, []string{"invalid or missing digest in claim: " + f.signed.Digest}},
		{"N8 attestation edited after signing", attestationEntry(host+"/app:*", f.key.PublicPEM, "{{ builder.id }}", "https://ci.example.com/*"), f.tampered.Ref,
			[]string{"image attestations verification failed, verifiedCount: 0, requiredCount: 1, error: .attestations[0].attestors[0].entries[0].keys: no matching attestations"}},
		{"N9 attestation about another digest", attestationEntry(host+"/app:*", f.key.PublicPEM, "{{ builder.id }}", "https://ci.example.com/*"), f.otherSubject.Ref, []string{"no matching attestations"}},
		{"N10 no statement of the type", strings.Replace(attestationEntry(host+"/app:*", f.key.PublicPEM, "{{ builder.id }}", "*"), slsa, "https://example.com/other/v1", 1), f.attested.Ref,
			[]string{"attestions not found for predicate type https://example.com/other/v1"}},
		{"N11 condition false", attestationEntry(host+"/app:*", f.key.PublicPEM, "{{ builder.id }}", "https://other.example.com/*"), f.attested.Ref,
			[]string{"attestation checks failed for " + f.attested.Ref + " and predicate " + slsa + ": built elsewhere"}},
		{"N12 count 2 with one valid entry", strings.Replace(keyEntry(host+"/app:*", f.key.PublicPEM, ""), "  - entries:", "  - count: 2\n    entries:", 1) +
			fmt.Sprintf("    - keys:\n        publicKeys: %s\n        rekor: {url: \"http://127.0.0.1:1\", ignoreTlog: true}\n", jsonString(f.other.PublicPEM)), f.signed.Ref,
			[]string{".attestors[0].entries[1].keys: no matching signatures"}},
		{"N13 second set fails", twoSets, f.signed.Ref, []string{".attestors[1].entries[0].keys: no matching signatures"}},
		{"N2 referrer signature without cosignOCI11", keyEntry(host+"/app:*", f.key.PublicPEM, ""), f.referrer.Ref, []string{"no signatures found"}},
		{"P12 bundle of another Rekor", bundledEntry(host+"/app:*", f.ca.RootPEM, f.otherRekor.PublicPEM), f.expired.Ref, []string{"rekor log public key not found for payload"}},
		{"P12 expired leaf without a bundle", keylessEntry(host+"/app:*", f.ca.RootPEM, "subject: \"*\""), f.expiredUnlogged.Ref, []string{"expected a signed timestamp to verify an expired certificate"}},
		{"N18 required annotation missing", annotatedEntry(host+"/app:*", f.key.PublicPEM, "staging"), f.annotated.Ref, []string{"no signature matched the required annotations"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, val := run(t, v, policy(t, c.entry), pod(c.image))
			rr := onlyRule(t, m.Policies)
			for _, w := range c.want {
				if rr.Status != engine.StatusFail || !strings.Contains(rr.Message, w) {
					t.Fatalf("mutating phase: %s %q, want fail containing %q", rr.Status, rr.Message, w)
				}
			}
			if !m.Blocked() {
				t.Fatal("an Enforce failure must block the mutating phase")
			}
			if rr.Action != engine.Enforce {
				t.Fatalf("action %q", rr.Action)
			}
			if strings.Contains(fmt.Sprint(m.Object["spec"]), "@sha256") {
				t.Fatal("a refused image must not be pinned")
			}
			if vr := onlyRule(t, val.Policies); vr.Status != engine.StatusFail {
				t.Fatalf("validating phase: %s %q, want fail", vr.Status, vr.Message)
			}
		})
	}
}

func TestDigestPatchAndAnnotations(t *testing.T) {
	f := newFixture(t)
	m, _ := run(t, newVerifier(), policy(t, keyEntry(f.reg.Host+"/app:*", f.key.PublicPEM, "")), pod(f.signed.Ref))
	patch, err := m.JSONPatch()
	if err != nil {
		t.Fatal(err)
	}
	pinned := f.signed.Ref + "@" + f.signed.Digest
	for _, want := range []string{
		`{"op":"replace","path":"/spec/containers/0/image","value":"` + pinned + `"}`,
		`"path":"/metadata/annotations"`,
	} {
		if !strings.Contains(string(patch), want) {
			t.Fatalf("patch %s lacks %s", patch, want)
		}
	}
	ann := m.Object["metadata"].(map[string]any)["annotations"].(map[string]any)
	if got, want := ann["kyverno.io/verify-images"], `{"`+f.signed.DigestRef+`":"pass"}`; got != want {
		t.Fatalf("verify-images annotation %v, want %s", got, want)
	}
	if got, want := ann["kyverno.io/verify-images-scoped"], `{"policies":{"/check-images":{"verify":{"`+f.signed.DigestRef+`":"pass"}}},"version":1}`; got != want {
		t.Fatalf("scoped annotation %v, want %s", got, want)
	}
}

// TestAutogen pins the image of a Deployment's template through the
// autogen rule of a Pod policy.
func TestAutogen(t *testing.T) {
	f := newFixture(t)
	deploy := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "d", "namespace": "default"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"initContainers": []any{map[string]any{"name": "init", "image": f.signed.Ref}},
			"containers":     []any{map[string]any{"name": "app", "image": f.unsigned.Ref}}}}}}
	m, _ := run(t, newVerifier(), policy(t, keyEntry(f.reg.Host+"/app:*", f.key.PublicPEM, "")), deploy)
	rr := onlyRule(t, m.Policies)
	if rr.Name != "autogen-verify" || rr.Status != engine.StatusFail || !strings.Contains(rr.Message, f.unsigned.Ref+": .attestors[0].entries[0].keys: no signatures found") {
		t.Fatalf("got %s %s %q", rr.Name, rr.Status, rr.Message)
	}
}

// TestTagMovedAfterVerification (N7): the cache is keyed by digest, so a
// tag moved to an unsigned image after a pass is verified afresh.
func TestTagMovedAfterVerification(t *testing.T) {
	f := newFixture(t)
	v := newVerifier()
	f.reg.Tag(t, f.signed, "moving")
	p := policy(t, keyEntry(f.reg.Host+"/app:*", f.key.PublicPEM, ""))
	image := f.reg.Host + "/app:moving"
	if m, _ := run(t, v, p, pod(image)); onlyRule(t, m.Policies).Status != engine.StatusPass {
		t.Fatalf("before the move: %+v", m.Policies)
	}
	f.reg.Tag(t, f.unsigned, "moving")
	m, _ := run(t, v, p, pod(image))
	if rr := onlyRule(t, m.Policies); rr.Status != engine.StatusFail || !strings.Contains(rr.Message, "no signatures found") {
		t.Fatalf("after the move: %s %q", rr.Status, rr.Message)
	}
	if strings.Contains(fmt.Sprint(m.Object), f.signed.Digest) {
		t.Fatal("the digest verified before the move was pinned")
	}
}

// countingTransport counts registry requests by path.
type countingTransport struct {
	mu    sync.Mutex
	paths []string
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.paths = append(c.paths, r.Method+" "+r.URL.Path)
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) reset() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.paths
	c.paths = nil
	return out
}

// TestCacheHit (P9): the second review of a pinned image fetches no
// signature; only a tag costs one manifest HEAD to find its digest.
func TestCacheHit(t *testing.T) {
	f := newFixture(t)
	ct := &countingTransport{}
	v := imageverify.New(imageverify.Options{Transport: ct, Cache: imageverify.NewCache(10, time.Hour, nil)})
	p := policy(t, keyEntry(f.reg.Host+"/app*", f.key.PublicPEM, ""))
	run(t, v, p, pod(f.signed.DigestRef))
	if first := ct.reset(); !containsPath(first, ".sig") {
		t.Fatalf("the first review fetched no signature: %v", first)
	}
	m, val := run(t, v, p, pod(f.signed.DigestRef))
	if got := ct.reset(); len(got) != 0 {
		t.Fatalf("cached reviews of a pinned image made registry requests: %v", got)
	}
	if onlyRule(t, m.Policies).Status != engine.StatusPass || onlyRule(t, val.Policies).Status != engine.StatusPass {
		t.Fatal("cached result is not a pass")
	}
	// A background rescan started after the cached verification asks the
	// registry again, once: the resources it scans next share the result.
	set, _ := engine.Compile([]kyvernov1.PolicyInterface{p})
	rescan := []engine.EvalOption{engine.WithLoaders(loader.Loaders{ImageVerifier: v}), engine.WithImagesVerifiedSince(time.Now())}
	set.Validate(context.Background(), &engine.Request{Object: pod(f.signed.DigestRef)}, rescan...)
	if got := ct.reset(); !containsPath(got, ".sig") {
		t.Fatalf("a rescan used a verification older than its start: %v", got)
	}
	set.Validate(context.Background(), &engine.Request{Object: pod(f.signed.DigestRef)}, rescan...)
	if got := ct.reset(); len(got) != 0 {
		t.Fatalf("the rescan verified the same image twice: %v", got)
	}
}

func containsPath(paths []string, s string) bool {
	for _, p := range paths {
		if strings.Contains(p, s) {
			return true
		}
	}
	return false
}

// TestValidatingPhase covers verifyDigest (N14), required with a forged
// annotation (N15) and skipImageReferences (P8).
func TestValidatingPhase(t *testing.T) {
	f := newFixture(t)
	v := newVerifier()
	host := f.reg.Host
	noPin := keyEntry(host+"/app:*", f.key.PublicPEM, "  mutateDigest: false\n")
	t.Run("N14 missing digest", func(t *testing.T) {
		m, val := run(t, v, policy(t, noPin), pod(f.signed.Ref))
		if onlyRule(t, m.Policies).Status != engine.StatusPass {
			t.Fatal("mutating phase must pass")
		}
		if vr := onlyRule(t, val.Policies); vr.Status != engine.StatusFail || vr.Message != "missing digest for "+f.signed.Ref {
			t.Fatalf("validating phase: %s %q", vr.Status, vr.Message)
		}
	})
	t.Run("N15 forged annotation", func(t *testing.T) {
		forged := pod(f.unsigned.DigestRef)
		forged["metadata"].(map[string]any)["annotations"] = map[string]any{
			"kyverno.io/verify-images":        `{"` + f.unsigned.DigestRef + `":"pass"}`,
			"kyverno.io/verify-images-scoped": `{"version":1,"policies":{"/check-images":{"verify":{"` + f.unsigned.DigestRef + `":"pass"}}}}`,
		}
		set, err := engine.Compile([]kyvernov1.PolicyInterface{policy(t, keyEntry(host+"/app*", f.key.PublicPEM, ""))})
		if err != nil {
			t.Fatal(err)
		}
		// The mutating webhook was skipped (failurePolicy Ignore and a
		// timeout): only the validating phase sees the forged object.
		val := set.Validate(context.Background(), &engine.Request{Object: forged}, engine.WithLoaders(loader.Loaders{ImageVerifier: v}))
		if vr := onlyRule(t, val.Policies); vr.Status != engine.StatusFail || !strings.Contains(vr.Message, "no signatures found") || !val.Blocked() {
			t.Fatalf("validating phase trusted the annotation: %s %q", vr.Status, vr.Message)
		}
	})
	t.Run("P8 skipImageReferences", func(t *testing.T) {
		entry := keyEntry(host+"/app:*", f.key.PublicPEM, fmt.Sprintf("  skipImageReferences: [%q]\n", host+"/app:unsigned"))
		m, val := run(t, v, policy(t, entry), pod(f.unsigned.Ref))
		rr := onlyRule(t, m.Policies)
		want := "skipping image reference image " + f.unsigned.Ref + ", policy check-images ruleName verify"
		if rr.Status != engine.StatusSkip || rr.Message != want || len(rr.Warnings) != 1 || rr.Warnings[0] != want {
			t.Fatalf("mutating phase: %s %q %v", rr.Status, rr.Message, rr.Warnings)
		}
		if vr := onlyRule(t, val.Policies); vr.Status != engine.StatusSkip || vr.Message != "image skipped, skipped images: "+f.unsigned.Ref {
			t.Fatalf("validating phase: %s %q", vr.Status, vr.Message)
		}
	})
}

// TestRegistryUnreachable (N16): a registry that cannot be reached is an
// error, which Fail denies and Ignore admits, except that required still
// refuses the image in the validating phase.
func TestRegistryUnreachable(t *testing.T) {
	f := newFixture(t)
	v := newVerifier()
	image := f.signed.DigestRef
	f.reg.Server.Close()
	entry := keyEntry(f.reg.Host+"/app*", f.key.PublicPEM, "")
	m, val := run(t, v, policy(t, entry), pod(image))
	rr := onlyRule(t, m.Policies)
	if rr.Status != engine.StatusError || !strings.HasPrefix(rr.Message, "failed to verify image "+image+": ") {
		t.Fatalf("mutating phase: %s %q", rr.Status, rr.Message)
	}
	if vr := onlyRule(t, val.Policies); vr.Status != engine.StatusFail || !strings.HasPrefix(vr.Message, "unverified image "+image) {
		t.Fatalf("validating phase with required: %s %q", vr.Status, vr.Message)
	}
	_, val = run(t, v, policy(t, keyEntry(f.reg.Host+"/app*", f.key.PublicPEM, "  required: false\n")), pod(image))
	if vr := onlyRule(t, val.Policies); vr.Status != engine.StatusError {
		t.Fatalf("validating phase without required: %s %q", vr.Status, vr.Message)
	}
}

// TestEgressGuardsRegistriesAndRekor: a Pod's image names the registry
// and a policy its Rekor URL, so by default (no Options.Egress) the
// verifier refuses loopback, link-local and the cloud metadata address on
// the address dialled, and verifies only once the registry's address is
// let through explicitly.
func TestEgressGuardsRegistriesAndRekor(t *testing.T) {
	f := newFixture(t)
	entry := keyEntry(f.reg.Host+"/app*", f.key.PublicPEM, "")
	m, _ := run(t, imageverify.New(imageverify.Options{}), policy(t, entry), pod(f.signed.DigestRef))
	if rr := onlyRule(t, m.Policies); rr.Status != engine.StatusError || !strings.Contains(rr.Message, "address 127.0.0.1 is blocked (127.0.0.0/8: loopback)") {
		t.Fatalf("loopback registry under the default guard: %s %q, want an error naming the blocked address", rr.Status, rr.Message)
	}
	m, _ = run(t, imageverify.New(imageverify.Options{Egress: f.reg.Egress()}), policy(t, entry), pod(f.signed.DigestRef))
	if rr := onlyRule(t, m.Policies); rr.Status != engine.StatusPass {
		t.Fatalf("the registry let through: %s %q, want pass", rr.Status, rr.Message)
	}
	// The transparency log a policy names is held by the same guard.
	rekor := strings.Replace(keyEntry(f.reg.Host+"/app*", f.key.PublicPEM, ""), `rekor: {url: "http://127.0.0.1:1", ignoreTlog: true}`,
		`rekor: {url: "http://169.254.169.254", pubkey: `+jsonString(f.rekor.PublicPEM)+`}`, 1)
	m, _ = run(t, imageverify.New(imageverify.Options{Egress: f.reg.Egress()}), policy(t, rekor), pod(f.signed.DigestRef))
	if rr := onlyRule(t, m.Policies); rr.Status == engine.StatusPass || !strings.Contains(rr.Message, "address 169.254.169.254 is blocked") {
		t.Fatalf("Rekor at the metadata address: %s %q, want refused naming the address", rr.Status, rr.Message)
	}
}

// TestPublicFulcioRoots: a keyless attestor without roots trusts the
// public-good Fulcio CA, as in Kyverno. The test stands in a local CA
// for it; when the roots cannot be had the rule ends in error (denied
// under failurePolicy Fail), never in a pass.
func TestPublicFulcioRoots(t *testing.T) {
	f := newFixture(t)
	entry := fmt.Sprintf("- imageReferences: [%q]\n  attestors:\n  - entries:\n    - keyless:\n        subject: \"*@example.com\"\n        issuer: \"https://token.actions.*\"\n        rekor: {url: \"http://127.0.0.1:1\", ignoreTlog: true}\n        ctlog: {ignoreSCT: true}\n", f.reg.Host+"/app:*")
	roots := func(ca *imagetest.CA, err error) func(context.Context) ([]*x509.Certificate, error) {
		return func(context.Context) ([]*x509.Certificate, error) {
			if err != nil {
				return nil, err
			}
			return cryptoutils.UnmarshalCertificatesFromPEM([]byte(ca.RootPEM))
		}
	}
	for _, c := range []struct {
		name   string
		roots  func(context.Context) ([]*x509.Certificate, error)
		status engine.RuleStatus
		msg    string
	}{
		{"signer under the public roots", roots(f.ca, nil), engine.StatusPass, "verified image signatures for " + f.keyless.Ref},
		{"signer under another CA", roots(f.otherCA, nil), engine.StatusFail, "no matching signatures"},
		{"roots unavailable", roots(nil, errors.New("TUF mirror unreachable")), engine.StatusError, "failed to get the Fulcio roots: TUF mirror unreachable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := imageverify.New(imageverify.Options{Egress: imagetest.LoopbackEgress(), FulcioRoots: c.roots})
			m, _ := run(t, v, policy(t, entry), pod(f.keyless.Ref))
			if rr := onlyRule(t, m.Policies); rr.Status != c.status || !strings.Contains(rr.Message, c.msg) {
				t.Fatalf("%s %q, want %s containing %q", rr.Status, rr.Message, c.status, c.msg)
			}
			if c.status != engine.StatusPass && !m.Blocked() {
				t.Fatal("not blocked")
			}
		})
	}
}

// TestTransparencyLogOnByDefault: an attestor that says nothing about
// Rekor requires the signature in the public-good log, whose key comes
// from TUF; one that names a log URL and key but carries no bundle asks
// that log. Offline neither can be checked: the rule errs and blocks,
// it never passes unlogged.
func TestTransparencyLogOnByDefault(t *testing.T) {
	f := newFixture(t)
	unlogged := fmt.Sprintf("- imageReferences: [%q]\n  attestors:\n  - entries:\n    - keys:\n        publicKeys: %s\n", f.reg.Host+"/app:*", jsonString(f.key.PublicPEM))
	customLog := func(url string) string {
		return unlogged + "        rekor: {url: " + jsonString(url) + ", pubkey: " + jsonString(f.rekor.PublicPEM) + "}\n"
	}
	// A log that is down, and one that answers but holds no entry for
	// the signature: the first is no verdict (error), the second is one.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	t.Cleanup(down.Close)
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("[]"))
	}))
	t.Cleanup(empty.Close)
	for _, c := range []struct {
		name, entry string
		status      engine.RuleStatus
		msg         string
	}{
		{"default log", unlogged, engine.StatusError, "failed to get Rekor public keys"},
		{"custom log unreachable", customLog("http://127.0.0.1:1"), engine.StatusError, "127.0.0.1:1"},
		{"custom log answers 503", customLog(down.URL), engine.StatusError, "no matching signatures"},
		{"custom log without the entry", customLog(empty.URL), engine.StatusFail, "no matching signatures"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, _ := run(t, newVerifier(), policy(t, c.entry), pod(f.signed.Ref))
			if rr := onlyRule(t, m.Policies); rr.Status != c.status || !strings.Contains(rr.Message, c.msg) || !m.Blocked() {
				t.Fatalf("%s %q, want a blocking %s containing %q", rr.Status, rr.Message, c.status, c.msg)
			}
		})
	}
}
