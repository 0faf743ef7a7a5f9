package ivpol

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	celgo "github.com/google/cel-go/cel"
	celcommon "github.com/google/cel-go/common"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/charter-dev/charter/api/charter"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// The image functions of ImageValidatingPolicies (verify-images.md §6.2)
// need the evaluation they run in: the verifier, the credentials, what
// the request verified so far. CEL binds functions once per environment,
// so each global call is rewritten at parse time into a method call on a
// receiver variable bound per evaluation, as Kyverno's other libraries are
// (resource, http): verifyImageSignatures(i, a) reads as
// charterImageVerification.verifyImageSignatures(i, a).
const imageVerificationVar = "charterImageVerification"

// Variables ImageValidatingPolicies add.
const (
	imagesVar       = "images"
	attestorsVar    = "attestors"
	attestationsVar = "attestations"
)

var (
	imageVerificationType = celgo.OpaqueType("charter.ImageVerification")
	attestorRefType       = celgo.OpaqueType("charter.Attestor")
)

var (
	ivpolEnvOnce sync.Once
	ivpolCELEnv  *environment.EnvSet
	ivpolEnvErr  error
)

// ivpolEnv is celPolicyEnv with the image functions and variables.
func ivpolEnv() (*environment.EnvSet, error) {
	ivpolEnvOnce.Do(func() {
		base, err := celruntime.PolicyEnv()
		if err != nil {
			ivpolEnvErr = err
			return
		}
		ivpolCELEnv, ivpolEnvErr = base.Extend(environment.VersionedOptions{
			IntroducedVersion: version.MajorMinor(1, 0),
			EnvOptions:        ivpolLibraryOptions(),
		})
	})
	return ivpolCELEnv, ivpolEnvErr
}

// ivpolCompiler compiles the expressions of every image validating policy
// in ivpolEnv.
var ivpolCompiler = sync.OnceValues(func() (*celruntime.EnvCompiler, error) {
	env, err := ivpolEnv()
	if err != nil {
		return nil, err
	}
	return celruntime.NewEnvCompiler(env, true)
})

func toImageVerification(name string) celgo.MacroFactory {
	return func(eh celgo.MacroExprFactory, _ celast.Expr, args []celast.Expr) (celast.Expr, *celcommon.Error) {
		return eh.NewMemberCall(name, eh.NewIdent(imageVerificationVar), args...), nil
	}
}

func ivpolLibraryOptions() []celgo.EnvOption {
	list := celgo.ListType(celgo.DynType)
	fn := func(name, id string, args []*celgo.Type, result *celgo.Type, impl func(*imageVerification, []ref.Val) ref.Val) celgo.EnvOption {
		return celgo.Function(name, celgo.MemberOverload(id, append([]*celgo.Type{imageVerificationType}, args...), result,
			celgo.FunctionBinding(func(vals ...ref.Val) ref.Val {
				v, ok := vals[0].(*imageVerification)
				if !ok {
					return types.NewErr("%s: no image verification here", name)
				}
				return impl(v, vals[1:])
			})))
	}
	return []celgo.EnvOption{
		celgo.Variable(imageVerificationVar, imageVerificationType),
		celgo.Variable(imagesVar, celgo.MapType(celgo.StringType, celgo.ListType(celgo.StringType))),
		celgo.Variable(attestorsVar, celgo.MapType(celgo.StringType, attestorRefType)),
		celgo.Variable(attestationsVar, celgo.MapType(celgo.StringType, celgo.StringType)),
		celgo.Macros(
			celgo.GlobalMacro("verifyImageSignatures", 2, toImageVerification("verifyImageSignatures")),
			celgo.GlobalMacro("verifyAttestationSignatures", 3, toImageVerification("verifyAttestationSignatures")),
			celgo.GlobalMacro("extractPayload", 2, toImageVerification("extractPayload")),
			celgo.GlobalMacro("getImageData", 1, toImageVerification("getImageData")),
		),
		fn("verifyImageSignatures", "ivpol_verify_image_signatures", []*celgo.Type{celgo.StringType, list}, celgo.IntType,
			func(v *imageVerification, args []ref.Val) ref.Val {
				img, _ := args[0].(types.String)
				return v.verify(string(img), "", args[1])
			}),
		fn("verifyAttestationSignatures", "ivpol_verify_attestation_signatures", []*celgo.Type{celgo.StringType, celgo.StringType, list}, celgo.IntType,
			func(v *imageVerification, args []ref.Val) ref.Val {
				img, _ := args[0].(types.String)
				name, _ := args[1].(types.String)
				if name == "" {
					return types.NewErr("attestation not found in policy: %q", "")
				}
				return v.verify(string(img), string(name), args[2])
			}),
		fn("extractPayload", "ivpol_extract_payload", []*celgo.Type{celgo.StringType, celgo.StringType}, celgo.DynType,
			func(v *imageVerification, args []ref.Val) ref.Val {
				img, _ := args[0].(types.String)
				name, _ := args[1].(types.String)
				return v.extractPayload(string(img), string(name))
			}),
		fn("getImageData", "ivpol_get_image_data", []*celgo.Type{celgo.StringType}, celgo.DynType,
			func(v *imageVerification, args []ref.Val) ref.Val {
				img, _ := args[0].(types.String)
				return v.imageData(string(img))
			}),
	}
}

