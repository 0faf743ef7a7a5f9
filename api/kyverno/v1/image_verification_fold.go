package v1

import "strings"

// Folded returns the entry with Kyverno's deprecated v1 fields image, key,
// roots, subject, issuer, additionalExtensions and annotations moved into
// imageReferences and an attestor set, as Kyverno does before every use
// (verify-images.md §1.3): the set goes to every attestation when there
// are attestations, else to attestors. The entry itself is not changed.
func (iv *ImageVerification) Folded() ImageVerification {
	out := *iv
	if out.Image != "" {
		out.ImageReferences = append(append([]string(nil), out.ImageReferences...), out.Image)
	}
	if out.Key == "" && out.Issuer == "" && len(out.Annotations) == 0 {
		return out
	}
	entry := Attestor{Annotations: out.Annotations}
	if out.Key != "" {
		entry.Keys = &StaticKeyAttestor{PublicKeys: out.Key}
	} else {
		entry.Keyless = &KeylessAttestor{Issuer: out.Issuer, Subject: out.Subject, Roots: out.Roots, AdditionalExtensions: out.AdditionalExtensions}
	}
	set := AttestorSet{Entries: []Attestor{entry}}
	if len(out.Attestations) == 0 {
		out.Attestors = append(append([]AttestorSet(nil), out.Attestors...), set)
		return out
	}
	atts := append([]Attestation(nil), out.Attestations...)
	for i := range atts {
		atts[i].Attestors = append(append([]AttestorSet(nil), atts[i].Attestors...), set)
	}
	out.Attestations = atts
	return out
}

// SplitPublicKeys returns the entries with each publicKeys block that
// holds several PEM keys split into one entry per key, as Kyverno counts
// the entries of a set (verify-images.md §3.3).
func SplitPublicKeys(entries []Attestor) []Attestor {
	const end = "-----END PUBLIC KEY-----"
	var out []Attestor
	for _, a := range entries {
		if a.Keys == nil || strings.Count(a.Keys.PublicKeys, end) < 2 {
			out = append(out, a)
			continue
		}
		for _, part := range strings.SplitAfter(a.Keys.PublicKeys, end) {
			if strings.TrimSpace(part) == "" {
				continue
			}
			keys := *a.Keys
			keys.PublicKeys = strings.TrimSpace(part)
			one := a
			one.Keys = &keys
			out = append(out, one)
		}
	}
	return out
}
