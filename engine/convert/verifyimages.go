package convert

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/wildcard"
)

// imageRule is a verifyImages rule in ImageValidatingPolicy terms
// (verify-images.md §6): which images it verifies, the named attestors
// and attestations its validations call, and the digest settings.
type imageRule struct {
	refs         []policiesv1.MatchImageReference
	attestors    []policiesv1.Attestor
	attestations []policiesv1.Attestation
	config       *policiesv1.ValidationConfiguration
	credentials  *policiesv1.Credentials
}

// allImagesVariable names the images of every container list, which
// Kyverno's verifyImages checks all of (initContainers, containers,
// ephemeralContainers, §2.3) while an ImageValidatingPolicy lists them
// apart.
const allImagesVariable = "allImages"

// convertVerifyImages converts a verifyImages rule of one entry into the
// parts of an ImageValidatingPolicy: every attestor set becomes a
// validation counting the set's attestors that verified each image, every
// attestation one counting its signers and, with conditions, one over
// its predicate.
func convertVerifyImages(r *kyvernov1.Rule, out *convertedRule) error {
	if len(r.ImageExtractors) > 0 {
		return cannot("imageExtractors: an ImageValidatingPolicy's images are CEL expressions, which the converter does not write from extractor paths")
	}
	if len(r.VerifyImages) > 1 {
		return cannot("%d verifyImages entries: an ImageValidatingPolicy has one matchImageReferences for all its validations", len(r.VerifyImages))
	}
	iv := r.VerifyImages[0].Folded()
	switch {
	case iv.GetType() == kyvernov1.SigstoreBundle:
		return cannot("type SigstoreBundle: charter verifies cosign and notary signatures only")
	case len(iv.SkipImageReferences) > 0:
		return cannot("skipImageReferences: an ImageValidatingPolicy selects images by matchImageReferences only")
	case iv.CosignOCI11:
		return cannot("cosignOCI11: an ImageValidatingPolicy's cosign attestor reads signatures from the .sig tag only")
	case iv.Validation.Deny != nil || iv.Validation.Message != "":
		return cannot("verifyImages validate: its deny conditions have no converter yet")
	case len(iv.Attestors) == 0 && len(iv.Attestations) == 0:
		return cannot("a verifyImages entry with no attestors or attestations verifies nothing; an ImageValidatingPolicy needs a validation")
	}
	if err := imageOperations(out.matchConstraints); err != nil {
		return err
	}
	refs, err := imageReferences(iv.ImageReferences)
	if err != nil {
		return wrap(err, "imageReferences")
	}
	ir := &imageRule{refs: refs}
	notary := iv.GetType() == kyvernov1.Notary
	names := &attestorNames{byName: map[string]bool{}}
	images := "variables." + allImagesVariable
	scope := strings.Join(iv.ImageReferences, ", ")
	for i := range iv.Attestors {
		refs, required, err := names.set(&iv.Attestors[i], notary, ir)
		if err != nil {
			return wrap(err, "attestors[%d]", i)
		}
		out.validations = append(out.validations, admissionregistrationv1.Validation{
			Expression: images + ".map(image, verifyImageSignatures(image, " + refs + ")).all(verified, " + atLeast("verified", required) + ")",
			Message:    fmt.Sprintf("images matching %s must be signed by %s", scope, attestorsPhrase(refs, required)),
		})
	}
	attNames := map[string]bool{}
	for i := range iv.Attestations {
		a := &iv.Attestations[i]
		typ := a.Type
		if typ == "" {
			typ = a.PredicateType
		}
		if typ == "" {
			return cannot("attestations[%d]: missing type", i)
		}
		if len(a.Attestors) == 0 {
			return cannot("attestations[%d]: no attestors (Kyverno then accepts any public-good Fulcio signer, which charter refuses)", i)
		}
		name := attestationName(a, i, attNames)
		att := policiesv1.Attestation{Name: name}
		if notary {
			att.Referrer = &policiesv1.Referrer{Type: typ}
		} else {
			att.InToto = &policiesv1.InToto{Type: typ}
		}
		ir.attestations = append(ir.attestations, att)
		for j := range a.Attestors {
			refs, required, err := names.set(&a.Attestors[j], notary, ir)
			if err != nil {
				return wrap(err, "attestations[%d].attestors[%d]", i, j)
			}
			out.validations = append(out.validations, admissionregistrationv1.Validation{
				Expression: images + ".map(image, verifyAttestationSignatures(image, attestations." + name + ", " + refs + ")).all(verified, " + atLeast("verified", required) + ")",
				Message:    fmt.Sprintf("images matching %s must have a %s attestation signed by %s", scope, typ, attestorsPhrase(refs, required)),
			})
		}
		if len(a.Conditions) == 0 {
			continue
		}
		if typ == "https://cosign.sigstore.dev/attestation/v1" {
			// Kyverno parses this predicate's Data text as JSON before
			// its conditions read it (§3.4); extractPayload does not.
			return cannot("attestations[%d]: conditions on cosign's custom predicate, whose Data Kyverno reads as JSON", i)
		}
		// Kyverno merges the predicate into the root of the conditions'
		// context (§3.4): {{ builder.id }} is predicate.builder.id.
		payload := "extractPayload(image, attestations." + name + ")"
		if !notary {
			payload += ".predicate"
		}
		cs := &jmesScope{root: "predicate", variables: map[string]bool{}, vars: &iterNames{}}
		var conds []expr
		for k := range a.Conditions {
			c, err := cs.conditions(&a.Conditions[k])
			if err != nil {
				return wrap(err, "attestations[%d].conditions[%d]", i, k)
			}
			conds = append(conds, c)
		}
		out.validations = append(out.validations, admissionregistrationv1.Validation{
			Expression: images + ".all(image, cel.bind(predicate, " + payload + ", " + and(conds...).s + "))",
			Message:    fmt.Sprintf("the %s attestation of images matching %s does not meet the conditions of rule %s", typ, scope, r.Name),
		})
	}
	out.variables = append(out.variables, admissionregistrationv1.Variable{Name: allImagesVariable,
		Expression: "images.initContainers + images.containers + images.ephemeralContainers"})
	cfg := &policiesv1.ValidationConfiguration{}
	off := false
	if !iv.IsMutateDigest() {
		cfg.MutateDigest = &off
	}
	if !iv.IsVerifyDigest() {
		cfg.VerifyDigest = &off
	}
	if !iv.IsRequired() {
		cfg.Required = &off
	}
	if *cfg != (policiesv1.ValidationConfiguration{}) {
		ir.config = cfg
	}
	if c := iv.ImageRegistryCredentials; c != nil {
		ir.credentials = &policiesv1.Credentials{AllowInsecureRegistry: c.AllowInsecureRegistry, Secrets: c.Secrets}
		for _, p := range c.Providers {
			ir.credentials.Providers = append(ir.credentials.Providers, string(p))
		}
	}
	out.image = ir
	return nil
}

