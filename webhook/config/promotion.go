package config

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/charter-dev/charter/api/charter"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// PromotionWebhook gates Namespaces' move to charter.dev/enforcement=enforce
// (DESIGN.md, Flows 6) on the server's /promotion path.
const PromotionWebhook = "promotion.charter.svc"

// anyStaged reports whether some policy that runs at admission is staged
// for enforcement: only then does the enforcement label change anything,
// and only then is it gated.
func anyStaged(policies []kyvernov1.PolicyInterface) bool {
	for _, p := range policies {
		if charter.IsStaged(p.GetLabels()) && p.GetSpec().AdmissionProcessingEnabled() {
			return true
		}
	}
	return false
}

// promotionWebhook routes Namespace CREATE and UPDATE to /promotion when
// the old or the new Namespace carries charter.dev/enforcement (the API
// server matches an objectSelector against both), so ordinary namespace
// writes never reach charter. It fails closed: a gate that cannot be
// asked must not open. The price is that, while charter is down, a
// namespace carrying the label cannot be edited (it can still be deleted:
// DELETE is not routed); the namespaceSelector leaves kube-system and
// charter's own namespace alone as everywhere else.
func (s Settings) promotionWebhook() admissionregistrationv1.ValidatingWebhook {
	fp := admissionregistrationv1.Fail
	sideEffects := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	timeout := DefaultTimeoutSeconds
	cluster := admissionregistrationv1.ClusterScope
	return admissionregistrationv1.ValidatingWebhook{
		Name: PromotionWebhook, ClientConfig: s.Target.clientConfig("/promotion", s.CABundle),
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
				Resources: []string{"namespaces"}, Scope: &cluster},
		}},
		FailurePolicy: &fp, MatchPolicy: &equivalent, NamespaceSelector: s.namespaceSelector(),
		ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: charter.EnforcementLabel, Operator: metav1.LabelSelectorOpExists}}},
		SideEffects: &sideEffects, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
	}
}