// attestorRef is the value of attestors.<name>.
type attestorRef struct{ name string }

func (a attestorRef) ConvertToNative(t reflect.Type) (any, error) {
	if t.Kind() == reflect.String {
		return a.name, nil
	}
	return nil, fmt.Errorf("an attestor has no %v value", t)
}
func (a attestorRef) ConvertToType(t ref.Type) ref.Val {
	if t == types.StringType {
		return types.String(a.name)
	}
	return types.NewErr("an attestor cannot be converted to %s", t.TypeName())
}
func (a attestorRef) Equal(o ref.Val) ref.Val {
	b, ok := o.(attestorRef)
	return types.Bool(ok && b.name == a.name)
}
func (a attestorRef) Type() ref.Type { return attestorRefType }
func (a attestorRef) Value() any     { return a.name }

// Request is what the ImageValidatingPolicies of one request share:
// which images some policy verified, for `required`, which is settled
// once all of them ran (§3.3.5 step 8).
type Request struct {
	// Verified counts the attestors that verified each image, as written.
	Verified map[string]int
	// Checked records the images some policy tried to verify.
	Checked map[string]bool
	// Matched are the images each policy (by key) matched, when it
	// requires them verified.
	Matched map[string][]string
}

// requestOf returns the request's Request, made on first use.
func requestOf(in *review.View) *Request {
	st, ok := in.IVPol.(*Request)
	if !ok {
		st = &Request{Verified: map[string]int{}, Checked: map[string]bool{}, Matched: map[string][]string{}}
		in.IVPol = st
	}
	return st
}

// imageVerification is the receiver of the image functions in one
// evaluation of one policy.
type imageVerification struct {
	ctx    context.Context
	policy *Policy
	cfg    *review.Options
	creds  loader.ImageCredentials
	req    *Request
	// unavailable is set once a verification function could not ask the
	// registry (or the transparency log) about an image.
	unavailable bool
	// payloads are the statements verified in this evaluation, by image
	// and attestation name, for extractPayload.
	payloads map[[2]string]any
}

func (v *imageVerification) ConvertToNative(reflect.Type) (any, error) {
	return nil, errors.New("the image verification has no native value")
}
func (v *imageVerification) ConvertToType(ref.Type) ref.Val {
	return types.NewErr("the image verification cannot be converted")
}
func (v *imageVerification) Equal(o ref.Val) ref.Val { return types.Bool(o == ref.Val(v)) }
func (v *imageVerification) Type() ref.Type          { return imageVerificationType }
func (v *imageVerification) Value() any              { return v }

// attestorNames reads a list of attestors.<name> values.
func attestorNames(list ref.Val) ([]string, error) {
	l, ok := list.(traits.Lister)
	if !ok {
		return nil, errors.New("attestors must be a list of attestors.<name>")
	}
	var out []string
	it := l.Iterator()
	for it.HasNext() == types.True {
		a, ok := it.Next().(attestorRef)
		if !ok {
			return nil, errors.New("attestors must be a list of attestors.<name>")
		}
		out = append(out, a.name)
	}
	return out, nil
}