// imageOperations keeps CREATE and UPDATE in the resource rules: Kyverno
// verifies images on those only (its mutating webhook, and the validating
// one never for DELETE, §2.1), while an ImageValidatingPolicy matching
// DELETE would verify the old object's images.
func imageOperations(mc *admissionregistrationv1.MatchResources) error {
	if mc == nil {
		return nil
	}
	for i := range mc.ResourceRules {
		r := &mc.ResourceRules[i]
		var kept []admissionregistrationv1.OperationType
		for _, op := range r.Operations {
			switch op {
			case admissionregistrationv1.OperationAll:
				kept = []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
			case admissionregistrationv1.Create, admissionregistrationv1.Update:
				if !slices.Contains(kept, op) {
					kept = append(kept, op)
				}
			}
		}
		if len(kept) == 0 {
			return cannot("match selects neither CREATE nor UPDATE, the only operations Kyverno verifies images on")
		}
		r.Operations = kept
	}
	return nil
}

// imageActions is a verifyImages rule's failure action (§1.1): Enforce
// when an entry says so, else the first entry's, else the policy's.
func imageActions(p kyvernov1.PolicyInterface, r *kyvernov1.Rule) []admissionregistrationv1.ValidationAction {
	action := p.GetSpec().ValidationFailureAction
	var first *kyvernov1.ValidationFailureAction
	for _, iv := range r.VerifyImages {
		if a := iv.FailureAction; a != nil {
			if strings.EqualFold(string(*a), "enforce") {
				first = a
				break
			}
			if first == nil {
				first = a
			}
		}
	}
	if first != nil {
		action = *first
	}
	out := []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}
	if strings.EqualFold(string(action), "enforce") {
		out[0] = admissionregistrationv1.Deny
	}
	if w := p.GetSpec().EmitWarning; w != nil && *w {
		out = append(out, admissionregistrationv1.Warn)
	}
	return out
}

