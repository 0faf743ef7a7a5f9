// Package ivpol is the ImageValidatingPolicy kind (cel-policy-types.md
// §3.3.5, verify-images.md §6): a compiled ImageValidatingPolicy or
// NamespacedImageValidatingPolicy (Compile), its evaluation on a request
// with the image functions (Policy.Validate), the digests it pins
// (Policy.DigestResolver) and the images a request's policies verified
// (Request). The engine's root compiles it into a PolicySet, files its
// response and settles the required images once every policy ran.
package ivpol

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/gobwas/glob"
	celgo "github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/cel/environment"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/autogen"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/review"
)

// Policy is a compiled ImageValidatingPolicy or
// NamespacedImageValidatingPolicy (cel-policy-types.md §3.3.5,
// verify-images.md §6): one result per matching request, named after the
// policy, from its matchConstraints, matchConditions, exceptions, image
// extraction, verifyDigest and validations over the image functions,
// which ask the engine's ImageVerifier (the same cosign verification as
// verifyImages rules).
type Policy struct {
	namespace string
	kind      string
	// key names the policy in the request's required images; id scopes
	// its verifications in the verifier's cache.
	key, id string
	// variants are the policy itself, then its autogen copies for Pod
	// controllers.
	variants []*variant
	ignore   bool
	action   review.Action
	// refs select the images the policy verifies; none selects all.
	refs []imageMatcher
	// attestors by name, each the charter attestors it stands for (one
	// per keyless identity: the attestor verifies when any does).
	attestors map[string]*ivpolAttestor
	// attestations by name.
	attestations map[string]ivpolAttestation
	verifyDigest bool
	required     bool
	mutateDigest bool
	creds        *kyvernov1.ImageRegistryCredentials
}

// Action is what the policy's failure does (validationActions).
func (ip *Policy) Action() review.Action { return ip.action }

type ivpolAttestor struct {
	name       string
	checks     []kyvernov1.Attestor
	repository string
	// notary marks a notary attestor: checks hold its certificates, tsa
	// its timestamp authorities' (PEM).
	notary bool
	tsa    string
}

// ivpolAttestation is one attestation a policy names: an in-toto
// statement of a predicate type (cosign) or an OCI 1.1 referrer of an
// artifact type (notary).
type ivpolAttestation struct {
	typ      string
	referrer bool
}

// imageMatcher is one matchImageReferences entry.
type imageMatcher struct {
	glob glob.Glob
	expr *celruntime.Program
}

type variant struct {
	match       *celruntime.Constraints
	lazy        *celruntime.LazyVariant[policiesv1.ImageValidatingPolicySpec, variant]
	compiler    *celruntime.Compiler
	conditions  []celruntime.Program
	extractors  []ivpolExtractor
	validations []celruntime.Expression
	annotations []celruntime.Annotation
}

type ivpolExtractor struct {
	name string
	celruntime.Program
}

// Built-in image extractors (verify-images.md §6.1).
var builtinExtractors = []string{"containers", "initContainers", "ephemeralContainers"}

// Compile compiles an ImageValidatingPolicy or
// NamespacedImageValidatingPolicy known by key; cache, when not nil, holds
// variants compiled before.
func Compile(src policiesv1.ImageValidatingPolicyLike, key string, cache *celruntime.Cache) (*Policy, fault.List) {
	spec := src.GetImageValidatingPolicySpec()
	f := &fault.Collector{Kind: src.GetKind(), Name: key}
	ip := &Policy{kind: src.GetKind(), key: key, id: policyid.Of(src), ignore: spec.GetFailurePolicy() == admissionregistrationv1.Ignore,
		action: celruntime.ValidationAction(spec.ValidationAction, spec.EvaluationConfiguration, f), verifyDigest: spec.VerifyDigest(), required: spec.Required(), mutateDigest: spec.MutateDigest()}
	if src.IsNamespaced() {
		ip.namespace = src.GetNamespace()
	}
	if spec.MatchConstraints == nil || len(spec.MatchConstraints.ResourceRules) == 0 {
		f.Add("spec.matchConstraints", "a matchConstraints with at least one resource rule is required")
	}
	if len(spec.Validations) == 0 {
		f.Add("spec.validations", "an ImageValidatingPolicy needs at least one validation")
	}
	ip.refs = compileImageMatchers(spec.MatchImageReferences, f)
	ip.attestors = compileIVPolAttestors(spec.Attestors, f)
	ip.attestations = compileIVPolAttestations(spec.Attestations, f)
	ip.creds = compileIVPolCredentials(spec.Credentials, f)
	if ip.creds != nil && ip.namespace != "" {
		loader.CheckSecretsScope(ip.namespace, ip.creds.Secrets, "spec.credentials.secrets", f)
	}
	compile := func(spec *policiesv1.ImageValidatingPolicySpec, path string, f *fault.Collector) *variant {
		return compileIVPolVariant(cache, spec, path, f)
	}
	ip.variants = celruntime.CompileVariants(spec, autogen.ImageValidatingPolicy, compile,
		func(m *celruntime.Constraints, l *celruntime.LazyVariant[policiesv1.ImageValidatingPolicySpec, variant]) *variant {
			return &variant{match: m, lazy: l}
		}, f)
	if len(f.Errs) > 0 {
		return nil, f.Errs
	}
	return ip, nil
}

