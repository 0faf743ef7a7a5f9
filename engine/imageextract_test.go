package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/podimages"
	"github.com/charter-dev/charter/engine/review"
)

// extractorCases is one file of testdata/imageextractors: a policy with
// one verifyImages rule using custom imageExtractors, the images the fake
// registry serves, and resources with what the rule makes of them.
type extractorCases struct {
	Policy json.RawMessage `json:"policy"`
	// Signed are the references (registry/path:tag or @digest, as the
	// engine asks) whose signatures the fake verifier accepts.
	Signed []string `json:"signed"`
	// Digests are what tags point to (registry/path:tag → sha256:…).
	Digests map[string]string `json:"digests"`
	Cases   []extractorCase   `json:"cases"`
}

type extractorCase struct {
	Name     string         `json:"name"`
	Resource map[string]any `json:"resource"`
	// Pointers are where the rule finds images, in order.
	Pointers []string `json:"pointers"`
	// Images is the rule's images entry (images.<name>.<key>); Error the
	// extraction error instead.
	Images map[string]any `json:"images"`
	Error  string         `json:"error"`
	// Mutate is the mutating phase's rule response (nil: the phase is not
	// run and Validate sees the resource as given, as when the mutating
	// webhook was skipped). Validate is the validating phase's, run on
	// the mutated object.
	Mutate   *phaseWant `json:"mutate"`
	Validate *phaseWant `json:"validate"`
}

type phaseWant struct {
	// Status is "" when the rule must give no response.
	Status  review.RuleStatus `json:"status"`
	Message string            `json:"message"`
	// Images are the images at these pointers after the phase.
	Images map[string]string `json:"images"`
}

// fakeRegistry verifies and resolves from tables: a signature exists for
// exactly the Signed references.
type fakeRegistry struct {
	signed  []string
	digests map[string]string
}

func (f *fakeRegistry) digestOf(image string) string {
	if _, d, ok := strings.Cut(image, "@"); ok {
		return d
	}
	return f.digests[image]
}

func (f *fakeRegistry) VerifySignatures(_ context.Context, c loader.ImageCheck) (loader.ImageVerified, error) {
	if !slices.Contains(f.signed, c.Image) {
		return loader.ImageVerified{}, errors.New("no signatures found")
	}
	return loader.ImageVerified{Digest: f.digestOf(c.Image)}, nil
}

func (f *fakeRegistry) VerifyAttestations(context.Context, loader.ImageCheck) (loader.ImageVerified, error) {
	return loader.ImageVerified{}, errors.New("no attestations in the fake registry")
}

func (f *fakeRegistry) ResolveDigest(_ context.Context, image string, _ loader.ImageCredentials) (string, error) {
	if d := f.digests[image]; d != "" {
		return d, nil
	}
	return "", errors.New("MANIFEST_UNKNOWN: " + image)
}

// TestImageExtractorsTestdata runs testdata/imageextractors through the
// mutating and validating phases: required, verifyDigest and mutateDigest
// applied to the images custom extractors find (engine/cpol's
// TestImageExtractors checks what they find).
func TestImageExtractorsTestdata(t *testing.T) {
	eachCase(t, "imageextractors", func(t *testing.T, tc *extractorCases) {
		set, err := Compile(decodePolicies(t, []json.RawMessage{tc.Policy}))
		if err != nil {
			t.Fatalf("compile: %v", err)
		}
		opts := []EvalOption{WithLoaders(loader.Loaders{ImageVerifier: &fakeRegistry{signed: tc.Signed, digests: tc.Digests}})}
		for _, c := range tc.Cases {
			t.Run(c.Name, func(t *testing.T) {
				obj := c.Resource
				if c.Mutate != nil {
					m := set.Mutate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: obj}, opts...)
					checkPhase(t, "mutating", m.Policies, m.Object, c.Mutate)
					obj = m.Object
				}
				if c.Validate != nil {
					v := set.Validate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: obj}, opts...)
					checkPhase(t, "validating", v.Policies, obj, c.Validate)
				}
			})
		}
	})
}

func checkPhase(t *testing.T, phase string, policies []review.PolicyResponse, obj map[string]any, want *phaseWant) {
	t.Helper()
	var rules []review.RuleResponse
	for _, p := range policies {
		rules = append(rules, p.Rules...)
	}
	switch {
	case want.Status == "" && len(rules) != 0:
		t.Errorf("%s phase: responses %+v, want none", phase, rules)
	case want.Status == "":
	case len(rules) != 1:
		t.Errorf("%s phase: responses %+v, want one", phase, rules)
	case rules[0].Status != want.Status || rules[0].Message != want.Message:
		t.Errorf("%s phase: %s %q, want %s %q", phase, rules[0].Status, rules[0].Message, want.Status, want.Message)
	}
	for pointer, image := range want.Images {
		var v any = obj
		for _, seg := range podimages.PointerSegments(pointer) {
			switch t := v.(type) {
			case map[string]any:
				v = t[seg]
			case []any:
				v = nil
				if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(t) {
					v = t[i]
				}
			default:
				v = nil
			}
		}
		if v != image {
			t.Errorf("%s phase: %s is %v, want %s", phase, pointer, v, image)
		}
	}
}
