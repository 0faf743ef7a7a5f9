package cpol

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/variables"
)

// verifyImagesRule is a compiled verifyImages rule (verify-images.md §1).
type verifyImagesRule struct {
	entries []*imageEntry
	// extractors are the rule's custom imageExtractors by kind; for those
	// kinds they replace the standard extractors (§2.3).
	extractors map[string][]imageExtractor
	// action is the rule's own failure action: Enforce when any entry
	// says so, else the first entry that sets one; nil when none does.
	action *review.Action
}

// imageEntry is one verifyImages entry with Kyverno's deprecated fields
// folded in (§1.3) and the CRD defaults applied.
type imageEntry struct {
	index int
	iv    kyvernov1.ImageVerification
	// raw is the entry as JSON without attestation conditions and
	// validate.deny (they are evaluated later, §1.5); set only when it
	// holds variables, substituted on every evaluation.
	raw map[string]any
	// conditions[i] are attestations[i].conditions, one block each.
	conditions [][]*ConditionBlock
	deny       *ConditionBlock
}

// compileVerifyImages checks a verifyImages rule as Kyverno's policy
// admission does (§1.4, with its exact details) and as charter must: what
// charter cannot verify (SigstoreBundle, KMS and Secret keys,
// attestations without attestors) is refused here, never left to look
// enforced.
func (s *Compiler) compileVerifyImages(p *Policy, r *kyvernov1.Rule, path string, f *fault.Collector) *verifyImagesRule {
	out := &verifyImagesRule{}
	if len(r.ImageExtractors) > 0 {
		if len(r.VerifyImages) == 0 {
			f.Add(path+".imageExtractors", fmt.Sprintf("Invalid rule spec for rule '%s', imageExtractors can only be defined for verifyImages rule", r.Name))
		}
		out.extractors = s.compileImageExtractors(r, path, f)
		if usesJMESPath(r.ImageExtractors) && slices.ContainsFunc(r.VerifyImages, func(iv kyvernov1.ImageVerification) bool { return iv.IsMutateDigest() }) {
			f.Add(path+".imageExtractors", "jmespath may not be used in an image extractor when mutating digests with verify images")
		}
	}
	if len(r.VerifyImages) > 0 && !p.spec.AdmissionProcessingEnabled() && firstImageRule(p.spec.Rules) == r.Name {
		f.Add("spec.admission", "disabling admission processing is only allowed with validation policies")
	}
	effective := normalizeAction(p.spec.ValidationFailureAction)
	for i := range r.VerifyImages {
		ep := fmt.Sprintf("%s.verifyImages[%d]", path, i)
		e := &imageEntry{index: i, iv: r.VerifyImages[i].Folded()}
		iv := &e.iv
		if iv.FailureAction != nil && iv.FailureAction.IsValid() {
			a := normalizeAction(*iv.FailureAction)
			effective = a
			if out.action == nil || a == review.Enforce {
				out.action = &a
			}
		}
		if effective == review.Audit && iv.IsMutateDigest() {
			f.Add(ep+".mutateDigest", "mutateDigest must be set to false for \u2018Audit\u2019 failure action")
		}
		if len(iv.ImageReferences) == 0 {
			f.Add(ep+".imageReferences", "An image reference is required")
		}
		for _, ref := range iv.ImageReferences {
			if variables.HasVariables(ref) {
				f.Add(ep+".imageReferences", fmt.Sprintf("rule %q should not have variables in image reference section", r.Name))
				break
			}
		}
		switch iv.GetType() {
		case kyvernov1.Cosign:
		case kyvernov1.Notary:
			checkNotaryAttestors(iv, ep, f)
		default:
			f.Add(ep+".type", fmt.Sprintf("type %s is not supported by charter; use type Cosign", iv.GetType()))
		}
		checkRegistryCredentials(iv.ImageRegistryCredentials, ep+".imageRegistryCredentials", f)
		for j := range iv.Attestors {
			checkAttestorSet(&iv.Attestors[j], fmt.Sprintf("%s.attestors[%d]", ep, j), f)
		}
		e.conditions = make([][]*ConditionBlock, len(iv.Attestations))
		for j := range iv.Attestations {
			a := &iv.Attestations[j]
			ap := fmt.Sprintf("%s.attestations[%d]", ep, j)
			if len(a.Attestors) == 0 {
				// Kyverno then accepts any signer of the public-good
				// Fulcio, without SCT (§8.8, kyverno#17125).
				f.Add(ap+".attestors", "an attestation needs attestors: charter does not accept statements from any signer")
			}
			for k := range a.Attestors {
				checkAttestorSet(&a.Attestors[k], fmt.Sprintf("%s.attestors[%d]", ap, k), f)
			}
			for k := range a.Conditions {
				e.conditions[j] = append(e.conditions[j], CompileConditions(&a.Conditions[k], fmt.Sprintf("%s.conditions[%d]", ap, k), f))
			}
		}
		if d := iv.Validation.Deny; d != nil {
			block, err := kyvernov1.ParseConditions(d.RawAnyAllConditions)
			if err != nil {
				f.Add(ep+".validate.deny.conditions", err.Error())
			} else {
				e.deny = CompileConditions(block, ep+".validate.deny.conditions", f)
			}
		}
		raw, err := entryJSON(iv)
		if err != nil {
			f.Add(ep, "cannot encode entry: "+err.Error())
		} else if variables.HasVariables(raw) {
			e.raw = raw
		}
		out.entries = append(out.entries, e)
	}
	return out
}