func compileImageMatchers(refs []policiesv1.MatchImageReference, f *fault.Collector) []imageMatcher {
	var out []imageMatcher
	for i, r := range refs {
		path := fmt.Sprintf("spec.matchImageReferences[%d]", i)
		switch {
		case (r.Glob == "") == (r.Expression == ""):
			f.Add(path, "exactly one of glob or expression is required")
		case r.Glob != "":
			g, err := glob.Compile(r.Glob)
			if err != nil {
				f.Add(path+".glob", err.Error())
				continue
			}
			out = append(out, imageMatcher{glob: g})
		default:
			env, err := imageRefEnv()
			if err != nil {
				f.Add(path+".expression", "CEL environment: "+err.Error())
				continue
			}
			ast, iss := env.Compile(r.Expression)
			if iss.Err() != nil {
				f.Add(path+".expression", celruntime.Fault(iss.Err().Error()))
				continue
			}
			if !ast.OutputType().IsExactType(celgo.BoolType) {
				f.Add(path+".expression", fmt.Sprintf("must evaluate to bool, not %s", ast.OutputType()))
				continue
			}
			prg, err := env.Program(ast)
			if err != nil {
				f.Add(path+".expression", err.Error())
				continue
			}
			out = append(out, imageMatcher{expr: &celruntime.Program{Expr: r.Expression, Prog: prg}})
		}
	}
	return out
}

var (
	imageRefEnvOnce sync.Once
	imageRefCELEnv  *celgo.Env
	imageRefEnvErr  error
)

// imageRefEnv is the environment of matchImageReferences expressions:
// Kubernetes' CEL libraries and ref, the image as written.
func imageRefEnv() (*celgo.Env, error) {
	imageRefEnvOnce.Do(func() {
		base, _, err := celruntime.Env()
		if err != nil {
			imageRefEnvErr = err
			return
		}
		env, err := base.Env(environment.StoredExpressions)
		if err != nil {
			imageRefEnvErr = err
			return
		}
		imageRefCELEnv, imageRefEnvErr = env.Extend(celgo.Variable("ref", celgo.StringType))
	})
	return imageRefCELEnv, imageRefEnvErr
}

// exactly returns an anchored regular expression matching s only: Kyverno
// hands ImageValidatingPolicy identities to cosign, which compares them
// exactly, while charter's attestors read subject and issuer as wildcards.
func exactly(s string) string { return "^" + regexp.QuoteMeta(s) + "$" }

// identityPattern folds an exact value and a regular expression, which
// must both hold, into one regular expression, or says why none can.
func identityPattern(exact, re, field string) (string, error) {
	if re != "" {
		c, err := regexp.Compile(re)
		if err != nil {
			return "", fmt.Errorf("invalid %sRegExp: %w", field, err)
		}
		if exact != "" && !c.MatchString(exact) {
			return "", fmt.Errorf("%s %q does not match %sRegExp %q: the identity can never match", field, exact, field, re)
		}
	}
	if exact != "" {
		return exactly(exact), nil
	}
	return re, nil
}

