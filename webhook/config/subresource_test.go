package config

import (
	"reflect"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// discoveredCore is what discovery reports for Pods and Deployments and
// some of their subresources.
func discoveredCore() *DiscoveryResolver {
	d := &DiscoveryResolver{}
	for _, e := range []struct {
		group, resource, kind, sub string
	}{
		{"", "pods", "Pod", ""}, {"", "pods/exec", "Pod", "exec"}, {"", "pods/attach", "Pod", "attach"},
		{"", "pods/status", "Pod", "status"}, {"", "pods/ephemeralcontainers", "Pod", "ephemeralcontainers"},
		{"apps", "deployments", "Deployment", ""}, {"apps", "deployments/scale", "Deployment", "scale"},
	} {
		d.entries = append(d.entries, discovered{Resource: Resource{Group: e.group, Version: "v1", Resource: e.resource, Namespaced: true},
			kind: e.kind, sub: e.sub})
	}
	return d
}

// A policy's kinds with a subresource register that subresource, with the
// operations validate rules default to (CONNECT among them) or the ones
// the policy names.
func TestBuildRegistersSubresources(t *testing.T) {
	all := []admissionregistrationv1.OperationType{"CONNECT", "CREATE", "DELETE", "UPDATE"}
	connect := []admissionregistrationv1.OperationType{"CONNECT"}
	tests := []struct {
		name  string
		kinds []string
		ops   []kyvernov1.AdmissionOperation
		want  map[string][]admissionregistrationv1.OperationType // resource -> operations
	}{
		{"Pod/exec with default operations", []string{"Pod/exec"}, nil, map[string][]admissionregistrationv1.OperationType{"pods/exec": all}},
		{"Pod/exec on CONNECT", []string{"Pod/exec"}, []kyvernov1.AdmissionOperation{"CONNECT"},
			map[string][]admissionregistrationv1.OperationType{"pods/exec": connect}},
		{"Pod.exec spelling", []string{"Pod.exec"}, []kyvernov1.AdmissionOperation{"CONNECT"},
			map[string][]admissionregistrationv1.OperationType{"pods/exec": connect}},
		{"group/version/Kind/subresource", []string{"apps/v1/Deployment/scale"}, nil,
			map[string][]admissionregistrationv1.OperationType{"deployments/scale": all}},
		// * also matches no subresource, in the engine as here.
		{"a wildcard subresource registers the Pod and every subresource", []string{"Pod/*"}, []kyvernov1.AdmissionOperation{"CONNECT"},
			map[string][]admissionregistrationv1.OperationType{"pods": connect, "pods/attach": connect, "pods/ephemeralcontainers": connect,
				"pods/exec": connect, "pods/status": connect}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfgs, err := Build([]kyvernov1.PolicyInterface{clusterPolicy("p", validateRule(tc.ops, tc.kinds...), nil)},
				discoveredCore(), Settings{Target: Target{URL: "https://127.0.0.1:9443"}})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]admissionregistrationv1.OperationType{}
			for _, w := range cfgs.Validating.Webhooks {
				for _, r := range w.Rules {
					for _, res := range r.Resources {
						got[res] = r.Operations
					}
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("registered %v, want %v", got, tc.want)
			}
			if len(cfgs.Unresolved) > 0 {
				t.Errorf("unresolved %v", cfgs.Unresolved)
			}
		})
	}
}
