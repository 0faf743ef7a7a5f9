package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/charter-dev/charter/api/charter"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/webhook/events"
	"github.com/charter-dev/charter/webhook/promotion"
)

// PathPromotion answers the promotion webhook: Namespace CREATE and
// UPDATE requests where the old or new Namespace carries
// charter.dev/enforcement (see webhook/config).
const PathPromotion = "/promotion"

// PromotionGate decides whether a namespace may be labelled
// charter.dev/enforcement=enforce, given the staged policies that apply
// there (*promotion.Gate). It returns the denial, or "" to admit.
type PromotionGate interface {
	Check(ctx context.Context, namespace string, staged []promotion.Policy) (string, error)
	// DowngradeDenial returns the denial of user moving the namespace
	// from enforce to newValue (audit, or "" for the label removed), or
	// "" to admit it.
	DowngradeDenial(namespace, user, newValue string) string
}

// eventOfferer queues Events off the admission path (events.Sink).
type eventOfferer interface {
	Offer(events.Batch) bool
}

// routePromotion serves PathPromotion when a gate is configured; without
// one the webhook configuration never points there.
func (h *handlers) routePromotion(mux *http.ServeMux) {
	if h.opts.Promotion == nil {
		return
	}
	hf := http.HandlerFunc(h.promotion)
	if h.opts.Null {
		hf = h.null
	}
	mux.Handle(PathPromotion, recoverPanics(hf, h.opts.Log))
}

// promotion gates a Namespace's move to charter.dev/enforcement=enforce
// on its reports. Only the transition is gated: a namespace already
// enforcing may be edited freely, and dropping the label or setting it
// to audit needs no proof. A value other than audit or enforce is refused
// when it is set, so a typo ("Enforce") never silently leaves a namespace
// in Audit. A gate that cannot read the reports refuses: it must not open
// without looking.
func (h *handlers) promotion(w http.ResponseWriter, r *http.Request) {
	var review rawReview
	if err := decodeReview(r, h.opts.MaxRequestBytes, &review); err != nil {
		writeError(w, err)
		return
	}
	ar := review.Request
	if ar.Kind.Kind != "Namespace" || ar.SubResource != "" {
		writeResponse(w, allowed(ar.UID, nil))
		return
	}
	name, newValue, err := enforcementLabel(ar.Object)
	if err != nil {
		writeResponse(w, denied(ar.UID, fmt.Sprintf("decoding Namespace %q: %v", ar.Name, err)))
		return
	}
	if name == "" {
		name = ar.Name
	}
	_, oldValue, _ := enforcementLabel(ar.OldObject)
	if oldValue == charter.EnforcementEnforce && (newValue == "" || newValue == charter.EnforcementAudit) {
		h.downgrade(w, ar, name, newValue)
		return
	}
	switch {
	case newValue == oldValue || newValue == "" || newValue == charter.EnforcementAudit:
		writeResponse(w, allowed(ar.UID, nil))
		return
	case newValue != charter.EnforcementEnforce:
		writeResponse(w, denied(ar.UID, fmt.Sprintf("namespace %q: label %s=%q: want %q or %q",
			name, charter.EnforcementLabel, newValue, charter.EnforcementAudit, charter.EnforcementEnforce)))
		return
	}
	staged := stagedPolicies(h.opts.Policies.Snapshot(), name)
	if len(staged) == 0 {
		// Nothing to gate, and nothing the label will change: say so,
		// rather than let the namespace look promoted.
		writeResponse(w, allowed(ar.UID, []string{noStagedPolicyWarning(name)}))
		return
	}
	ctx, cancel := h.requestContext(r)
	defer cancel()
	denial, err := h.opts.Promotion.Check(ctx, name, staged)
	switch {
	case err != nil:
		writeResponse(w, denied(ar.UID, fmt.Sprintf("namespace %q cannot be labelled %s=%s now: %v",
			name, charter.EnforcementLabel, charter.EnforcementEnforce, err)))
	case denial != "":
		writeResponse(w, denied(ar.UID, denial))
	default:
		writeResponse(w, allowed(ar.UID, nil))
	}
}

// downgrade answers a namespace's move from enforce back to Audit: refused
// under --promotion-downgrade=deny, else admitted with a Warning Event on
// the Namespace naming the user, so the move leaves a trace (a dry run
// leaves none).
func (h *handlers) downgrade(w http.ResponseWriter, ar *admissionRequest[json.RawMessage], namespace, newValue string) {
	user := ar.UserInfo.Username
	if denial := h.opts.Promotion.DowngradeDenial(namespace, user, newValue); denial != "" {
		writeResponse(w, denied(ar.UID, denial))
		return
	}
	if o, ok := h.opts.Events.(eventOfferer); ok && !ar.dryRun() {
		o.Offer(events.List{{
			Regarding: corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: namespace, UID: namespaceUID(ar.OldObject)},
			Reason:    events.ReasonEnforcementDowngraded, Action: "Enforcement Downgraded",
			Note: promotion.DowngradeNote(namespace, user, newValue),
		}})
	}
	writeResponse(w, allowed(ar.UID, nil))
}

// namespaceUID reads a Namespace's UID from its raw object.
func namespaceUID(raw json.RawMessage) types.UID {
	var ns struct {
		Metadata struct {
			UID types.UID `json:"uid"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &ns)
	return ns.Metadata.UID
}

// noStagedPolicyWarning is the admission warning for a namespace labelled
// enforce while no staged policy applies to it.
func noStagedPolicyWarning(namespace string) string {
	return fmt.Sprintf("namespace %q labelled %s=%s, but no staged policy applies to it (no ClusterPolicy, and no Policy in %q, is labelled %s=%s): nothing is enforced there until one is",
		namespace, charter.EnforcementLabel, charter.EnforcementEnforce, namespace, charter.StagedLabel, charter.StagedValue)
}

// enforcementLabel reads a Namespace's name and charter.dev/enforcement
// label from its raw object; an absent object has neither.
func enforcementLabel(raw json.RawMessage) (name, value string, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", "", nil
	}
	var ns struct {
		Metadata struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &ns); err != nil {
		return "", "", err
	}
	return ns.Metadata.Name, ns.Metadata.Labels[charter.EnforcementLabel], nil
}

// stagedPolicies are the installed staged policies that apply in the
// namespace: every staged ClusterPolicy, and the staged Policies of that
// namespace.
func stagedPolicies(s *policycache.Snapshot, namespace string) []promotion.Policy {
	var out []promotion.Policy
	for _, p := range s.Policies() {
		src := p.Source()
		if !charter.IsStaged(src.GetLabels()) || (src.IsNamespaced() && src.GetNamespace() != namespace) {
			continue
		}
		out = append(out, promotion.Policy{Kind: src.GetKind(), Key: p.Key(), FailClosed: src.GetSpec().GetFailurePolicy() != kyvernov1.Ignore})
	}
	return out
}