// checkAttestorSet applies §1.4's checks to a set and its entries,
// nested sets included.
func checkAttestorSet(set *kyvernov1.AttestorSet, path string, f *fault.Collector) {
	if len(set.Entries) == 0 {
		f.Add(path+".entries", "An entry is required")
	}
	if set.Count != nil && *set.Count > len(set.Entries) {
		f.Add(path+".count", "Count cannot exceed length of entries")
	}
	for i := range set.Entries {
		a := &set.Entries[i]
		ap := fmt.Sprintf("%s.entries[%d]", path, i)
		blocks := 0
		for _, set := range []bool{a.Keys != nil, a.Certificates != nil, a.Keyless != nil, a.Attestor != nil} {
			if set {
				blocks++
			}
		}
		if blocks != 1 {
			f.Add(ap, "keys, certificates, keyless, or a nested attestor is required")
			continue
		}
		switch {
		case a.Keys != nil:
			k := a.Keys
			switch {
			case k.PublicKeys == "" && k.KMS == "" && k.Secret == nil:
				f.Add(ap+".keys", "A public key, kms key or secret is required")
			case k.PublicKeys != "":
				if !loader.ValidSignatureAlgorithm(k.SignatureAlgorithm) {
					f.Add(ap+".keys.signatureAlgorithm", "Invalid signature algorithm provided")
				}
				if strings.HasPrefix(strings.TrimSpace(k.PublicKeys), "k8s://") {
					f.Add(ap+".keys.publicKeys", "keys from Secrets (k8s://) are not supported by charter; put the PEM key in publicKeys")
				}
			case k.KMS != "":
				f.Add(ap+".keys.kms", "KMS keys are not supported by charter; put the PEM public key in publicKeys")
			default:
				f.Add(ap+".keys.secret", "keys from Secrets are not supported by charter; put the PEM key in publicKeys")
			}
			checkTransparency(k.Rekor, k.CTLog, ap+".keys", f)
		case a.Certificates != nil:
			if a.Certificates.Certificate == "" && a.Certificates.CertificateChain == "" {
				f.Add(ap+".certificates", "cert or certChain required")
			}
			checkTransparency(a.Certificates.Rekor, a.Certificates.CTLog, ap+".certificates", f)
		case a.Keyless != nil:
			k := a.Keyless
			if k.Rekor == nil && k.Roots == "" {
				f.Add(ap+".keyless", "Either Rekor URL or roots are required")
			}
			if k.Rekor != nil && k.Rekor.URL == "" {
				f.Add(ap+".keyless.rekor.url", "An URL is required")
			}
			for key := range k.AdditionalExtensions {
				if _, ok := loader.CertExtensionOID(key); !ok {
					f.Add(ap+".keyless.additionalExtensions", "invalid certificate extension "+key)
				}
			}
			checkTransparency(k.Rekor, k.CTLog, ap+".keyless", f)
		case a.Attestor != nil:
			nested, err := nestedAttestorSet(a)
			if err != nil {
				f.Add(ap+".attestor", err.Error())
				continue
			}
			checkAttestorSet(nested, ap+".attestor", f)
		}
	}
}

func checkTransparency(_ *kyvernov1.Rekor, ct *kyvernov1.CTLog, path string, f *fault.Collector) {
	if ct != nil && ct.TSACertChain != "" {
		f.Add(path+".ctlog.tsaCertChain", "signed timestamps (tsaCertChain) are not supported by charter")
	}
}

