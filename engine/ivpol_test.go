package engine

import (
	"context"
	"errors"
	"path"
	"reflect"
	"strings"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// TestImageValidatingPolicyFaults checks that an ImageValidatingPolicy
// charter cannot verify is refused with the field at fault.
func TestImageValidatingPolicyFaults(t *testing.T) {
	policies, _ := readCELPolicies(t, "ivpol/faults.yaml")
	for _, p := range policies {
		want := p.GetAnnotations()["fault"]
		_, err := Compile([]kyvernov1.PolicyInterface{p})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", p.GetName(), err, want)
		}
	}
}

// fakeImages answers as a registry where "KEY-A" signed the images whose
// last path element is "signed" or "attested", and attested the latter
// with a SLSA statement whose builder is "ci" ("evil" under an "evil"
// path); images under a "down" path cannot be reached.
type fakeImages struct{ asked []string }

func (f *fakeImages) answer(c loader.ImageCheck) (loader.ImageVerified, error) {
	f.asked = append(f.asked, c.Image)
	if strings.Contains(c.Image, "/down/") {
		return loader.ImageVerified{}, &loader.ImageUnavailableError{Err: errors.New("connection refused")}
	}
	ref, _, _ := strings.Cut(c.Image, "@")
	repo, _, _ := strings.Cut(ref, ":")
	base := path.Base(repo)
	if c.Attestor.Keys == nil || c.Attestor.Keys.PublicKeys != "KEY-A" || base != "signed" && base != "attested" {
		return loader.ImageVerified{}, errors.New("no matching signatures")
	}
	if c.PredicateType == "" {
		return loader.ImageVerified{Digest: "sha256:1"}, nil
	}
	if base != "attested" {
		return loader.ImageVerified{}, errors.New("no matching attestations")
	}
	builder := "ci"
	if strings.Contains(repo, "/evil/") {
		builder = "evil"
	}
	return loader.ImageVerified{Digest: "sha256:1", Statements: []map[string]any{{
		"predicateType": "https://slsa.dev/provenance/v0.2", "predicate": map[string]any{"builder": map[string]any{"id": builder}}}}}, nil
}

func (f *fakeImages) VerifySignatures(_ context.Context, c loader.ImageCheck) (loader.ImageVerified, error) {
	return f.answer(c)
}
func (f *fakeImages) VerifyAttestations(_ context.Context, c loader.ImageCheck) (loader.ImageVerified, error) {
	return f.answer(c)
}
func (f *fakeImages) ResolveDigest(_ context.Context, image string, _ loader.ImageCredentials) (string, error) {
	if strings.Contains(image, "/down/") {
		return "", &loader.ImageUnavailableError{Err: errors.New("connection refused")}
	}
	return "sha256:1", nil
}

