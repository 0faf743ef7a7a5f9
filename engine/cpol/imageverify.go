package cpol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/podimages"
	"github.com/charter-dev/charter/engine/review"
)

// imageMatches reports whether any pattern matches the image. Kyverno
// matches registry/path@digest only once there is a digest, so a tag
// pattern stops matching an image pinned as tag@digest; charter also
// tries registry/path:tag when the reference names a tag.
func imageMatches(p podimages.PodImage, patterns []string) bool {
	if anyWildcard(patterns, p.Info.Reference()) {
		return true
	}
	return p.Info.Digest != "" && p.Info.Tag != "" && anyWildcard(patterns, p.Info.ReferenceWithTag())
}

// imageOutcome is the result of one entry for one image.
type imageOutcome struct {
	image   string
	status  review.RuleStatus
	message string
	// digest is the digest verified (or resolved for mutateDigest).
	digest string
	// warn is set for a skip that warns (skipImageReferences).
	warn bool
}

// imageRun is what one verifyImages rule found on a resource.
type imageRun struct {
	outcomes []imageOutcome
	// pins are the digest patches: pointer → registry/path:tag@digest.
	pins map[string]string
	// recorded is the annotation status per image (§2.5 step 5), keyed by
	// the reference after pinning.
	recorded map[string]string
}

// imageAction is the effective action of a verifyImages rule.
func (ev *evaluation) imageAction(r *rule) review.Action {
	if a := r.verify.action; a != nil && !ev.promoted() {
		return *a
	}
	return ev.action(r)
}

// VerifyImages runs the rule's entries over the object's images. In the
// mutating phase (mutating true) it pins digests; in the validating phase
// it also checks verifyDigest. Both phases verify, the second mostly from
// the cache: the verdict never rests on an annotation.
func (ev *evaluation) verifyImages(ctx context.Context, doc *jsoncontext.Document, r *rule, obj map[string]any, mutating bool) imageRun {
	run := imageRun{pins: map[string]string{}, recorded: map[string]string{}}
	found, err := r.verify.images(obj)
	if err != nil {
		run.outcomes = append(run.outcomes, imageOutcome{status: review.StatusError, message: extractorsFailed + ": " + err.Error()})
		return run
	}
	images := found.list
	if len(images) == 0 {
		return run
	}
	creds := loader.ImageCredentials{Namespace: ev.in.Res.Namespace, PullSecrets: found.pullSecrets, Scope: ev.readScope()}
	for _, e := range r.verify.entries {
		iv, err := ev.resolveEntry(doc, e)
		if err != nil {
			run.outcomes = append(run.outcomes, imageOutcome{status: review.StatusError, message: "failed to substitute variables: " + err.Error()})
			continue
		}
		creds.Registry = iv.ImageRegistryCredentials
		for _, img := range images {
			ref := img.Info.Reference()
			if !imageMatches(img, iv.ImageReferences) {
				continue
			}
			if imageMatches(img, iv.SkipImageReferences) {
				o := imageOutcome{image: ref, status: review.StatusSkip, warn: true,
					message: fmt.Sprintf("skipping image reference image %s, policy %s ruleName %s", ref, ev.policy.key, r.name)}
				run.outcomes = append(run.outcomes, o)
				run.recorded[ref] = "skip"
				continue
			}
			if !mutating && iv.IsVerifyDigest() && img.Info.Digest == "" {
				run.outcomes = append(run.outcomes, imageOutcome{image: ref, status: review.StatusFail, message: "missing digest for " + ref})
				continue
			}
			verifies := len(iv.Attestors) > 0 || len(iv.Attestations) > 0
			var o imageOutcome
			if verifies {
				o = ev.verifyImage(ctx, doc, r, e, iv, img, creds)
				if !mutating && o.status == review.StatusError && iv.IsRequired() {
					// An image that could not be verified is never
					// admitted when the rule requires verified images,
					// whatever the failurePolicy (§2.10, N16).
					o = imageOutcome{image: ref, status: review.StatusFail, message: "unverified image " + ref + ": " + o.message}
				}
			} else {
				o = imageOutcome{image: ref, status: review.StatusPass, message: "image verified"}
			}
			pins := mutating && iv.IsMutateDigest() && img.Info.Digest == "" && (o.status == review.StatusPass || !verifies)
			if mutating && !verifies && !pins {
				// An entry that neither verifies nor pins this image has
				// nothing to say in the mutating phase (§2.5 step 3):
				// verifyDigest and required answer in the validating one.
				continue
			}
			if pins {
				o = ev.pinDigest(ctx, img, o, creds, verifies)
				if o.digest != "" && o.status != review.StatusError {
					pinned := img.Info
					pinned.Digest = o.digest
					run.pins[img.Pointer] = pinned.ReferenceWithTag() + "@" + o.digest
					if verifies {
						ref = pinned.Reference()
					}
				}
			}
			if verifies {
				switch o.status {
				case review.StatusPass:
					run.recorded[ref] = "pass"
				case review.StatusSkip:
					run.recorded[ref] = "skip"
				default:
					run.recorded[ref] = "fail"
				}
			}
			run.outcomes = append(run.outcomes, o)
		}
	}
	return run
}