// verify counts the attestors that accept the image's signatures, or its
// attestation of the named type when attestation is set. An image outside
// matchImageReferences counts 0. When none accepts and one could not be
// asked (registry or log unreachable), the answer is an error, not 0: the
// policy then ends in error rather than a verdict on the image.
func (v *imageVerification) verify(image, attestation string, attestors ref.Val) ref.Val {
	ip := v.policy
	names, err := attestorNames(attestors)
	if err != nil {
		return types.WrapErr(err)
	}
	var att ivpolAttestation
	if attestation != "" {
		var ok bool
		if att, ok = ip.attestations[attestation]; !ok {
			return types.NewErr("attestation not found in policy: %s", attestation)
		}
	}
	match, err := ip.matchesImage(image)
	if err != nil {
		return types.WrapErr(err)
	}
	if !match {
		return types.Int(0)
	}
	info, ok := jsoncontext.ParseImage(image)
	if !ok {
		return types.NewErr("invalid image reference %q", image)
	}
	verifier := v.cfg.Loaders.ImageVerifier
	if verifier == nil {
		return types.NewErr("failed to verify image %s: no image verifier is configured", image)
	}
	v.req.Checked[image] = true
	count := 0
	var unavailable error
	for _, n := range names {
		at := ip.attestors[n]
		if at == nil {
			return types.NewErr("attestor not found in policy: %s", n)
		}
		// Each verifier has one kind of attestation (§6.2).
		if attestation != "" && at.notary && !att.referrer {
			return types.NewErr("notary verifier only supports oci 1.1 referrers as attestations")
		}
		if attestation != "" && !at.notary && att.referrer {
			return types.NewErr("cosign verifier only supports intoto referrers as attestations")
		}
		typ := kyvernov1.Cosign
		if at.notary {
			typ = kyvernov1.Notary
		}
		for _, a := range at.checks {
			check := loader.ImageCheck{Image: info.Reference(), Attestor: a, Repository: at.repository, Credentials: v.creds,
				UseCache: true, VerifiedSince: v.cfg.ImagesVerifiedSince, Scope: ip.id + "/" + n, PredicateType: att.typ,
				Type: typ, TSACertificates: at.tsa}
			if err := v.check(verifier, check, image, attestation); err != nil {
				if loader.IsImageUnavailable(err) && unavailable == nil {
					unavailable = err
				}
				continue
			}
			count++
			break
		}
	}
	if count == 0 && unavailable != nil {
		v.unavailable = true
		return types.NewErr("failed to verify image %s: %v", image, unavailable)
	}
	v.req.Verified[image] += count
	return types.Int(count)
}

// check asks the verifier one question; for an attestation it keeps the
// first statement of the type for extractPayload: an in-toto statement
// whole, a referrer's predicate (its layer's JSON), as Kyverno's
// extractPayload returns them.
func (v *imageVerification) check(verifier loader.ImageVerifier, c loader.ImageCheck, image, attestation string) error {
	if c.PredicateType == "" {
		_, err := verifier.VerifySignatures(v.ctx, c)
		return err
	}
	res, err := verifier.VerifyAttestations(v.ctx, c)
	if err != nil {
		return err
	}
	for _, st := range res.Statements {
		var payload any = st
		t, _ := st["predicateType"].(string)
		if c.Type == kyvernov1.Notary {
			t, _ = st["type"].(string)
			payload = st["predicate"]
		}
		if t == c.PredicateType {
			key := [2]string{image, attestation}
			if _, done := v.payloads[key]; !done {
				v.payloads[key] = payload
			}
			return nil
		}
	}
	return fmt.Errorf("no attestation of type %s", c.PredicateType)
}