// TestImageValidatingPolicies covers the ImageValidatingPolicy pipeline
// (cel-policy-types.md §3.3.5): matchConditions before exceptions,
// matchImageReferences by glob and expression, custom extractors,
// verifyDigest, signatures and attestations with extractPayload,
// required across the policies of a request, an unreachable registry as
// a fail under required, autogen for Pod controllers and the namespaced variant's
// scope.
func TestImageValidatingPolicies(t *testing.T) {
	policies, exceptions := readCELPolicies(t, "ivpol/policies.yaml")
	set, err := Compile(policies, WithCELExceptions(exceptions))
	if err != nil {
		t.Fatal(err)
	}
	podWith := func(ns string, labels, annotations map[string]any, images ...string) map[string]any {
		p := pod(ns, "web", labels, images...)
		if annotations != nil {
			p["metadata"].(map[string]any)["annotations"] = annotations
		}
		return p
	}
	type result struct{ rule, status, message string }
	const (
		signed   = "registry.example.com/app/signed:v1"
		unsigned = "registry.example.com/app/unsigned:v1"
		attested = "registry.example.com/attested@sha256:1"
	)
	tests := []struct {
		name   string
		object map[string]any
		want   map[string]result // by policy key; a policy not listed must not respond
	}{{
		name:   "a signed image passes, and satisfies required for the policy that does not verify",
		object: podWith("default", nil, nil, signed),
		want: map[string]result{
			"check-attested": {"check-attested", "pass", "success"},
			"check-signed":   {"check-signed", "pass", "success"},
			"requires-only":  {"requires-only", "pass", "success"},
		},
	}, {
		name:   "an unsigned image fails, and required fails the other policy",
		object: podWith("default", nil, nil, signed, unsigned),
		want: map[string]result{
			"check-attested": {"check-attested", "pass", "success"},
			"check-signed":   {"check-signed", "fail", "image not signed"},
			"requires-only":  {"requires-only", "fail", "image " + unsigned + " failed signature or attestation verification"},
		},
	}, {
		name:   "an image no policy checks fails required",
		object: podWith("default", map[string]any{"skip": "yes"}, nil, signed),
		want: map[string]result{
			"check-attested": {"check-attested", "pass", "success"},
			"requires-only":  {"requires-only", "fail", "image " + signed + " is not verified: no policy performed a signature or attestation check on it"},
		},
	}, {
		name:   "images outside matchImageReferences are not verified",
		object: podWith("default", nil, nil, "nginx:1.27"),
		want: map[string]result{
			"check-attested": {"check-attested", "pass", "success"},
			"check-signed":   {"check-signed", "pass", "success"},
			"requires-only":  {"requires-only", "pass", "success"},
		},
	}, {
		name:   "an unreachable registry never passes: required makes it a fail",
		object: podWith("default", nil, nil, signed, "registry.example.com/down/signed:v1"),
		want: map[string]result{
			"check-attested": {"check-attested", "pass", "success"},
			"check-signed":   {"check-signed", "fail", "unverified image: failed to verify image registry.example.com/down/signed:v1: connection refused"},
			"requires-only":  {"requires-only", "fail", "image registry.example.com/down/signed:v1 failed signature or attestation verification"},
		},
	}, {
		name:   "an exception exempts the request after matchConditions",
		object: podWith("default", map[string]any{"break-glass": "yes"}, nil, unsigned),
		want: map[string]result{
			"check-attested": {"check-attested", "pass", "success"},
			"check-signed":   {"exception", "skip", "rule is skipped due to policy exception: default/break-glass"},
			"requires-only":  {"requires-only", "fail", "image " + unsigned + " is not verified: no policy performed a signature or attestation check on it"},
		},
	}, {
		name:   "an attestation whose builder is trusted passes, through the expression and the custom extractor",
		object: podWith("default", nil, map[string]any{"extra": "registry.example.com/attested@sha256:1"}, attested),
		want: map[string]result{
			"check-signed":   {"check-signed", "pass", "success"},
			"check-attested": {"check-attested", "pass", "success"},
			"requires-only":  {"requires-only", "pass", "success"},
		},
	}, {
		name:   "an attestation from another builder fails with the message expression",
		object: podWith("default", nil, nil, "registry.example.com/evil/attested@sha256:1"),
		want: map[string]result{
			"check-signed":   {"check-signed", "pass", "success"},
			"check-attested": {"check-attested", "fail", "untrusted builder for registry.example.com/evil/attested@sha256:1"},
			"requires-only":  {"requires-only", "pass", "success"},
		},
	}, {
		name:   "verifyDigest fails an image named by tag only",
		object: podWith("default", nil, nil, "registry.example.com/attested:ci"),
		want: map[string]result{
			"check-signed":   {"check-signed", "pass", "success"},
			"check-attested": {"check-attested", "fail", "image registry.example.com/attested:ci does not have a digest"},
			"requires-only":  {"requires-only", "pass", "success"},
		},
	}, {
		name:   "the namespaced policy acts in its namespace",
		object: podWith("team-a", nil, nil, "team-a.example.com/app/unsigned:v1"),
		want: map[string]result{
			"check-attested":       {"check-attested", "pass", "success"},
			"check-signed":         {"check-signed", "pass", "success"},
			"requires-only":        {"requires-only", "pass", "success"},
			"team-a/team-a-images": {"team-a-images", "fail", "CEL expression validation failed at index 0"},
		},
	}, {
		name:   "the namespaced policy leaves other namespaces alone",
		object: podWith("team-b", nil, nil, "team-a.example.com/app/unsigned:v1"),
		want: map[string]result{
			"check-attested": {"check-attested", "pass", "success"},
			"check-signed":   {"check-signed", "pass", "success"},
			"requires-only":  {"requires-only", "pass", "success"},
		},
	}, {
		name: "autogen: a Deployment's unsigned image fails",
		object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "d", "namespace": "default"},
			"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{}, "spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": unsigned}}}}}},
		want: map[string]result{
			"check-signed": {"check-signed", "fail", "image not signed"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			images := &fakeImages{}
			resp := set.Validate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: tt.object}, WithLoaders(loader.Loaders{ImageVerifier: images}))
			got := map[string]result{}
			for _, p := range resp.Policies {
				if len(p.Rules) != 1 {
					t.Fatalf("%s: %d results, want 1", p.Key, len(p.Rules))
				}
				r := p.Rules[0]
				got[p.Key] = result{r.Name, string(r.Status), r.Message}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestImageDigestPins: with WithImageDigestPins (the mutating webhook),
// Mutate pins the images of policies with mutateDigest that match their
// matchImageReferences and name no digest; a tag that cannot be resolved
// is an error of the Deny policy. Without it (the CLI) nothing changes.
func TestImageDigestPins(t *testing.T) {
	policies, exceptions := readCELPolicies(t, "ivpol/policies.yaml")
	set, err := Compile(policies, WithCELExceptions(exceptions))
	if err != nil {
		t.Fatal(err)
	}
	obj := pod("default", "web", nil, "registry.example.com/app/signed:v1", "nginx:1.27", "registry.example.com/attested@sha256:2", "registry.example.com/down/signed:v1")
	loaders := WithLoaders(loader.Loaders{ImageVerifier: &fakeImages{}})
	resp := set.Mutate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: obj}, loaders, WithImageDigestPins())
	var images []string
	for _, c := range resp.Object["spec"].(map[string]any)["containers"].([]any) {
		images = append(images, c.(map[string]any)["image"].(string))
	}
	want := []string{"registry.example.com/app/signed:v1@sha256:1", "nginx:1.27", "registry.example.com/attested@sha256:2", "registry.example.com/down/signed:v1"}
	if !reflect.DeepEqual(images, want) {
		t.Errorf("images %v, want %v", images, want)
	}
	var errs []string
	for _, e := range resp.Errors() {
		errs = append(errs, e.Policy.Key+": "+e.Rule.Message)
	}
	wantErrs := []string{"check-signed: failed to update digest: connection refused", "requires-only: failed to update digest: connection refused"}
	if !reflect.DeepEqual(errs, wantErrs) || !resp.Blocked() {
		t.Errorf("errors %q (blocked %v), want %q, blocked", errs, resp.Blocked(), wantErrs)
	}
	plain := set.Mutate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: obj}, loaders)
	if len(plain.Patch) != 0 || len(plain.Policies) != 0 {
		t.Errorf("without WithImageDigestPins: patch %v, policies %v", plain.Patch, plain.Policies)
	}
}

