package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/api/strict"
	"github.com/charter-dev/charter/clusterstate/globalcontext"
	"github.com/charter-dev/charter/clusterstate/loaders"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/generate"
)

// policyValidate refuses a ClusterPolicy, Policy, PolicyException,
// CleanupPolicy or ClusterCleanupPolicy that does not compile, or a
// GlobalContextEntry whose spec is invalid (what Kyverno's
// /globalcontextvalidate checks), with field-path errors, e.g.
//
//	ClusterPolicy "x": spec.rules[2].validate.pattern.spec.containers[0]: unknown anchor "~(x)"
//
// so an invalid policy never reaches the cluster.
//
// A policy that uses a feature charter cannot run in the cluster
// (engine.UnsupportedFeatures) is refused when that feature's rule
// enforces, with each field and "not supported by charter", so it never
// looks enforced while doing nothing; when the rule can only audit, it is
// admitted with one warning per feature (its results are errors, and its
// status says Unsupported). Rules without a failure action (generate,
// mutate) and cleanup policies count as enforcing: see
// engine.UnsupportedFeatures.
//
// An update of a ClusterPolicy or Policy that changes an immutable field
// of a kept generate rule is refused, naming the rule and the fields; one
// that changes a generate rule's target is admitted with a warning saying
// what becomes of the objects generated from the old target
// (generate.CheckUpdate).
//
// Deletes and subresource requests (status) are allowed untouched.
func (h *handlers) policyValidate(w http.ResponseWriter, r *http.Request) {
	var review rawReview
	if err := decodeReview(r, h.opts.MaxRequestBytes, &review); err != nil {
		writeError(w, err)
		return
	}
	ar := review.Request
	if ar.SubResource != "" || len(ar.Object) == 0 || string(ar.Object) == "null" {
		writeResponse(w, allowed(ar.UID, nil))
		return
	}
	check := checkPolicyObject
	if ar.Kind.Group == policiesv1.Group {
		check = checkCELPolicyObject
	}
	unsupported, err := check(ar.Kind.Kind, ar.Object)
	if err != nil {
		writeResponse(w, denied(ar.UID, err.Error()))
		return
	}
	if msg := h.namespacedHTTP(ar.Kind.Group, ar.Kind.Kind, ar.Object); msg != "" {
		writeResponse(w, denied(ar.UID, msg))
		return
	}
	unsupported = unsupported.In(engine.InCluster)
	if enforced := unsupported.Enforced(); len(enforced) > 0 {
		writeResponse(w, denied(ar.UID, enforced.Error()))
		return
	}
	var warnings []string
	if ar.Operation == admissionv1.Update && ar.Kind.Group == kyvernov1.GroupVersion.Group {
		updateWarnings, err := checkGenerateUpdate(ar.Kind.Kind, ar.OldObject, ar.Object)
		if err != nil {
			writeResponse(w, denied(ar.UID, err.Error()))
			return
		}
		warnings = append(warnings, updateWarnings...)
	}
	if w := h.untrustedException(ar.Kind.Kind, ar.Object); w != "" {
		warnings = append(warnings, w)
	}
	for _, u := range unsupported {
		warnings = append(warnings, u.Error()+"; admitted as its rule only audits, and its status shows Ready=False, reason Unsupported")
	}
	writeResponse(w, allowed(ar.UID, warnings))
}

// namespacedHTTP refuses a namespaced policy that calls out, unless the
// process allows it (HTTPInNamespacedPolicies): a policies.kyverno.io
// Namespaced* policy whose expressions call the CEL http library, as
// Kyverno refuses it without --allowHTTPInNamespacedPolicies, and a
// kyverno.io Policy or CleanupPolicy with an apiCall service URL in any
// context: a namespace's policy must not make charter call out on its
// behalf (loaders.NamespacedCallFaults, which the GitOps pre-apply check
// asks too). It names the policy and every field, e.g. Policy "shop/x":
// spec.rules[0].context[1].apiCall.service.url: a namespaced policy may
// not call out (...); "" admits.
func (h *handlers) namespacedHTTP(group, kind string, raw []byte) string {
	if h.opts.HTTPInNamespacedPolicies {
		return ""
	}
	var obj map[string]any
	if json.Unmarshal(raw, &obj) != nil {
		return ""
	}
	faults := loaders.NamespacedCallFaults(group, kind, obj)
	if len(faults) == 0 {
		return ""
	}
	msgs := make([]string, len(faults))
	for i, f := range faults {
		msgs[i] = fmt.Sprintf("%s %q: %s", kind, objectName(raw), f)
	}
	return strings.Join(msgs, "; ")
}

