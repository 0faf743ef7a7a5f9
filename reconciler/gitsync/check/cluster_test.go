package check

import (
	"context"
	"errors"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

// fakeDiscovery serves Pods (with exec), Namespaces, apps/v1 Deployments
// (with scale) and ClusterRoles, as an API server's discovery lists them.
func fakeDiscovery() discovery.DiscoveryInterface {
	return &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Kind: "Pod", Namespaced: true},
			{Name: "pods/exec", Kind: "PodExecOptions", Namespaced: true},
			{Name: "namespaces", Kind: "Namespace"},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Kind: "Deployment", Namespaced: true},
			{Name: "deployments/scale", Kind: "Scale", Group: "autoscaling", Version: "v1", Namespaced: true},
		}},
		{GroupVersion: "rbac.authorization.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "clusterroles", Kind: "ClusterRole"},
		}},
	}}}
}

// TestRevisionCRDsCountAsServed: a revision that brings a
// CustomResourceDefinition and a policy on its kind applies, as the API
// server will serve the kind once the CRD is applied; the same policy
// without the CRD is refused, naming the file and the kind's field, as
// policy admission refuses it.
func TestRevisionCRDsCountAsServed(t *testing.T) {
	crd := object(t, "crds/widget.yaml", `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    subresources: {scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}}
`)
	policy := object(t, "policies/widgets.yaml", `
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: widgets, namespace: team}
spec:
  background: false
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod, example.com/v1/Widget, Widget/scale]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`)
	cluster := Cluster(policycheck.NewDiscoveryCluster(fakeDiscovery()))
	if err := Objects([]build.Object{crd, policy}, testScheme(), cluster); err != nil {
		t.Fatalf("a revision with the CRD of its policy's kind is refused: %v", err)
	}
	err := Objects([]build.Object{policy}, testScheme(), cluster)
	var revErr *Error
	if !errors.As(err, &revErr) || len(revErr.Faults) != 2 {
		t.Fatalf("got %v, want the two Widget kinds refused", err)
	}
	for i, field := range []string{"spec.rules[0].match.any[0].resources.kinds[1]", "spec.rules[0].match.any[0].resources.kinds[2]"} {
		if f := revErr.Faults[i]; f.File != "policies/widgets.yaml" || f.Field != field {
			t.Errorf("fault %d = %v, want one in policies/widgets.yaml at %s", i, f, field)
		}
	}
}

// object reads one object as the build package returns it from file.
func object(t *testing.T, file, doc string) build.Object {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatal(err)
	}
	return build.Object{Unstructured: &unstructured.Unstructured{Object: obj}, File: file}
}

// denyAll refuses everything.
type denyAll struct{}

func (denyAll) Allowed(context.Context, authorizationv1.ResourceAttributes) (bool, string, error) {
	return false, "", nil
}

// TestRevisionAsksWhatAdmissionAsks: the revision's cluster passes on
// what policy admission asks beyond the kinds served: a
// ClusterCleanupPolicy matching a kind the cleanup controller may not
// delete is a fault naming the file and field, a policy matching a kind
// the reports controller may not read a warning naming the file.
func TestRevisionAsksWhatAdmissionAsks(t *testing.T) {
	cleanup := object(t, "cleanup/pods.yaml", `
apiVersion: kyverno.io/v2
kind: ClusterCleanupPolicy
metadata: {name: pods}
spec:
  schedule: "0 * * * *"
  match: {any: [{resources: {kinds: [Pod]}}]}
`)
	policy := object(t, "policies/pods.yaml", `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: pods}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Namespace]}}]}
    validate: {failureAction: Audit, pattern: {metadata: {name: "?*"}}}
`)
	deny := &policycheck.Writer{User: "controller", Access: denyAll{}}
	cluster := Cluster(policycheck.NewDiscoveryCluster(fakeDiscovery()).WithCleanupDeleter(deny).WithReportsReader(deny))
	var warnings []Fault
	err := Objects([]build.Object{cleanup, policy}, testScheme(), cluster, Warnings(&warnings))
	var revErr *Error
	if !errors.As(err, &revErr) || len(revErr.Faults) != 1 {
		t.Fatalf("got %v, want the cleanup policy refused", err)
	}
	if f := revErr.Faults[0]; f.File != "cleanup/pods.yaml" || f.Field != "spec.match.any[0].resources.kinds[0]" || f.Message != "cleanup controller has no permission to delete kind Pod" {
		t.Errorf("fault %v", f)
	}
	if len(warnings) != 1 || warnings[0].File != "policies/pods.yaml" || warnings[0].Message != "controller requires permissions get,list,watch for resource v1/Namespace" {
		t.Errorf("warnings %v", warnings)
	}
}