// extractPayload returns the in-toto statement of the named attestation
// verified earlier in this evaluation: never an unverified one (Kyverno
// #17130).
func (v *imageVerification) extractPayload(image, attestation string) ref.Val {
	att, ok := v.policy.attestations[attestation]
	if !ok {
		return types.NewErr("attestation not found in policy: %s", attestation)
	}
	st, ok := v.payloads[[2]string{image, attestation}]
	switch {
	case !ok && att.referrer:
		return types.NewErr("referrer attestation payload cannot be fetched before verifying the referrer attestation")
	case !ok:
		return types.NewErr("intoto attestation payload cannot be fetch before verifying intoto attestation")
	}
	return types.DefaultTypeAdapter.NativeToValue(st)
}

func (v *imageVerification) imageData(image string) ref.Val {
	l := v.cfg.Loaders.Images
	if l == nil {
		return types.NewErr("failed to get image data: no image registry access here")
	}
	data, err := l.ImageData(v.ctx, image, v.creds)
	if err != nil {
		return types.NewErr("failed to get image data: %v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(data)
}

// ivpolActivation adds the image variables to a policy's activation.
type ivpolActivation struct {
	celruntime.PolicyActivation
	verification                    *imageVerification
	images, attestors, attestations ref.Val
}

func (a *ivpolActivation) ResolveName(name string) (any, bool) {
	switch name {
	case imageVerificationVar:
		return a.verification, true
	case imagesVar:
		return a.images, true
	case attestorsVar:
		return a.attestors, true
	case attestationsVar:
		return a.attestations, true
	}
	return a.PolicyActivation.ResolveName(name)
}

// builtinImages lists the images of the object's containers,
// initContainers and ephemeralContainers by extractor name, for Pods and
// Pod controllers.
func builtinImages(obj map[string]any) map[string][]string {
	out := map[string][]string{}
	for _, n := range builtinExtractors {
		out[n] = []string{}
	}
	_, spec := jsoncontext.PodSpecAt(obj)
	if spec == nil {
		return out
	}
	for _, n := range builtinExtractors {
		list, _ := spec[n].([]any)
		for _, c := range list {
			cm, _ := c.(map[string]any)
			if image, _ := cm["image"].(string); image != "" {
				out[n] = append(out[n], image)
			}
		}
	}
	return out
}

// Validate evaluates the policy (§3.3.5): its one result, named after the
// policy; ok is false when its matchConstraints or matchConditions leave
// the request alone.
func (ip *Policy) Validate(ctx context.Context, in *review.View, cfg *review.Options, own celruntime.Owner) (review.RuleResponse, bool) {
	var v *variant
	for _, cand := range ip.variants {
		if cand.match.Matches(in) {
			v = cand
			break
		}
	}
	if v == nil {
		return review.RuleResponse{}, false
	}
	rr := review.RuleResponse{Name: own.Source.GetName(), Type: review.TypeImageVerify, Action: ip.action}
	if charter.IsStaged(own.Source.GetLabels()) && charter.Enforces(in.NamespaceLabels()) {
		rr.Action = review.Enforce
	}
	var o review.Outcome
	var matched []string
	if v.lazy != nil {
		var fault string
		if v, fault = v.lazy.Compiled(); v == nil {
			o = review.Errorf("failed to compile policy: %s", fault)
		}
	}
	if v != nil {
		var respond bool
		if o, matched, respond = ip.evaluateImages(ctx, in, cfg, v, &own, &rr); !respond {
			return review.RuleResponse{}, false
		}
	}
	rr.Status, rr.Message = o.Status, o.Message
	if len(o.Props) > 0 {
		rr.Properties = o.Props
	}
	if rr.Status == review.StatusFail && own.Unscored {
		rr.Status = review.StatusWarn
	}
	if rr.Status == review.StatusPass && ip.required && len(matched) > 0 {
		requestOf(in).Matched[ip.key] = matched
	}
	return rr, true
}

// evaluateImages runs the policy's pipeline; respond is false when the
// policy gives no result (a matchCondition false, or in error under
// failurePolicy Ignore). matched lists the images the policy selected.
func (ip *Policy) evaluateImages(ctx context.Context, in *review.View, cfg *review.Options, v *variant, own *celruntime.Owner, rr *review.RuleResponse) (o review.Outcome, matched []string, respond bool) {
	e, act, obj := ip.imageEvaluator(ctx, in, cfg, v)
	// matchConditions run before exceptions here, unlike the other kinds.
	hold, err := imageConditions(e, v)
	if err != nil {
		if ip.ignore {
			return review.Outcome{}, nil, false
		}
		return review.Errorf("failed to evaluate policy: %v", err), nil, true
	}
	if !hold {
		return review.Outcome{}, nil, false
	}
	// Any exception that holds exempts the request: images and
	// allowedValues play no part for this kind.
	_, exempt, err := own.EvalExceptions(e, in.Scope, true)
	if err != nil {
		return review.Errorf("failed to evaluate policy: %v", err), nil, true
	}
	if exempt != nil {
		rr.Name = celruntime.RuleException
		o := review.Skip("rule is skipped due to policy exception: " + exempt.Keys())
		o.Props = map[string]string{"exceptions": exempt.Names()}
		return o, nil, true
	}

	byName := builtinImages(obj)
	order := append([]string(nil), builtinExtractors...)
	for i := range v.extractors {
		x := &v.extractors[i]
		val, err := e.Eval(&x.Program)
		if err != nil {
			return review.Errorf("failed to evaluate policy: images.%s: %v", x.name, err), nil, true
		}
		list, err := stringList(val)
		if err != nil {
			return review.Errorf("failed to evaluate policy: images.%s: %v", x.name, err), nil, true
		}
		byName[x.name] = list
		order = append(order, x.name)
	}
	seen := map[string]bool{}
	for _, n := range order {
		kept := []string{}
		for _, img := range byName[n] {
			ok, err := ip.matchesImage(img)
			if err != nil {
				return review.Errorf("failed to evaluate policy: %v", err), nil, true
			}
			if !ok {
				continue
			}
			kept = append(kept, img)
			if !seen[img] {
				seen[img] = true
				matched = append(matched, img)
			}
		}
		byName[n] = kept
	}
	act.images = types.DefaultTypeAdapter.NativeToValue(byName)
	if ip.verifyDigest {
		for _, img := range matched {
			if info, ok := jsoncontext.ParseImage(img); !ok || info.Digest == "" {
				return review.Fail("image " + img + " does not have a digest"), matched, true
			}
		}
	}
	result := review.Pass("success")
	for i := range v.validations {
		x := &v.validations[i]
		val, err := e.Eval(&x.Program)
		if err != nil {
			if ip.required && act.verification.unavailable {
				// An image that could not be verified is never admitted
				// while the policy requires verified images, whatever the
				// failurePolicy, as for verifyImages rules.
				return review.Fail(fmt.Sprintf("unverified image: %v", err)), matched, true
			}
			return review.Errorf("failed to evaluate policy: %v", err), matched, true
		}
		if val != types.True {
			result = review.Fail(e.ValidationMessage(x, i))
			break
		}
	}
	for i := range v.annotations {
		a := &v.annotations[i]
		val, err := e.Eval(&a.Program)
		if err != nil {
			return review.Errorf("failed to evaluate policy: audit annotation %s: %v", a.Key, err), matched, true
		}
		if s, ok := val.(types.String); ok && s != "" {
			if result.Props == nil {
				result.Props = map[string]string{}
			}
			result.Props[a.Key] = string(s)
		}
	}
	return result, matched, true
}

// imageEvaluator builds the CEL evaluation of a policy variant over the
// request, and returns the object whose images it reads (the old object
// when there is no new one).
func (ip *Policy) imageEvaluator(ctx context.Context, in *review.View, cfg *review.Options, v *variant) (*celruntime.Evaluator, *ivpolActivation, map[string]any) {
	ci := celruntime.InputsOf(in)
	obj := in.Req.Object
	if obj == nil {
		obj = in.Req.OldObject
	}
	_, spec := jsoncontext.PodSpecAt(obj)
	pullSecrets := jsoncontext.PullSecrets(spec)
	verification := &imageVerification{ctx: ctx, policy: ip, cfg: cfg, req: requestOf(in), payloads: map[[2]string]any{},
		creds: loader.ImageCredentials{Namespace: in.Res.Namespace, PullSecrets: pullSecrets, Registry: ip.creds, Scope: ip.namespace}}
	attestors := make(map[string]any, len(ip.attestors))
	for n := range ip.attestors {
		attestors[n] = attestorRef{name: n}
	}
	attestations := make(map[string]string, len(ip.attestations))
	for n := range ip.attestations {
		attestations[n] = n
	}
	act := &ivpolActivation{
		PolicyActivation: celruntime.PolicyActivation{
			Activation: celruntime.Activation{In: ci, Object: ci.Object, OldObject: ci.OldObject, Request: ci.Request, Params: types.NullValue},
			Libs:       celruntime.NewLibReceivers(ctx, &cfg.Loaders, ip.namespace),
			Exceptions: types.DefaultTypeAdapter.NativeToValue(map[string]any{"allowedImages": []any{}, "allowedValues": []any{}}),
		},
		verification: verification,
		images:       types.DefaultTypeAdapter.NativeToValue(map[string][]string{}),
		attestors:    types.DefaultTypeAdapter.NativeToValue(attestors),
		attestations: types.DefaultTypeAdapter.NativeToValue(attestations),
	}
	cctx := v.compiler.CreateContext(ctx)
	act.Variables = cctx.Variables(act)
	return &celruntime.Evaluator{Ctx: cctx, Act: act, Budget: celconfig.RuntimeCELCostBudget}, act, obj
}

// imageConditions evaluates the variant's matchConditions: whether all
// hold, or their errors joined.
func imageConditions(e *celruntime.Evaluator, v *variant) (bool, error) {
	var errs []string
	for i := range v.conditions {
		val, err := e.Eval(&v.conditions[i])
		switch {
		case err != nil:
			errs = append(errs, err.Error())
		case val != types.True:
			return false, nil
		}
	}
	if len(errs) > 0 {
		return false, errors.New(strings.Join(errs, "; "))
	}
	return true, nil
}

// DigestResolver returns how the policy pins an image's tag to its
// digest on the request, or nil when it pins none there (no mutateDigest,
// no variant selects the request, a matchCondition does not hold or
// fails). resolve leaves an image outside matchImageReferences alone (ok
// false) and asks the verifier for the digest of tagRef.
func (ip *Policy) DigestResolver(ctx context.Context, in *review.View, cfg *review.Options, pullSecrets []string) (resolve func(raw, tagRef string) (digest string, ok bool, err error)) {
	if !ip.mutateDigest {
		return nil
	}
	var v *variant
	for _, cand := range ip.variants {
		if cand.match.Matches(in) {
			v = cand
			break
		}
	}
	if v != nil && v.lazy != nil {
		v, _ = v.lazy.Compiled()
	}
	if v == nil {
		return nil
	}
	e, _, _ := ip.imageEvaluator(ctx, in, cfg, v)
	if hold, err := imageConditions(e, v); err != nil || !hold {
		return nil
	}
	return func(raw, tagRef string) (string, bool, error) {
		if ok, err := ip.matchesImage(raw); err != nil || !ok {
			return "", false, nil
		}
		verifier := cfg.Loaders.ImageVerifier
		if verifier == nil {
			return "", false, errors.New("no image verifier is configured")
		}
		digest, err := verifier.ResolveDigest(ctx, tagRef, loader.ImageCredentials{Namespace: in.Res.Namespace, PullSecrets: pullSecrets, Registry: ip.creds, Scope: ip.namespace})
		if err != nil {
			return "", false, err
		}
		return digest, true, nil
	}
}

// stringList reads a CEL list of strings.
func stringList(val ref.Val) ([]string, error) {
	l, ok := val.(traits.Lister)
	if !ok {
		return nil, fmt.Errorf("want a list of strings, got %s", val.Type().TypeName())
	}
	var out []string
	it := l.Iterator()
	for it.HasNext() == types.True {
		s, ok := it.Next().(types.String)
		if !ok {
			return nil, errors.New("want a list of strings")
		}
		out = append(out, string(s))
	}
	return out, nil
}
