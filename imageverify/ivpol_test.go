package imageverify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
)

// imageValidatingPolicy is an ImageValidatingPolicy on Pods with one
// attestor named a (attestor is its YAML under cosign), the slsa
// attestation, and one validation.
func imageValidatingPolicy(t *testing.T, refs, attestor, validation string) kyvernov1.PolicyInterface {
	t.Helper()
	return ivpolOf(t, refs, "- name: a\n  cosign:\n"+indent(attestor, 4), fmt.Sprintf("- name: slsa\n  intoto: {type: %q}\n", slsa), validation)
}

// ivpolOf is an ImageValidatingPolicy on Pods of the images refs
// matches, with the attestors and attestations given (each the YAML of
// its list) and one validation, failing with "not verified".
func ivpolOf(t *testing.T, refs, attestors, attestations, validation string) kyvernov1.PolicyInterface {
	t.Helper()
	doc := fmt.Sprintf(`apiVersion: policies.kyverno.io/v1
kind: ImageValidatingPolicy
metadata: {name: check-images}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}
  matchImageReferences: [{glob: %q}]
  attestors:
%s
  attestations:
%s
  validations:
  - expression: %q
    message: not verified
`, refs, indent(attestors, 2), indent(attestations, 2), validation)
	var p policiesv1.ImageValidatingPolicy
	if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
		t.Fatalf("policy: %v\n%s", err, doc)
	}
	return &p
}

// TestImageValidatingPolicy verifies real cosign signatures and
// attestations from a loopback registry through an ImageValidatingPolicy:
// the same verifier as verifyImages, with Kyverno's ImageValidatingPolicy
// semantics (exact keyless identities, statements as payloads).
func TestImageValidatingPolicy(t *testing.T) {
	f := newFixture(t)
	v := newVerifier()
	host := f.reg.Host
	offline := "ctlog: {insecureIgnoreTlog: true, insecureIgnoreSCT: true}"
	key := "key: {data: " + jsonString(f.key.PublicPEM) + "}\n" + offline
	keyless := func(identity string) string {
		return "keyless:\n  roots: " + jsonString(f.ca.RootPEM) + "\n  identities:\n  - " + identity + "\n" + offline
	}
	const signatures = "images.containers.all(i, verifyImageSignatures(i, [attestors.a]) > 0)"
	const provenance = "images.containers.all(i, verifyAttestationSignatures(i, attestations.slsa, [attestors.a]) > 0 && extractPayload(i, attestations.slsa).predicate.builder.id == 'https://ci.example.com/builder')"
	cases := []struct {
		name, attestor, validation, image string
		status                            engine.RuleStatus
		message                           string
	}{
		{"key-signed", key, signatures, f.signed.DigestRef, engine.StatusPass, "success"},
		{"unsigned", key, signatures, f.unsigned.DigestRef, engine.StatusFail, "not verified"},
		{"another key", key, signatures, f.wrongKey.DigestRef, engine.StatusFail, "not verified"},
		{"a signature copied from another image", key, signatures, f.copied.DigestRef, engine.StatusFail, "not verified"},
		{"tag only, verifyDigest", key, signatures, f.signed.Ref, engine.StatusFail, "image " + f.signed.Ref + " does not have a digest"},
		{"keyless, exact identity", keyless("{subject: dev@example.com, issuer: https://token.actions.example.com}"), signatures, f.keyless.DigestRef, engine.StatusPass, "success"},
		{"keyless, a subject is no wildcard", keyless(`{subject: "*@example.com", issuer: https://token.actions.example.com}`), signatures, f.keyless.DigestRef, engine.StatusFail, "not verified"},
		{"keyless, regular expressions", keyless(`{subjectRegExp: "@example\\.com$", issuerRegExp: "^https://token\\."}`), signatures, f.keyless.DigestRef, engine.StatusPass, "success"},
		{"keyless, another issuer", keyless("{subject: dev@example.com, issuer: https://accounts.example.com}"), signatures, f.keyless.DigestRef, engine.StatusFail, "not verified"},
		{"keyless, second identity matches", keyless("{subject: ops@example.com, issuer: https://token.actions.example.com}\n  - {subject: dev@example.com, issuer: https://token.actions.example.com}"), signatures, f.keyless.DigestRef, engine.StatusPass, "success"},
		{"keyless, leaf without CodeSigning", keyless("{subject: dev@example.com, issuer: https://token.actions.example.com}"), signatures, f.keylessNoEKU.DigestRef, engine.StatusFail, "not verified"},
		{"attestation and its payload", key, provenance, f.attested.DigestRef, engine.StatusPass, "success"},
		{"attestation edited after signing", key, provenance, f.tampered.DigestRef, engine.StatusFail, "not verified"},
		{"attestation about another image", key, provenance, f.otherSubject.DigestRef, engine.StatusFail, "not verified"},
		{"outside matchImageReferences: nothing to verify", key, signatures, "nginx:1.27", engine.StatusPass, "success"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := imageValidatingPolicy(t, host+"/*", c.attestor, c.validation)
			set, err := engine.Compile([]kyvernov1.PolicyInterface{p})
			if err != nil {
				t.Fatal(err)
			}
			resp := set.Validate(context.Background(), &engine.Request{Operation: kyvernov1.Create, Object: pod(c.image)},
				engine.WithLoaders(loader.Loaders{ImageVerifier: v}))
			rr := onlyRule(t, resp.Policies)
			if rr.Name != "check-images" || rr.Status != c.status || rr.Message != c.message {
				t.Fatalf("got %s %s %q, want %s %q", rr.Name, rr.Status, rr.Message, c.status, c.message)
			}
			if blocked := resp.Blocked(); blocked != (c.status != engine.StatusPass) {
				t.Fatalf("blocked %v for %s (Deny)", blocked, c.status)
			}
		})
	}
}