// untrustedException warns, as Kyverno does ("PolicyException resource
// namespace must match the defined namespace"), that a PolicyException
// from a namespace the process does not trust will be ignored. It is
// admitted all the same: trust is the process's setting, and a later
// --exception-namespaces may honour it.
func (h *handlers) untrustedException(kind string, raw []byte) string {
	trusted := h.opts.ExceptionNamespaces
	if kind != "PolicyException" || trusted == nil {
		return ""
	}
	ex := &kyvernov2.PolicyException{}
	if err := json.Unmarshal(raw, ex); err != nil || trusted.Trusts(ex.Namespace) {
		return ""
	}
	return trusted.IgnoredReason(ex)
}

// checkGenerateUpdate judges the generate rules of a ClusterPolicy or
// Policy update (generate.CheckUpdate). The new object compiled already;
// an old object that does not decode is not judged.
func checkGenerateUpdate(kind string, oldRaw, newRaw []byte) ([]string, error) {
	if kind != "ClusterPolicy" && kind != "Policy" || len(oldRaw) == 0 {
		return nil, nil
	}
	var oldPolicy, newPolicy kyvernov1.ClusterPolicy
	if json.Unmarshal(oldRaw, &oldPolicy) != nil || json.Unmarshal(newRaw, &newPolicy) != nil {
		return nil, nil
	}
	warnings, err := generate.CheckUpdate(oldPolicy.Spec.Rules, newPolicy.Spec.Rules)
	prefix := fmt.Sprintf("%s %q: ", kind, objectName(newRaw))
	for i := range warnings {
		warnings[i] = prefix + warnings[i]
	}
	if err != nil {
		return nil, fmt.Errorf("%s%w", prefix, err)
	}
	return warnings, nil
}

// checkPolicyObject decodes a policy object strictly and compiles it. It
// returns the features of a valid policy that charter cannot run.
func checkPolicyObject(kind string, raw []byte) (engine.UnsupportedList, error) {
	switch kind {
	case "ClusterPolicy", "Policy":
		var p kyvernov1.PolicyInterface = &kyvernov1.ClusterPolicy{}
		if kind == "Policy" {
			p = &kyvernov1.Policy{}
		}
		if err := strict.Unmarshal(raw, p); err != nil {
			return nil, fmt.Errorf("%s %q: %w", kind, objectName(raw), err)
		}
		set, err := engine.Compile([]kyvernov1.PolicyInterface{p})
		if err := compileError(err); err != nil {
			return nil, err
		}
		return set.Unsupported(), nil
	case "ClusterCleanupPolicy", "CleanupPolicy":
		var p kyvernov2.CleanupPolicyInterface = &kyvernov2.ClusterCleanupPolicy{}
		if kind == "CleanupPolicy" {
			p = &kyvernov2.CleanupPolicy{}
		}
		if err := strict.Unmarshal(raw, p); err != nil {
			return nil, fmt.Errorf("%s %q: %w", kind, objectName(raw), err)
		}
		// The schedule is parsed by the very parser the cleanup
		// controller runs it with (engine/schedule).
		if _, err := engine.CompileCleanupPolicy(p); err != nil {
			return nil, err
		}
		return engine.UnsupportedFeatures(p), nil
	case kyvernov2alpha1.GlobalContextEntryKind:
		gce := &kyvernov2alpha1.GlobalContextEntry{}
		if err := strict.Unmarshal(raw, gce); err != nil {
			return nil, fmt.Errorf("%s %q: %w", kind, objectName(raw), err)
		}
		if faults := globalcontext.Check(&gce.Spec); len(faults) > 0 {
			return nil, fmt.Errorf("%s %q: %s", kind, objectName(raw), strings.Join(faults, "; "))
		}
		return nil, nil
	case "PolicyException":
		ex := &kyvernov2.PolicyException{}
		if err := strict.Unmarshal(raw, ex); err != nil {
			return nil, fmt.Errorf("%s %q: %w", kind, objectName(raw), err)
		}
		_, err := engine.Compile(nil, engine.WithExceptions([]*kyvernov2.PolicyException{ex}))
		return nil, compileError(err)
	}
	// The webhook configuration sends only the kinds above; anything else
	// is not ours to judge.
	return nil, nil
}