// compileIVPolAttestors turns the policy's cosign attestors into charter's
// verifyImages attestors. What charter cannot verify is refused.
func compileIVPolAttestors(list []policiesv1.Attestor, f *fault.Collector) map[string]*ivpolAttestor {
	out := map[string]*ivpolAttestor{}
	for i := range list {
		a := &list[i]
		path := fmt.Sprintf("spec.attestors[%d]", i)
		if a.Name == "" {
			f.Add(path+".name", "an attestor needs a name")
			continue
		}
		if _, dup := out[a.Name]; dup {
			f.Add(path+".name", fmt.Sprintf("duplicate attestor name %q", a.Name))
			continue
		}
		var at *ivpolAttestor
		switch {
		case (a.Notary == nil) == (a.Cosign == nil):
			f.Add(path, "an attestor needs exactly one of cosign or notary")
			continue
		case a.Notary != nil:
			at = compileNotaryAttestor(a.Name, a.Notary, path+".notary", f)
		default:
			at = compileCosignAttestor(a.Name, a.Cosign, path+".cosign", f)
		}
		if at != nil {
			out[a.Name] = at
		}
	}
	return out
}

// compileNotaryAttestor reads a notary attestor: certs, the certificates
// signing chains must end in, and tsaCerts, the timestamp authorities'
// roots, each PEM given as a value.
func compileNotaryAttestor(name string, n *policiesv1.Notary, path string, f *fault.Collector) *ivpolAttestor {
	before := len(f.Errs)
	pemOf := func(field string, v *policiesv1.StringOrExpression, required bool) string {
		switch {
		case v != nil && v.Expression != "":
			f.Add(path+"."+field+".expression", "certificate expressions are not supported by charter; give the PEM in value")
		case v == nil || v.Value == "":
			if required {
				f.Add(path+"."+field, "a notary attestor needs the PEM certificates signatures must chain to")
			}
		default:
			if _, err := loader.ParseCertificates(v.Value); err != nil {
				f.Add(path+"."+field+".value", err.Error())
			}
			return v.Value
		}
		return ""
	}
	certs := pemOf("certs", n.Certs, true)
	tsa := pemOf("tsaCerts", n.TSACerts, false)
	if len(f.Errs) > before {
		return nil
	}
	return &ivpolAttestor{name: name, notary: true, tsa: tsa,
		checks: []kyvernov1.Attestor{{Certificates: &kyvernov1.CertificateAttestor{Certificate: certs}}}}
}

