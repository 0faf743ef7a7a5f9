package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/api/versions"
	"github.com/charter-dev/charter/clusterstate/loaders"
	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/unsupported"
)

// policyValidate refuses a policy of any kind and served version that
// does not compile (policycheck.Object: every check of Kyverno's policy
// validation, docs/policy-validation.md), or a GlobalContextEntry whose
// spec is invalid (what Kyverno's /globalcontextvalidate checks), with
// field-path errors, e.g.
//
//	ClusterPolicy "x": spec.rules[2].validate.pattern.spec.containers[0]: unknown anchor "~(x)"
//
// so an invalid policy never reaches the cluster. The warnings Kyverno
// gives when it admits a policy (deprecated operators, ...) are returned
// with the response.
//
// A policy that uses a feature charter cannot run in the cluster
// (unsupported.Features) is refused when that feature's rule
// enforces, with each field and "not supported by charter", so it never
// looks enforced while doing nothing; when the rule can only audit, it is
// admitted with one warning per feature (its results are errors, and its
// status says Unsupported). Rules without a failure action (generate,
// mutate) and cleanup policies count as enforcing: see
// unsupported.Features.
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
	gvk := schema.GroupVersionKind{Group: ar.Kind.Group, Version: ar.Kind.Version, Kind: ar.Kind.Kind}
	checked, err := checkPolicyObject(gvk, ar.Object, h.opts.Cluster)
	if err != nil {
		writeResponse(w, denied(ar.UID, err.Error()))
		return
	}
	found := checked.Unsupported
	if msg := h.namespacedHTTP(ar.Kind.Group, ar.Kind.Kind, ar.Object); msg != "" {
		writeResponse(w, denied(ar.UID, msg))
		return
	}
	found = found.In(unsupported.InCluster)
	if enforced := found.Enforced(); len(enforced) > 0 {
		writeResponse(w, denied(ar.UID, enforced.Error()))
		return
	}
	warnings := checked.Warnings
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
	for _, u := range found {
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

// checkPolicyObject decodes a policy object of a served kind and version
// strictly, as its hub type, and checks it with policycheck.InCluster, the
// check the GitOps pre-apply check and the CLI make too, with what only
// the cluster can tell (the kinds it serves) when cluster is set. It
// returns what the check found beyond faults. A kind charter does not
// serve is not ours to judge (the webhook configuration sends only the
// served ones).
func checkPolicyObject(gvk schema.GroupVersionKind, raw []byte, cluster policycheck.Cluster) (policycheck.Result, error) {
	// The object names its own version; the request's kind may leave it
	// out.
	var probe struct{ APIVersion, Kind string }
	if json.Unmarshal(raw, &probe) == nil && probe.APIVersion != "" && probe.Kind != "" {
		if gv, err := schema.ParseGroupVersion(probe.APIVersion); err == nil {
			gvk = gv.WithKind(probe.Kind)
		}
	}
	if !versions.Served(gvk) {
		return policycheck.Result{}, nil
	}
	obj, err := versions.Decode(gvk, raw)
	if err != nil {
		return policycheck.Result{}, fmt.Errorf("%s %q: %w", gvk.Kind, objectName(raw), err)
	}
	return policycheck.InCluster(obj, cluster)
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
