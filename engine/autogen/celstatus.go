package autogen

import (
	"encoding/json"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// podControllerKinds are the kinds of the Pod controllers autogen targets,
// by resource.
var podControllerKinds = map[string]string{
	"daemonsets": "DaemonSet", "deployments": "Deployment", "replicasets": "ReplicaSet",
	"statefulsets": "StatefulSet", "jobs": "Job", "cronjobs": "CronJob",
}

// Configs returns a ValidatingPolicy's, MutatingPolicy's or
// ImageValidatingPolicy's copies for Pod controllers as Kyverno publishes
// them in status.autogen.configs, by name ("defaults", "cronjobs"): the
// copies the engine compiles and the webhooks register, each with the
// kinds it targets. It returns nil for other policies and for policies
// with no copies.
func Configs(p kyvernov1.PolicyInterface) (map[string]policiesv1.AutogenConfig, error) {
	type copyOf struct {
		name string
		spec any
		mc   *admissionregistrationv1.MatchResources
	}
	var copies []copyOf
	switch p := p.(type) {
	case policiesv1.ValidatingPolicyLike:
		for _, ag := range ValidatingPolicy(p.GetValidatingPolicySpec()) {
			copies = append(copies, copyOf{ag.Name, ag.Spec, ag.Spec.MatchConstraints})
		}
	case policiesv1.MutatingPolicyLike:
		for _, ag := range MutatingPolicy(p.GetMutatingPolicySpec()) {
			copies = append(copies, copyOf{ag.Name, ag.Spec, ag.Spec.MatchConstraints})
		}
	case policiesv1.ImageValidatingPolicyLike:
		for _, ag := range ImageValidatingPolicy(p.GetImageValidatingPolicySpec()) {
			// Kyverno's CRD defaults validationConfigurations in the spec
			// its copies are made of; charter leaves the spec as applied
			// and publishes the values it acts on.
			md, vd, rq := ag.Spec.MutateDigest(), ag.Spec.VerifyDigest(), ag.Spec.Required()
			ag.Spec.ValidationConfigurations = &policiesv1.ValidationConfiguration{MutateDigest: &md, VerifyDigest: &vd, Required: &rq}
			copies = append(copies, copyOf{ag.Name, ag.Spec, ag.Spec.MatchConstraints})
		}
	}
	if len(copies) == 0 {
		return nil, nil
	}
	out := make(map[string]policiesv1.AutogenConfig, len(copies))
	for _, c := range copies {
		raw, err := json.Marshal(c.spec)
		if err != nil {
			return nil, fmt.Errorf("status.autogen.configs.%s.spec: %w", c.name, err)
		}
		out[c.name] = policiesv1.AutogenConfig{Targets: autogenTargets(c.mc), Spec: &runtime.RawExtension{Raw: raw}}
	}
	return out, nil
}

// autogenTargets lists the kinds an autogen copy's resource rules select.
func autogenTargets(mc *admissionregistrationv1.MatchResources) []policiesv1.AutogenTarget {
	if mc == nil {
		return nil
	}
	var out []policiesv1.AutogenTarget
	for _, r := range mc.ResourceRules {
		for _, g := range r.APIGroups {
			for _, v := range r.APIVersions {
				for _, res := range r.Resources {
					out = append(out, policiesv1.AutogenTarget{Group: g, Version: v, Resource: res, Kind: podControllerKinds[res]})
				}
			}
		}
	}
	return out
}