// pinDigest finds the digest to pin: the one verified, or (for an entry
// that only pins) the one the tag points to now. A verified image is
// pinned to the digest that was verified, never to a fresh resolution of
// its tag (GHSA-2r43-6962-xcw5).
func (ev *evaluation) pinDigest(ctx context.Context, img podimages.PodImage, o imageOutcome, creds loader.ImageCredentials, verified bool) imageOutcome {
	if img.Transformed {
		// Compile refuses jmesPath extractors next to mutateDigest; this
		// keeps an image that cannot be pinned from passing unpinned.
		return imageOutcome{image: o.image, status: review.StatusError, message: fmt.Sprintf("failed to update digest: %s at %s was rewritten by an image extractor's jmesPath, so no digest can be written back there", o.image, img.Pointer)}
	}
	if verified {
		if o.digest == "" {
			return imageOutcome{image: o.image, status: review.StatusError, message: "failed to update digest: no digest was verified for " + o.image}
		}
		return o
	}
	v := ev.cfg.Loaders.ImageVerifier
	if v == nil {
		return imageOutcome{image: o.image, status: review.StatusError, message: "failed to update digest: no image verifier is configured"}
	}
	d, err := v.ResolveDigest(ctx, img.Info.ReferenceWithTag(), creds)
	if err != nil {
		return imageOutcome{image: o.image, status: review.StatusError, message: "failed to update digest: " + err.Error()}
	}
	return imageOutcome{image: o.image, status: review.StatusPass, message: "mutated image digest", digest: d}
}

// resolveEntry substitutes the entry's variables, when it has any.
func (ev *evaluation) resolveEntry(doc *jsoncontext.Document, e *imageEntry) (*kyvernov1.ImageVerification, error) {
	if e.raw == nil {
		return &e.iv, nil
	}
	out, err := ev.substitute(doc, e.raw, fmt.Sprintf("/verifyImages/%d", e.index))
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	var iv kyvernov1.ImageVerification
	if err := json.Unmarshal(data, &iv); err != nil {
		return nil, err
	}
	return &iv, nil
}