// TestImageValidatingPolicyRegistryUnreachable: a registry that cannot be
// reached never passes: with required (the default) the image fails, so
// failurePolicy Ignore cannot admit it; without, the policy ends in error
// (which the webhook denies under failurePolicy Fail).
func TestImageValidatingPolicyRegistryUnreachable(t *testing.T) {
	f := newFixture(t)
	key := "key: {data: " + jsonString(f.key.PublicPEM) + "}\nctlog: {insecureIgnoreTlog: true, insecureIgnoreSCT: true}"
	for _, c := range []struct {
		required bool
		status   engine.RuleStatus
		prefix   string
	}{
		{true, engine.StatusFail, "unverified image: failed to verify image 127.0.0.1:1/app@"},
		{false, engine.StatusError, "failed to evaluate policy: failed to verify image 127.0.0.1:1/app@"},
	} {
		p := imageValidatingPolicy(t, "127.0.0.1:1/*", key, "images.containers.all(i, verifyImageSignatures(i, [attestors.a]) > 0)").(*policiesv1.ImageValidatingPolicy)
		required := c.required
		p.Spec.ValidationConfigurations = &policiesv1.ValidationConfiguration{Required: &required}
		set, err := engine.Compile([]kyvernov1.PolicyInterface{p})
		if err != nil {
			t.Fatal(err)
		}
		resp := set.Validate(context.Background(), &engine.Request{Operation: kyvernov1.Create, Object: pod("127.0.0.1:1/app@" + f.signed.Digest)},
			engine.WithLoaders(loader.Loaders{ImageVerifier: newVerifier()}))
		rr := onlyRule(t, resp.Policies)
		if rr.Status != c.status || rr.Action != engine.Enforce || !strings.HasPrefix(rr.Message, c.prefix) {
			t.Errorf("required %v: got %s %s %q, want %s %q...", c.required, rr.Action, rr.Status, rr.Message, c.status, c.prefix)
		}
	}
}