func compileCosignAttestor(name string, c *policiesv1.Cosign, path string, f *fault.Collector) *ivpolAttestor {
	before := len(f.Errs)
	at := &ivpolAttestor{name: name}
	if c.TUF != nil {
		f.Add(path+".tuf", "custom TUF repositories are not supported by charter; give keyless.roots and ctlog keys instead")
	}
	if c.TrustedRoot != nil {
		f.Add(path+".trustedRoot", "trusted roots are not supported by charter; give keyless.roots and ctlog keys instead")
	}
	if s := c.Source; s != nil {
		at.repository = s.Repository
		if s.TagPrefix != "" {
			f.Add(path+".source.tagPrefix", "signature tag prefixes are not supported by charter")
		}
		if len(s.SignaturePullSecrets) > 0 {
			f.Add(path+".source.PullSecrets", "signature pull secrets are not supported by charter; use spec.credentials.secrets")
		}
	}
	rekor := &kyvernov1.Rekor{}
	ctlog := &kyvernov1.CTLog{}
	if l := c.CTLog; l != nil {
		if l.TSACertChain != "" {
			f.Add(path+".ctlog.tsaCertChain", "signed timestamps (tsaCertChain) are not supported by charter")
		}
		if !l.InsecureIgnoreTlog && l.URL == "" {
			// Kyverno: a ctlog that requires the log names it.
			f.Add(path+".ctlog.url", "rekor URL must be provided")
		}
		rekor = &kyvernov1.Rekor{URL: l.URL, RekorPubKey: l.RekorPubKey, IgnoreTlog: l.InsecureIgnoreTlog}
		ctlog = &kyvernov1.CTLog{CTLogPubKey: l.CTLogPubKey, IgnoreSCT: l.InsecureIgnoreSCT}
	}
	set := 0
	for _, b := range []bool{c.Key != nil, c.Keyless != nil, c.Certificate != nil} {
		if b {
			set++
		}
	}
	if set != 1 {
		f.Add(path, "exactly one of key, keyless or certificate is required")
		return nil
	}
	base := kyvernov1.Attestor{Annotations: c.Annotations, Repository: at.repository}
	switch {
	case c.Key != nil:
		k := c.Key
		switch {
		case k.KMS != "":
			f.Add(path+".key.kms", "KMS keys are not supported by charter; put the PEM public key in key.data")
		case k.Expression != "":
			f.Add(path+".key.expression", "key expressions are not supported by charter; put the PEM public key in key.data")
		case k.Data == "":
			f.Add(path+".key.data", "a PEM public key is required")
		}
		if !loader.ValidSignatureAlgorithm(k.HashAlgorithm) {
			f.Add(path+".key.hashAlgorithm", fmt.Sprintf("unknown hash algorithm %q", k.HashAlgorithm))
		}
		a := base
		a.Keys = &kyvernov1.StaticKeyAttestor{PublicKeys: k.Data, SignatureAlgorithm: k.HashAlgorithm, Rekor: rekor, CTLog: ctlog}
		at.checks = append(at.checks, a)
	case c.Certificate != nil:
		cert, chain := c.Certificate.Certificate, c.Certificate.CertificateChain
		for field, v := range map[string]*policiesv1.StringOrExpression{"cert": cert, "certChain": chain} {
			if v != nil && v.Expression != "" {
				f.Add(path+".certificate."+field+".expression", "certificate expressions are not supported by charter; give the PEM in value")
			}
		}
		a := base
		a.Certificates = &kyvernov1.CertificateAttestor{Rekor: rekor, CTLog: ctlog}
		if cert != nil {
			a.Certificates.Certificate = cert.Value
		}
		if chain != nil {
			a.Certificates.CertificateChain = chain.Value
		}
		if a.Certificates.Certificate == "" && a.Certificates.CertificateChain == "" {
			f.Add(path+".certificate", "cert or certChain is required")
		}
		at.checks = append(at.checks, a)
	case c.Keyless != nil:
		k := c.Keyless
		if len(k.Identities) == 0 {
			f.Add(path+".keyless.identities", "keyless needs at least one identity")
		}
		for key := range k.AdditionalExtensions {
			if _, ok := loader.CertExtensionOID(key); !ok {
				f.Add(path+".keyless.additionalExtensions", "invalid certificate extension "+key)
			}
		}
		for j, id := range k.Identities {
			ip := fmt.Sprintf("%s.keyless.identities[%d]", path, j)
			if id.Subject == "" && id.SubjectRegExp == "" {
				f.Add(ip, "an identity needs subject or subjectRegExp")
				continue
			}
			if id.Issuer == "" && id.IssuerRegExp == "" {
				f.Add(ip, "an identity needs issuer or issuerRegExp")
				continue
			}
			subject, err := identityPattern(id.Subject, id.SubjectRegExp, "subject")
			if err != nil {
				f.Add(ip, err.Error())
				continue
			}
			issuer, err := identityPattern(id.Issuer, id.IssuerRegExp, "issuer")
			if err != nil {
				f.Add(ip, err.Error())
				continue
			}
			a := base
			a.Keyless = &kyvernov1.KeylessAttestor{Roots: k.Roots, SubjectRegExp: subject, IssuerRegExp: issuer,
				AdditionalExtensions: k.AdditionalExtensions, Rekor: rekor, CTLog: ctlog}
			at.checks = append(at.checks, a)
		}
	}
	if len(f.Errs) > before {
		return nil
	}
	return at
}

func compileIVPolAttestations(list []policiesv1.Attestation, f *fault.Collector) map[string]ivpolAttestation {
	out := map[string]ivpolAttestation{}
	for i, a := range list {
		path := fmt.Sprintf("spec.attestations[%d]", i)
		if a.Name == "" {
			f.Add(path+".name", "an attestation needs a name")
			continue
		}
		if _, dup := out[a.Name]; dup {
			f.Add(path+".name", fmt.Sprintf("duplicate attestation name %q", a.Name))
			continue
		}
		switch {
		case (a.InToto == nil) == (a.Referrer == nil):
			f.Add(path, "exactly one of intoto or referrer is required")
		case a.Referrer != nil && a.Referrer.Type == "":
			f.Add(path+".referrer.type", "an artifact type is required")
		case a.Referrer != nil:
			out[a.Name] = ivpolAttestation{typ: a.Referrer.Type, referrer: true}
		case a.InToto.Type == "":
			f.Add(path+".intoto.type", "a predicate type is required")
		default:
			out[a.Name] = ivpolAttestation{typ: a.InToto.Type}
		}
	}
	return out
}