// verifyImage checks one image against an entry's attestors, then its
// attestations, then its validate.deny (§2.5 step 3, §3.3, §3.4).
func (ev *evaluation) verifyImage(ctx context.Context, doc *jsoncontext.Document, r *rule, e *imageEntry, iv *kyvernov1.ImageVerification, img podimages.PodImage, creds loader.ImageCredentials) imageOutcome {
	ref := img.Info.Reference()
	v := ev.cfg.Loaders.ImageVerifier
	if v == nil {
		return imageOutcome{image: ref, status: review.StatusError, message: "failed to verify image " + ref + ": no image verifier is configured"}
	}
	base := loader.ImageCheck{Image: ref, Repository: iv.Repository, CosignOCI11: iv.CosignOCI11, Credentials: creds,
		UseCache: iv.IsUseCache(), VerifiedSince: ev.cfg.ImagesVerifiedSince, Scope: ev.policy.id + "/" + r.name}
	if iv.GetType() == kyvernov1.Notary {
		base.Type = kyvernov1.Notary
	}
	var digest string
	for i := range iv.Attestors {
		d, err := countSet(&iv.Attestors[i], fmt.Sprintf(".attestors[%d]", i), func(a *kyvernov1.Attestor, path string) (string, error) {
			c := base
			c.Attestor = *a
			if a.Repository != "" {
				c.Repository = a.Repository
			}
			res, err := v.VerifySignatures(ctx, c)
			return res.Digest, err
		})
		if err != nil {
			return failOrError(ref, "failed to verify image "+ref+": "+err.Error(), err)
		}
		if digest == "" {
			digest = d
		}
	}
	msg := "verified image signatures for " + ref
	if len(iv.Attestations) > 0 {
		idoc := doc.Child()
		idoc.Set("image", img.Info.Map())
		for i := range iv.Attestations {
			d, o := ev.verifyAttestation(ctx, idoc, e, iv, i, base, ref)
			if o != nil {
				return *o
			}
			if digest == "" {
				digest = d
			}
		}
		doc = idoc
		msg = "verified image attestations for " + ref
	}
	if e.deny != nil {
		denied, cmsg, err := ev.conditions(doc, e.deny)
		if err != nil {
			return imageOutcome{image: ref, status: review.StatusError, message: "failed to check deny conditions: " + err.Error()}
		}
		if denied {
			text := strings.Join(nonEmpty(iv.Validation.Message, cmsg), "; ")
			if text == "" {
				text = "validation error: imageVerify  failed"
			} else if s, err := ev.substituteMessage(doc, text); err == nil {
				text = s
			}
			return imageOutcome{image: ref, status: review.StatusFail, message: "validation in verifyImages failed: " + text}
		}
		msg = "verifyImages validation is passed in " + r.name + " rule"
	}
	if digest == "" {
		digest = img.Info.Digest
	}
	return imageOutcome{image: ref, status: review.StatusPass, message: msg, digest: digest}
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// failOrError is a fail, or an error when the verification could not run.
func failOrError(ref, msg string, err error) imageOutcome {
	if loader.IsImageUnavailable(err) {
		return imageOutcome{image: ref, status: review.StatusError, message: msg}
	}
	return imageOutcome{image: ref, status: review.StatusFail, message: msg}
}

// verifyAttestation checks attestations[i]: every attestor set must have
// enough entries whose statements of the type exist and meet the
// Conditions. The first statement's predicate is put in the document
// under the attestation's name.
func (ev *evaluation) verifyAttestation(ctx context.Context, doc *jsoncontext.Document, e *imageEntry, iv *kyvernov1.ImageVerification, i int, base loader.ImageCheck, ref string) (string, *imageOutcome) {
	att := &iv.Attestations[i]
	ptype := att.Type
	if ptype == "" {
		ptype = att.PredicateType
	}
	if ptype == "" {
		return "", &imageOutcome{image: ref, status: review.StatusFail, message: fmt.Sprintf(".attestations[%d]: missing type", i)}
	}
	v := ev.cfg.Loaders.ImageVerifier
	var digest string
	var named bool
	for k := range att.Attestors {
		set := &att.Attestors[k]
		d, err := countSet(set, fmt.Sprintf(".attestations[%d].attestors[%d]", i, k), func(a *kyvernov1.Attestor, path string) (string, error) {
			c := base
			c.Attestor = *a
			c.PredicateType = ptype
			if a.Repository != "" {
				c.Repository = a.Repository
			}
			res, err := v.VerifyAttestations(ctx, c)
			if err != nil {
				return "", err
			}
			if !named && att.Name != "" && len(res.Statements) > 0 {
				doc.Set(att.Name, res.Statements[0]["predicate"])
				named = true
			}
			var matching []map[string]any
			for _, s := range res.Statements {
				if statementType(c, s) == ptype {
					matching = append(matching, s)
				}
			}
			if len(matching) == 0 {
				return "", fmt.Errorf("attestions not found for predicate type %s", ptype)
			}
			for _, s := range matching {
				if err := ev.attestationConditions(doc, e.conditions[i], s, ref, ptype); err != nil {
					return "", err
				}
			}
			return res.Digest, nil
		})
		if err != nil {
			var cf *countError
			if errors.As(err, &cf) {
				msg := fmt.Sprintf("image attestations verification failed, verifiedCount: %d, requiredCount: %d, error: %s", cf.verified, cf.required, cf.Error())
				o := failOrError(ref, msg, err)
				return "", &o
			}
			o := failOrError(ref, err.Error(), err)
			return "", &o
		}
		if digest == "" {
			digest = d
		}
	}
	return digest, nil
}

// attestationConditions evaluates the conditions with the statement's
// predicate merged into the root of the document (§3.4).
func (ev *evaluation) attestationConditions(doc *jsoncontext.Document, blocks []*ConditionBlock, statement map[string]any, ref, ptype string) error {
	if len(blocks) == 0 {
		return nil
	}
	predicate, ok := statement["predicate"].(map[string]any)
	if !ok {
		return fmt.Errorf("failed to extract predicate from statement: predicate is %s, not an object", jsoncontext.KindOf(statement["predicate"]))
	}
	cdoc := doc.Child()
	for k, v := range predicate {
		cdoc.SetRoot(k, v)
	}
	for _, b := range blocks {
		ok, msg, err := ev.conditions(cdoc, b)
		if err != nil {
			return fmt.Errorf("failed to check attestations: %w", err)
		}
		if !ok {
			return fmt.Errorf("attestation checks failed for %s and predicate %s: %s", ref, ptype, msg)
		}
	}
	return nil
}

// statementType is the attestation type of a verified statement: an
// in-toto statement's predicateType, or, for a notary check, the
// artifactType of the OCI 1.1 referrer it was read from (§3.5).
func statementType(c loader.ImageCheck, statement map[string]any) string {
	key := "predicateType"
	if c.Type == kyvernov1.Notary {
		key = "type"
	}
	t, _ := statement[key].(string)
	return t
}

// countError is an attestor set that did not reach its count.
type countError struct {
	verified, required int
	errs               []string
	unavailable        error
}

func (e *countError) Error() string { return strings.Join(e.errs, "; ") }

func (e *countError) Unwrap() error { return e.unavailable }

// countSet checks the entries of a set in order until count of them (all
// when count is unset) accept the image. A publicKeys block holding
// several PEM keys counts as one entry per key (§3.3); a nested attestor
// set counts as one entry that passes when its own count is met. check
// returns the digest an entry verified. Errors carry the entry's path,
// e.g. ".attestors[0].entries[1].keyless: subject mismatch: …".
func countSet(set *kyvernov1.AttestorSet, path string, check func(a *kyvernov1.Attestor, path string) (string, error)) (string, error) {
	entries := kyvernov1.SplitPublicKeys(set.Entries)
	required := len(entries)
	if set.Count != nil && *set.Count > 0 {
		required = *set.Count
	}
	ce := &countError{required: required}
	var digest string
	for i := range entries {
		a := &entries[i]
		ep := fmt.Sprintf("%s.entries[%d]", path, i)
		var d string
		var err error
		switch {
		case a.Attestor != nil:
			var nested *kyvernov1.AttestorSet
			if nested, err = nestedAttestorSet(a); err == nil {
				d, err = countSet(nested, ep+".attestor", check)
			}
			if err != nil {
				err = fmt.Errorf("%w", err)
				ce.errs = append(ce.errs, err.Error())
			}
		default:
			d, err = check(a, ep+attestorKind(a))
			if err != nil {
				ce.errs = append(ce.errs, ep+attestorKind(a)+": "+err.Error())
			}
		}
		if err != nil {
			if loader.IsImageUnavailable(err) && ce.unavailable == nil {
				ce.unavailable = err
			}
			continue
		}
		ce.verified++
		if digest == "" {
			digest = d
		}
		if ce.verified >= required {
			return digest, nil
		}
	}
	return "", ce
}

func attestorKind(a *kyvernov1.Attestor) string {
	switch {
	case a.Keys != nil:
		return ".keys"
	case a.Certificates != nil:
		return ".certificates"
	case a.Keyless != nil:
		return ".keyless"
	}
	return ".attestor"
}

// imageRuleOutcome folds the outcomes of a rule's images into one rule
// result: error before fail before pass before skip, each with the
// messages of its images.
func imageRuleOutcome(run imageRun, validating bool) (review.Outcome, []string, bool) {
	if len(run.outcomes) == 0 {
		return review.Outcome{}, nil, false
	}
	byStatus := map[review.RuleStatus][]string{}
	var warnings []string
	for _, o := range run.outcomes {
		byStatus[o.status] = appendUnique(byStatus[o.status], o.message)
		if o.warn {
			warnings = append(warnings, o.message)
		}
	}
	for _, s := range []review.RuleStatus{review.StatusError, review.StatusFail} {
		if msgs := byStatus[s]; len(msgs) > 0 {
			return review.Outcome{Status: s, Message: strings.Join(msgs, "; ")}, warnings, true
		}
	}
	if msgs := byStatus[review.StatusPass]; len(msgs) > 0 {
		if validating {
			msg := "image verified"
			if skipped := skippedImages(run); skipped != "" {
				msg += ", skipped images: " + skipped
			}
			return review.Outcome{Status: review.StatusPass, Message: msg}, warnings, true
		}
		return review.Outcome{Status: review.StatusPass, Message: strings.Join(msgs, "; ")}, warnings, true
	}
	if validating {
		return review.Outcome{Status: review.StatusSkip, Message: "image skipped, skipped images: " + skippedImages(run)}, warnings, true
	}
	return review.Outcome{Status: review.StatusSkip, Message: strings.Join(byStatus[review.StatusSkip], "; ")}, warnings, true
}

func skippedImages(run imageRun) string {
	var out []string
	for _, o := range run.outcomes {
		if o.status == review.StatusSkip {
			out = appendUnique(out, o.image)
		}
	}
	return strings.Join(out, " ")
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// VerifyImages runs the policy's verifyImages rules in the mutating phase
// (PolicySet's verifyImagesPhase) over obj, the object as the mutate rules
// and the policies before left it: their responses, the view and the
// object with the verified images pinned to their digests, and by rule
// name the annotation status of the images each rule recorded (nil when
// none did).
func (cp *Policy) VerifyImages(ctx context.Context, in Input, env *Env, cfg *review.Options, obj map[string]any) ([]review.RuleResponse, Input, map[string]any, map[string]map[string]string) {
	var rules []review.RuleResponse
	var recorded map[string]map[string]string
	view, st := in.Views()
	var ev *evaluation
	for _, r := range cp.ruleList() {
		if r.typ != review.TypeImageVerify || r.verify == nil || !r.selects(&view.Res) {
			continue
		}
		if ev == nil || ev.in != view {
			ev = &evaluation{env: env, policy: cp, in: view, st: st, cfg: cfg, object: view.Object}
		}
		rr := review.RuleResponse{Name: r.name, Type: r.typ, Properties: r.src.ReportProperties, Action: ev.imageAction(r)}
		doc, _, final := ev.prelude(ctx, r, &rr)
		if final != nil {
			rr.Status, rr.Message = final.Status, final.Message
			rules = append(rules, rr)
			continue
		}
		run := ev.verifyImages(ctx, doc, r, obj, true)
		o, warnings, has := imageRuleOutcome(run, false)
		if !has {
			continue
		}
		rr.Status, rr.Message, rr.Warnings = o.Status, o.Message, warnings
		if rr.Status == review.StatusFail && cp.unscored {
			rr.Status = review.StatusWarn
		}
		patched, err := podimages.Patches(obj, run.pins)
		if err != nil {
			rr.Status, rr.Message = review.StatusError, "failed to update digest: "+err.Error()
		} else if len(run.pins) > 0 {
			obj = patched
			in = in.Next(obj)
			view, st = in.Views()
		}
		if len(run.recorded) > 0 {
			if recorded == nil {
				recorded = map[string]map[string]string{}
			}
			recorded[r.name] = run.recorded
		}
		rules = append(rules, rr)
		if cp.spec.GetApplyRules() == kyvernov1.ApplyOne && rr.Status != review.StatusSkip {
			break
		}
	}
	return rules, in, obj, recorded
}