// imageReferences turns Kyverno's image references into globs.
// Kyverno matches a reference against the image normalised
// (registry/path:tag, :latest when the image names no tag, or
// registry/path@digest with the tag dropped, docker.io added when the
// image names no registry, §2.3), an ImageValidatingPolicy against the
// image as written, after its admission pinned a tag to tag@digest
// (§6.1, §6.3). The globs select what Kyverno selects, and the pinned
// forms of those images, for a reference that names its registry (not
// Docker Hub) and either ends in * after the repository path, or names a
// repository and a tag, tag pattern or digest; others are refused. A
// tag reference therefore also selects the image written with that tag
// and a digest (repo:1.0@sha256:…), which Kyverno lets through
// unverified: the converted policy verifies it.
func imageReferences(refs []string) ([]policiesv1.MatchImageReference, error) {
	var out []policiesv1.MatchImageReference
	add := func(globs ...string) {
		for _, g := range globs {
			out = append(out, policiesv1.MatchImageReference{Glob: g})
		}
	}
	for _, ref := range refs {
		if ref == "*" {
			add("*")
			continue
		}
		registry, path, found := strings.Cut(ref, "/")
		switch {
		case !found || !strings.ContainsAny(registry, ".:") && registry != "localhost":
			return nil, cannot("%q names no registry: Kyverno matches it against docker.io/..., an ImageValidatingPolicy against the image as written", ref)
		case registry == "docker.io" || registry == "index.docker.io":
			return nil, cannot("%q: Kyverno matches Docker Hub images normalised (nginx as docker.io/nginx:latest), an ImageValidatingPolicy as written", ref)
		case strings.ContainsAny(registry, "*?"):
			return nil, cannot("%q: a wildcard registry may match an image that names none, which Kyverno reads as docker.io", ref)
		case strings.ContainsAny(ref, `[]{}\`):
			return nil, cannot("%q holds a glob character ([, ], {, } or \\) that Kyverno's wildcards read literally", ref)
		}
		// Every normalised image holds a : after its repository path (a
		// tag, or sha256: of a digest): prefix*:* selects as prefix* does.
		if stem, ok := strings.CutSuffix(path, "*:*"); ok && !strings.ContainsAny(stem, ":@") {
			path = stem + "*"
			ref = registry + "/" + path
		}
		rest, digest, pinned := strings.Cut(path, "@")
		repo, tag, tagged := strings.Cut(rest, ":")
		name := registry + "/" + repo
		switch {
		case !tagged && !pinned && strings.HasSuffix(path, "*") && wildcardsInPath(path):
			add(ref)
		case !tagged && !pinned:
			return nil, cannot("%q names no tag or digest: Kyverno reads an image without a tag as :latest, so it matches no image", ref)
		case strings.ContainsAny(repo, "*?"):
			return nil, cannot("%q: a wildcard in the repository of a tag or digest reference may reach into the tag, which Kyverno matches normalised and an ImageValidatingPolicy as written", ref)
		case pinned && tagged:
			return nil, cannot("%q: Kyverno drops the tag of an image that names a digest, so this reference matches no image", ref)
		case pinned:
			// repo@digest, also written repo:tag@digest.
			if strings.ContainsAny(digest, "*?") {
				return nil, cannot("%q: a digest pattern", ref)
			}
			add(ref, name+":*@"+digest)
		case strings.Contains(tag, "/"):
			return nil, cannot("%q: a tag pattern that reaches into the repository path", ref)
		default:
			// repo:tag, also pinned to repo:tag@digest; an untagged
			// image is Kyverno's repo:latest, pinned to repo@digest.
			add(ref)
			if !strings.HasSuffix(tag, "*") {
				add(ref + "@*")
			}
			if wildcard.Match(tag, "latest") {
				add(name, name+"@*")
			}
		}
	}
	return out, nil
}

// wildcardsInPath reports whether every wildcard but the last * of a
// repository path is followed by a /, so that none can reach into the
// tag or digest, which Kyverno and an ImageValidatingPolicy match
// differently.
func wildcardsInPath(path string) bool {
	body := strings.TrimSuffix(path, "*")
	last := strings.LastIndex(body, "/")
	return !strings.ContainsAny(body[last+1:], "*?")
}

// attestorNames names a policy's attestors and remembers them, so that
// an attestation whose attestors equal the image's shares their names.
type attestorNames struct {
	byName map[string]bool
	count  map[string]int
}

// set converts one attestor set: its entries (a publicKeys block of
// several keys one entry per key, as Kyverno counts them) become named
// attestors of ir, and refs lists them for a verification function;
// required is how many must verify (count, else all).
func (n *attestorNames) set(s *kyvernov1.AttestorSet, notary bool, ir *imageRule) (refs string, required int, err error) {
	entries := kyvernov1.SplitPublicKeys(s.Entries)
	if len(entries) == 0 {
		return "", 0, cannot("no entries")
	}
	var list []string
	for i := range entries {
		a, err := attestor(&entries[i], notary)
		if err != nil {
			return "", 0, wrap(err, "entries[%d]", i)
		}
		name := ""
		for _, known := range ir.attestors {
			if reflect.DeepEqual(known.Cosign, a.Cosign) && reflect.DeepEqual(known.Notary, a.Notary) {
				name = known.Name
			}
		}
		if name == "" {
			name = n.fresh(attestorKind(a))
			a.Name = name
			ir.attestors = append(ir.attestors, a)
		}
		list = append(list, "attestors."+name)
	}
	required = len(entries)
	if s.Count != nil && *s.Count > 0 {
		if *s.Count > len(s.Entries) {
			return "", 0, cannot("count %d exceeds the %d entries", *s.Count, len(s.Entries))
		}
		required = *s.Count
	}
	return "[" + strings.Join(list, ", ") + "]", required, nil
}

func (n *attestorNames) fresh(base string) string {
	if n.count == nil {
		n.count = map[string]int{}
	}
	n.count[base]++
	name := base
	if n.count[base] > 1 {
		name = base + strconv.Itoa(n.count[base])
	}
	for n.byName[name] {
		n.count[base]++
		name = base + strconv.Itoa(n.count[base])
	}
	n.byName[name] = true
	return name
}

func attestorKind(a policiesv1.Attestor) string {
	switch {
	case a.Notary != nil:
		return "notary"
	case a.Cosign.Keyless != nil:
		return "keyless"
	case a.Cosign.Certificate != nil:
		return "certificate"
	}
	return "key"
}

// attestor converts one entry into a cosign or notary attestor.
func attestor(a *kyvernov1.Attestor, notary bool) (policiesv1.Attestor, error) {
	if a.Attestor != nil {
		return policiesv1.Attestor{}, cannot("a nested attestor set: an ImageValidatingPolicy's attestors are flat (count them in the validation instead)")
	}
	if notary {
		c := a.Certificates
		if c == nil {
			return policiesv1.Attestor{}, cannot("a notary entry without certificates")
		}
		if hasVariables(c.Certificate + c.CertificateChain) {
			return policiesv1.Attestor{}, cannot("certificates from variables")
		}
		// Kyverno's notary verifier trusts cert and certChain as one CA
		// store (§3.5).
		certs := strings.TrimSpace(strings.Join(nonEmpty(c.Certificate, c.CertificateChain), "\n")) + "\n"
		return policiesv1.Attestor{Notary: &policiesv1.Notary{Certs: &policiesv1.StringOrExpression{Value: certs}}}, nil
	}
	if len(a.Annotations) > 0 && a.Keys == nil && a.Certificates == nil && a.Keyless == nil {
		return policiesv1.Attestor{}, cannot("an entry with annotations only")
	}
	co := &policiesv1.Cosign{Annotations: a.Annotations}
	if a.Repository != "" {
		co.Source = &policiesv1.Source{Repository: a.Repository}
	}
	var rekor *kyvernov1.Rekor
	var ctlog *kyvernov1.CTLog
	switch {
	case a.Keys != nil:
		k := a.Keys
		switch {
		case k.KMS != "":
			return policiesv1.Attestor{}, cannot("keys.kms: charter verifies PEM keys only")
		case k.Secret != nil || strings.HasPrefix(strings.TrimSpace(k.PublicKeys), "k8s://"):
			return policiesv1.Attestor{}, cannot("keys from a Secret: charter verifies PEM keys only")
		case hasVariables(k.PublicKeys):
			return policiesv1.Attestor{}, cannot("keys.publicKeys from variables: an ImageValidatingPolicy's key is data or a CEL expression")
		}
		// The hash is keys.signatureAlgorithm's: Kyverno's cosign
		// verifier does not read the attestor-level field (§1.2).
		co.Key = &policiesv1.Key{Data: k.PublicKeys, HashAlgorithm: k.SignatureAlgorithm}
		rekor, ctlog = k.Rekor, k.CTLog
	case a.Certificates != nil:
		c := a.Certificates
		if hasVariables(c.Certificate + c.CertificateChain) {
			return policiesv1.Attestor{}, cannot("certificates from variables")
		}
		co.Certificate = &policiesv1.Certificate{}
		if c.Certificate != "" {
			co.Certificate.Certificate = &policiesv1.StringOrExpression{Value: c.Certificate}
		}
		if c.CertificateChain != "" {
			co.Certificate.CertificateChain = &policiesv1.StringOrExpression{Value: c.CertificateChain}
		}
		rekor, ctlog = c.Rekor, c.CTLog
	case a.Keyless != nil:
		kl, err := keyless(a.Keyless)
		if err != nil {
			return policiesv1.Attestor{}, err
		}
		co.Keyless = kl
		rekor, ctlog = a.Keyless.Rekor, a.Keyless.CTLog
	default:
		return policiesv1.Attestor{}, cannot("an entry without keys, certificates or keyless")
	}
	// Kyverno's verifyImages and charter's ImageValidatingPolicy both use
	// the public Rekor when none is named and require the log unless it is
	// ignored; the CT log's SCT likewise.
	if rekor != nil || ctlog != nil {
		l := &policiesv1.CTLog{}
		if rekor != nil {
			l.URL, l.RekorPubKey, l.InsecureIgnoreTlog = rekor.URL, rekor.RekorPubKey, rekor.IgnoreTlog
		}
		if ctlog != nil {
			if ctlog.TSACertChain != "" {
				return policiesv1.Attestor{}, cannot("ctlog.tsaCertChain: charter does not verify signed timestamps")
			}
			l.CTLogPubKey, l.InsecureIgnoreSCT = ctlog.CTLogPubKey, ctlog.IgnoreSCT
		}
		if !l.InsecureIgnoreTlog && l.URL == "" {
			l.URL = "https://rekor.sigstore.dev"
		}
		co.CTLog = l
	}
	return policiesv1.Attestor{Cosign: co}, nil
}

// keyless converts a keyless entry. Kyverno matches subject and issuer
// as wildcards (a subject or subjectRegExp matching is enough, issuer and
// issuerRegExp must both match, §3.3); an ImageValidatingPolicy identity
// matches exactly or by regular expression, and its identities are
// alternatives.
func keyless(k *kyvernov1.KeylessAttestor) (*policiesv1.Keyless, error) {
	if hasVariables(k.Subject + k.SubjectRegExp + k.Issuer + k.IssuerRegExp + k.Roots) {
		return nil, cannot("keyless identity or roots from variables")
	}
	for key, v := range k.AdditionalExtensions {
		if hasVariables(v) {
			return nil, cannot("keyless.additionalExtensions.%s from a variable", key)
		}
	}
	issuer := policiesv1.Identity{}
	switch {
	case k.Issuer != "" && k.IssuerRegExp != "":
		if strings.ContainsAny(k.Issuer, "*?") {
			return nil, cannot("keyless issuer %q is a wildcard and issuerRegExp is set: one identity cannot require both", k.Issuer)
		}
		issuer.Issuer, issuer.IssuerRegExp = k.Issuer, k.IssuerRegExp
	case k.Issuer != "":
		issuer.Issuer, issuer.IssuerRegExp = exactOrPattern(k.Issuer)
	case k.IssuerRegExp != "":
		issuer.IssuerRegExp = k.IssuerRegExp
	default:
		// No issuer constraint: any issuer.
		issuer.IssuerRegExp = ".*"
	}
	var ids []policiesv1.Identity
	if k.Subject != "" {
		id := issuer
		id.Subject, id.SubjectRegExp = exactOrPattern(k.Subject)
		ids = append(ids, id)
	}
	if k.SubjectRegExp != "" {
		id := issuer
		id.SubjectRegExp = k.SubjectRegExp
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		id := issuer
		id.SubjectRegExp = ".*"
		ids = append(ids, id)
	}
	return &policiesv1.Keyless{Identities: ids, Roots: k.Roots, AdditionalExtensions: k.AdditionalExtensions}, nil
}

// exactOrPattern returns a Kyverno wildcard as an exact value when it has
// no wildcard, else as an anchored regular expression.
func exactOrPattern(w string) (exact, pattern string) {
	if !strings.ContainsAny(w, "*?") {
		return w, ""
	}
	return "", globRegexp(w)
}

var typeWords = regexp.MustCompile(`[A-Za-z][A-Za-z]+`)

// attestationName names an attestation for attestations.<name>: its
// Kyverno name when that is an identifier, else the last word of its
// predicate type (https://slsa.dev/provenance/v0.2: provenance).
func attestationName(a *kyvernov1.Attestation, i int, taken map[string]bool) string {
	name := ""
	if isIdent(a.Name) {
		name = a.Name
	} else {
		typ := a.Type
		if typ == "" {
			typ = a.PredicateType
		}
		parts := typeWords.FindAllString(typ, -1)
		for j := len(parts) - 1; j >= 0 && name == ""; j-- {
			if !slices.Contains([]string{"https", "http", "www", "dev", "io", "com", "org", "application", "vnd", "json", "yaml", "schema", "attestation"}, parts[j]) {
				name = parts[j]
			}
		}
		if name == "" {
			name = "attestation" + strconv.Itoa(i)
		}
	}
	base := name
	for k := 2; taken[name]; k++ {
		name = base + strconv.Itoa(k)
	}
	taken[name] = true
	return name
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			out = append(out, strings.TrimSpace(s))
		}
	}
	return out
}

// atLeast is the CEL test that a count reaches required.
func atLeast(count string, required int) string {
	if required == 1 {
		return count + " > 0"
	}
	return count + " >= " + strconv.Itoa(required)
}

// attestorsPhrase says which attestors must verify, for a message.
func attestorsPhrase(refs string, required int) string {
	names := strings.Split(strings.ReplaceAll(strings.Trim(refs, "[]"), "attestors.", ""), ", ")
	if len(names) == 1 {
		return "attestor " + names[0]
	}
	if required == len(names) {
		return "all of attestors " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("%d of attestors %s", required, strings.Join(names, ", "))
}

// buildImageValidatingPolicy writes a verifyImages rule as an
// ImageValidatingPolicy (a Policy's as a NamespacedImageValidatingPolicy).
func buildImageValidatingPolicy(p kyvernov1.PolicyInterface, name string, rules []*convertedRule) Output {
	r := rules[0]
	c := commonParts(p, name, rules)
	spec := policiesv1.ImageValidatingPolicySpec{
		MatchConstraints:         r.matchConstraints,
		MatchConditions:          r.matchConditions,
		ValidationAction:         r.actions,
		Variables:                c.variables,
		FailurePolicy:            c.failurePolicy,
		WebhookConfiguration:     c.webhook,
		MatchImageReferences:     r.image.refs,
		Attestors:                r.image.attestors,
		Attestations:             r.image.attestations,
		Validations:              r.validations,
		ValidationConfigurations: r.image.config,
		Credentials:              r.image.credentials,
	}
	if b := p.GetSpec().Background; b != nil && !*b {
		spec.EvaluationConfiguration = &policiesv1.EvaluationConfiguration{Background: &policiesv1.BackgroundConfiguration{Enabled: b}}
	}
	if c.podControllers != nil {
		spec.AutogenConfiguration = &policiesv1.ImageValidatingPolicyAutogenConfiguration{PodControllers: c.podControllers}
	}
	if p.IsNamespaced() {
		return c.output(&policiesv1.NamespacedImageValidatingPolicy{ObjectMeta: c.meta, Spec: spec}, policiesv1.NamespacedImageValidatingPolicyKind)
	}
	return c.output(&policiesv1.ImageValidatingPolicy{ObjectMeta: c.meta, Spec: spec}, policiesv1.ImageValidatingPolicyKind)
}
