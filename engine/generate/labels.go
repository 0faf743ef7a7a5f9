package generate

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Label keys Kyverno v1.19 puts on generated objects
// (mutate-generate-semantics.md §8.4). charter writes the same keys so that
// downstream objects created by Kyverno and by charter are found and
// reconciled the same way, and so `kyverno test` expectations hold.
const (
	LabelManagedBy       = "app.kubernetes.io/managed-by"
	LabelPolicyName      = "generate.kyverno.io/policy-name"
	LabelPolicyNamespace = "generate.kyverno.io/policy-namespace"
	LabelRuleName        = "generate.kyverno.io/rule-name"
	LabelTriggerGroup    = "generate.kyverno.io/trigger-group"
	LabelTriggerVersion  = "generate.kyverno.io/trigger-version"
	LabelTriggerKind     = "generate.kyverno.io/trigger-kind"
	LabelTriggerNS       = "generate.kyverno.io/trigger-namespace"
	LabelTriggerUID      = "generate.kyverno.io/trigger-uid"

	// Labels of clones (clone and cloneList) naming their source. There is no
	// source-name label: Kyverno never sets one.
	LabelSourceGroup   = "generate.kyverno.io/source-group"
	LabelSourceVersion = "generate.kyverno.io/source-version"
	LabelSourceKind    = "generate.kyverno.io/source-kind"
	LabelSourceNS      = "generate.kyverno.io/source-namespace"
	LabelSourceUID     = "generate.kyverno.io/source-uid"

	// LabelCloneSource marks a clone source (value ""). Kyverno puts it on
	// the source object before copying it, so every clone carries it too.
	LabelCloneSource = "generate.kyverno.io/clone-source"

	// ManagedBy is the value of LabelManagedBy. It stays Kyverno's value:
	// kyverno test defaults an absent managed-by label to it when comparing,
	// and tools that look for Kyverno-generated objects query it.
	ManagedBy = "kyverno"

	// LabelPrefix is the prefix of every generate.kyverno.io label.
	LabelPrefix = "generate.kyverno.io/"
)

// ownerLabels returns the labels that tie a generated object to the policy,
// rule and trigger it was generated for.
func ownerLabels(p PolicyRef, rule string, t ObjectRef) map[string]string {
	gv, _ := schema.ParseGroupVersion(t.APIVersion)
	return map[string]string{
		LabelManagedBy:       ManagedBy,
		LabelPolicyName:      p.Name,
		LabelPolicyNamespace: p.Namespace,
		LabelRuleName:        rule,
		LabelTriggerGroup:    gv.Group,
		LabelTriggerVersion:  gv.Version,
		LabelTriggerKind:     t.Kind,
		LabelTriggerNS:       t.Namespace,
		LabelTriggerUID:      string(t.UID),
	}
}

// sourceLabels returns the labels a clone carries about its source.
func sourceLabels(src ObjectRef) map[string]string {
	gv, _ := schema.ParseGroupVersion(src.APIVersion)
	return map[string]string{
		LabelSourceGroup:   gv.Group,
		LabelSourceVersion: gv.Version,
		LabelSourceKind:    src.Kind,
		LabelSourceNS:      src.Namespace,
		LabelSourceUID:     string(src.UID),
		LabelCloneSource:   "",
	}
}

// setLabels writes labels into obj's metadata.labels, overwriting labels of
// the same name: a policy author cannot spoof ownership labels.
func setLabels(obj map[string]any, labels ...map[string]string) {
	meta := metadataOf(obj)
	existing, _ := meta["labels"].(map[string]any)
	out := make(map[string]any, len(existing)+12)
	for k, v := range existing {
		out[k] = v
	}
	for _, set := range labels {
		for k, v := range set {
			out[k] = v
		}
	}
	meta["labels"] = out
}

// DownstreamLabels are the labels that find what a policy generated for a
// trigger (§8.5: policy name and namespace, managed-by, and the trigger's
// uid, namespace, kind, group and version), for a controller that deletes
// downstream objects when the trigger goes away. rule narrows the set to
// one rule when not empty.
func DownstreamLabels(policy PolicyRef, rule string, trigger ObjectRef) labels.Set {
	all := ownerLabels(policy, rule, trigger)
	if rule == "" {
		delete(all, LabelRuleName)
	}
	return labels.Set(all)
}

// CloneLabels are the labels that find the clones of a source object, for a
// controller that re-syncs them when the source changes or deletes them when
// it goes away.
func CloneLabels(source ObjectRef) labels.Set {
	all := sourceLabels(source)
	delete(all, LabelCloneSource)
	return labels.Set(all)
}