// checkCELPolicyObject decodes a policies.kyverno.io object strictly and
// compiles it.
func checkCELPolicyObject(kind string, raw []byte) (engine.UnsupportedList, error) {
	var p kyvernov1.PolicyInterface
	switch kind {
	case policiesv1.ValidatingPolicyKind:
		p = &policiesv1.ValidatingPolicy{}
	case policiesv1.NamespacedValidatingPolicyKind:
		p = &policiesv1.NamespacedValidatingPolicy{}
	case policiesv1.MutatingPolicyKind:
		p = &policiesv1.MutatingPolicy{}
	case policiesv1.NamespacedMutatingPolicyKind:
		p = &policiesv1.NamespacedMutatingPolicy{}
	case policiesv1.GeneratingPolicyKind:
		p = &policiesv1.GeneratingPolicy{}
	case policiesv1.NamespacedGeneratingPolicyKind:
		p = &policiesv1.NamespacedGeneratingPolicy{}
	case policiesv1.ImageValidatingPolicyKind:
		p = &policiesv1.ImageValidatingPolicy{}
	case policiesv1.NamespacedImageValidatingPolicyKind:
		p = &policiesv1.NamespacedImageValidatingPolicy{}
	case policiesv1.DeletingPolicyKind, policiesv1.NamespacedDeletingPolicyKind:
		var dp kyvernov2.CleanupPolicyInterface = &policiesv1.DeletingPolicy{}
		if kind == policiesv1.NamespacedDeletingPolicyKind {
			dp = &policiesv1.NamespacedDeletingPolicy{}
		}
		if err := strict.Unmarshal(raw, dp); err != nil {
			return nil, fmt.Errorf("%s %q: %w", kind, objectName(raw), err)
		}
		// Compiled as the cleanup controller compiles it: the schedule
		// that is admitted is the one that runs.
		_, err := engine.CompileCleanupPolicy(dp)
		return nil, compileError(err)
	case policiesv1.PolicyExceptionKind:
		ex := &policiesv1.PolicyException{}
		if err := strict.Unmarshal(raw, ex); err != nil {
			return nil, fmt.Errorf("%s %q: %w", kind, objectName(raw), err)
		}
		_, err := engine.Compile(nil, engine.WithCELExceptions([]*policiesv1.PolicyException{ex}))
		return nil, compileError(err)
	default:
		return nil, nil
	}
	if err := strict.Unmarshal(raw, p); err != nil {
		return nil, fmt.Errorf("%s %q: %w", kind, objectName(raw), err)
	}
	set, err := engine.Compile([]kyvernov1.PolicyInterface{p})
	if err := compileError(err); err != nil {
		return nil, err
	}
	return set.Unsupported(), nil
}

// compileError returns the compile faults, or nil when there are none.
func compileError(err error) error {
	var faults engine.CompileErrors
	if errors.As(err, &faults) && len(faults) == 0 {
		return nil
	}
	return err
}

// objectName returns metadata.name of a raw object for error messages,
// or "" when it cannot be read.
func objectName(raw []byte) string {
	var probe struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return ""
	}
	if probe.Metadata.Namespace != "" {
		return probe.Metadata.Namespace + "/" + probe.Metadata.Name
	}
	return probe.Metadata.Name
}