func compileIVPolCredentials(c *policiesv1.Credentials, f *fault.Collector) *kyvernov1.ImageRegistryCredentials {
	if c == nil {
		return nil
	}
	out := &kyvernov1.ImageRegistryCredentials{AllowInsecureRegistry: c.AllowInsecureRegistry, Secrets: c.Secrets}
	for _, p := range c.Providers {
		if msg := loader.RegistryProviderFault(p); msg != "" {
			f.Add("spec.credentials.providers", msg)
			continue
		}
		out.Providers = append(out.Providers, kyvernov1.ImageRegistryCredentialsProvider(p))
	}
	return out
}

// compileIVPolVariant compiles a variant, or returns the one compiled
// before in cache from the same spec.
func compileIVPolVariant(cache *celruntime.Cache, spec *policiesv1.ImageValidatingPolicySpec, path string, f *fault.Collector) *variant {
	src := struct {
		MC  *admissionregistrationv1.MatchResources   `json:"m,omitempty"`
		C   []admissionregistrationv1.MatchCondition  `json:"c,omitempty"`
		V   []admissionregistrationv1.Variable        `json:"v,omitempty"`
		I   []policiesv1.ImageExtractor               `json:"i,omitempty"`
		Val []admissionregistrationv1.Validation      `json:"val,omitempty"`
		A   []admissionregistrationv1.AuditAnnotation `json:"a,omitempty"`
		P   string                                    `json:"p"`
	}{spec.MatchConstraints, spec.MatchConditions, spec.Variables, spec.Images, spec.Validations, spec.AuditAnnotations, path}
	return celruntime.Cached(cache, src, path, f, func() *variant { return compileIVPolVariantUncached(spec, path, f) })
}

func compileIVPolVariantUncached(spec *policiesv1.ImageValidatingPolicySpec, path string, f *fault.Collector) *variant {
	compiler, match, ok := celruntime.StartVariant(ivpolCompiler, spec.MatchConstraints, path, f)
	if !ok {
		return nil
	}
	v := &variant{compiler: compiler, match: match}
	fields := celruntime.Fields{Compiler: v.compiler, Faults: f}
	compile := func(a *celruntime.Accessor, field string) *celruntime.Program {
		if p := fields.Program(a, field); p != nil {
			return &celruntime.Program{Expr: a.Expr, Prog: p}
		}
		return nil
	}
	v.conditions = fields.Conditions(spec.MatchConditions, path+".matchConditions")
	fields.Variables(spec.Variables, path+".variables")
	seen := map[string]bool{}
	for _, n := range builtinExtractors {
		seen[n] = true
	}
	for i, ex := range spec.Images {
		field := fmt.Sprintf("%s.images[%d]", path, i)
		if ex.Name == "" || seen[ex.Name] {
			f.Add(field+".name", fmt.Sprintf("image extractor name %q is empty or already taken (built in: %s)", ex.Name, strings.Join(builtinExtractors, ", ")))
			continue
		}
		seen[ex.Name] = true
		if p := compile(&celruntime.Accessor{Expr: ex.Expression, Returns: []*celgo.Type{celgo.ListType(celgo.StringType), celgo.ListType(celgo.DynType)}}, field+".expression"); p != nil {
			v.extractors = append(v.extractors, ivpolExtractor{name: ex.Name, Program: *p})
		}
	}
	v.validations = celruntime.Validations(spec.Validations, path, compile)
	v.annotations = celruntime.AuditAnnotations(spec.AuditAnnotations, path, f, compile)
	return v
}

// matchesImage reports whether the policy verifies the image: it matches
// a glob or expression of matchImageReferences, as written (no
// normalisation), or the policy has none.
func (ip *Policy) matchesImage(image string) (bool, error) {
	if len(ip.refs) == 0 {
		return true, nil
	}
	for _, m := range ip.refs {
		if m.glob != nil {
			if m.glob.Match(image) {
				return true, nil
			}
			continue
		}
		out, _, err := m.expr.Prog.Eval(map[string]any{"ref": image})
		if err != nil {
			return false, fmt.Errorf("matchImageReferences %q: %w", m.expr.Expr, err)
		}
		if b, ok := out.Value().(bool); ok && b {
			return true, nil
		}
	}
	return false, nil
}