// checkNotaryAttestors checks the attestors of a type Notary entry, its
// own and its attestations': Kyverno refuses keys and keyless there (§1.4),
// and its notary verifier reads certificates only (§3.5), cert and
// certChain together forming the trusted CA store. An entry without
// certificates, or with PEM that holds no certificate, could never
// verify anything: it is refused here, naming the field, rather than
// failing every image (Kyverno dereferences the missing certificates of
// an attestation's entry, §8.9). Certificates given by a variable are
// read when the rule runs.
func checkNotaryAttestors(iv *kyvernov1.ImageVerification, ep string, f *fault.Collector) {
	var check func(set *kyvernov1.AttestorSet, path string)
	check = func(set *kyvernov1.AttestorSet, path string) {
		for k := range set.Entries {
			a := &set.Entries[k]
			ap := fmt.Sprintf("%s.entries[%d]", path, k)
			switch {
			case a.Attestor != nil:
				// A nested set that does not decode is refused by
				// checkAttestorSet.
				if nested, err := nestedAttestorSet(a); err == nil {
					check(nested, ap+".attestor")
				}
			case a.Keyless != nil:
				f.Add(ap+".keyless", "Keyless field is not allowed for type notary")
			case a.Keys != nil:
				f.Add(ap+".keys", "Keys field is not allowed for type notary")
			case a.Certificates == nil:
				f.Add(ap+".certificates", "type notary verifies with certificates: cert or certChain required")
			default:
				for _, c := range []struct{ field, text string }{{"cert", a.Certificates.Certificate}, {"certChain", a.Certificates.CertificateChain}} {
					if c.text == "" || variables.HasVariables(c.text) {
						continue
					}
					if _, err := loader.ParseCertificates(c.text); err != nil {
						f.Add(ap+".certificates."+c.field, err.Error())
					}
				}
			}
		}
	}
	for j := range iv.Attestors {
		check(&iv.Attestors[j], fmt.Sprintf("%s.attestors[%d]", ep, j))
	}
	for i := range iv.Attestations {
		for j := range iv.Attestations[i].Attestors {
			check(&iv.Attestations[i].Attestors[j], fmt.Sprintf("%s.attestations[%d].attestors[%d]", ep, i, j))
		}
	}
}

// nestedAttestorSet decodes an attestor's nested set.
func nestedAttestorSet(a *kyvernov1.Attestor) (*kyvernov1.AttestorSet, error) {
	var set kyvernov1.AttestorSet
	if err := json.Unmarshal(a.Attestor.Raw, &set); err != nil {
		return nil, fmt.Errorf("failed to unmarshal attestor set %s: %w", string(a.Attestor.Raw), err)
	}
	return &set, nil
}

// entryJSON is the entry as plain JSON without the parts evaluated after
// verification: attestation conditions and validate.deny.
func entryJSON(iv *kyvernov1.ImageVerification) (map[string]any, error) {
	c := *iv
	c.Attestations = make([]kyvernov1.Attestation, len(iv.Attestations))
	copy(c.Attestations, iv.Attestations)
	for i := range c.Attestations {
		c.Attestations[i].Conditions = nil
	}
	c.Validation.Deny = nil
	data, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(data, &out)
}

// usesJMESPath reports whether an image extractor transforms its values
// with JMESPath.
func usesJMESPath(extractors kyvernov1.ImageExtractorConfigs) bool {
	for _, list := range extractors {
		for _, e := range list {
			if e.JMESPath != "" {
				return true
			}
		}
	}
	return false
}

// firstImageRule names the policy's first verifyImages rule, so that a
// policy-wide refusal is reported once.
func firstImageRule(rules []kyvernov1.Rule) string {
	for i := range rules {
		if len(rules[i].VerifyImages) > 0 {
			return rules[i].Name
		}
	}
	return ""
}

// checkRegistryCredentials refuses the credential providers charter does
// not build in (imageverify links no cloud credential helpers), where an
// entry names them: a check could only fail at run time.
func checkRegistryCredentials(c *kyvernov1.ImageRegistryCredentials, path string, f *fault.Collector) {
	if c == nil {
		return
	}
	for _, p := range c.Providers {
		if msg := loader.RegistryProviderFault(string(p)); msg != "" {
			f.Add(path+".providers", msg)
		}
	}
}