// TestRequiredImagesAcrossSets: the admission webhook evaluates its
// failurePolicy Fail and Ignore policies as two sets; under
// WithDeferredRequiredImages, SettleRequiredImages lets an image one set
// verified satisfy the other's required. Validate and ValidateTimed
// settle each set on its own otherwise.
func TestRequiredImagesAcrossSets(t *testing.T) {
	policies, _ := readCELPolicies(t, "ivpol/policies.yaml")
	byName := map[string]kyvernov1.PolicyInterface{}
	for _, p := range policies {
		byName[p.GetName()] = p
	}
	verifying, err := Compile([]kyvernov1.PolicyInterface{byName["check-signed"]})
	if err != nil {
		t.Fatal(err)
	}
	requiring, err := Compile([]kyvernov1.PolicyInterface{byName["requires-only"]})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := &review.Request{Operation: kyvernov1.Create, Object: pod("default", "web", nil, "registry.example.com/app/signed:v1")}
	loaders := WithLoaders(loader.Loaders{ImageVerifier: &fakeImages{}})
	status := func(r *Response) string {
		if len(r.Policies) != 1 || len(r.Policies[0].Rules) != 1 {
			t.Fatalf("responses %+v", r.Policies)
		}
		return string(r.Policies[0].Rules[0].Status) + " " + r.Policies[0].Rules[0].Message
	}
	const alone = "fail image registry.example.com/app/signed:v1 is not verified: no policy performed a signature or attestation check on it"
	if got := status(requiring.Validate(ctx, req, loaders)); got != alone {
		t.Errorf("Validate alone: %s, want %s", got, alone)
	}
	if got := status(requiring.ValidateTimed(ctx, req, loaders)); got != alone {
		t.Errorf("ValidateTimed alone: %s, want %s", got, alone)
	}
	a := verifying.ValidateTimed(ctx, req, loaders, WithDeferredRequiredImages())
	b := requiring.Validate(ctx, req, loaders, WithDeferredRequiredImages())
	SettleRequiredImages(a, b)
	if got := status(b); got != "pass success" {
		t.Errorf("settled across sets: %s, want pass", got)
	}
	unsigned := &review.Request{Operation: kyvernov1.Create, Object: pod("default", "web", nil, "registry.example.com/app/unsigned:v1")}
	a = verifying.Validate(ctx, unsigned, loaders, WithDeferredRequiredImages())
	b = requiring.Validate(ctx, unsigned, loaders, WithDeferredRequiredImages())
	SettleRequiredImages(a, b)
	if got, want := status(b), "fail image registry.example.com/app/unsigned:v1 failed signature or attestation verification"; got != want {
		t.Errorf("settled across sets, unsigned: %s, want %s", got, want)
	}
}
