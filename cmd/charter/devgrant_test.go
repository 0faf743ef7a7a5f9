package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/clusterstate/impersonate"
)

// mutateExistingPolicy is Kyverno's e2e test
// namespaced-mutating-policies/existing/background-scan's policy: a
// background-only NamespacedMutatingPolicy labelling a ConfigMap of its
// namespace.
const mutateExistingPolicy = `
apiVersion: policies.kyverno.io/v1beta1
kind: NamespacedMutatingPolicy
metadata:
  name: label-cm
  namespace: team-a
spec:
  evaluation:
    admission:
      enabled: false
    background:
      enabled: true
    mutateExisting:
      enabled: true
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [configmaps]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: Object.metadata.labels{background: "scan"}}}
`

// TestDevNamespacedPolicyRole: with --namespaced-policy-role, a namespace
// created after charter dev started gets the ServiceAccount charter acts
// as for its policies, bound to the ClusterRole, and a namespaced
// mutate-existing policy there labels the ConfigMap, as Kyverno's e2e test
// expects (without the grant charter writes nothing: the ServiceAccount
// does not exist). A ClusterRole that does not exist is refused, naming it.
func TestDevNamespacedPolicyRole(t *testing.T) {
	out, interrupt := startDevUntil(t, "kubeconfig: ", "dev", "--crds", crdDir(t), "--no-sync", "--namespaced-policy-role=cluster-admin")
	defer interrupt()
	cfg := devRESTConfig(t, out.String())
	ctx := context.Background()
	cl := devTestClient(t, cfg)
	kube := kubernetes.NewForConfigOrDie(cfg)

	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "team-a"}, Data: map[string]string{"key": "value"}}
	if err := cl.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	var policy unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(mutateExistingPolicy), &policy.Object); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, &policy); err != nil {
		t.Fatal(err)
	}

	// Minutes: the background controller retries a forbidden write at
	// its resync (a minute in dev), and the machine may be loaded.
	deadline := time.Now().Add(4 * time.Minute)
	for {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			t.Fatal(err)
		}
		if cm.Labels["background"] == "scan" {
			break
		}
		if time.Now().After(deadline) {
			_ = cl.Get(ctx, client.ObjectKeyFromObject(&policy), &policy)
			status, _, _ := unstructured.NestedMap(policy.Object, "status")
			t.Fatalf("the ConfigMap was not labelled within 4 minutes: %v; policy status %v", cm.Labels, status)
		}
		time.Sleep(time.Second)
	}
	rb, err := kube.RbacV1().RoleBindings("team-a").Get(ctx, impersonate.DefaultServiceAccount, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rb.RoleRef.Name != "cluster-admin" || len(rb.Subjects) != 1 || rb.Subjects[0].Name != impersonate.DefaultServiceAccount ||
		rb.Labels["app.kubernetes.io/managed-by"] != devGrantManagedBy {
		t.Errorf("RoleBinding team-a/%s: %+v", impersonate.DefaultServiceAccount, rb)
	}

	missing := namespacedPolicyGrant{kube: kube, serviceAccount: impersonate.DefaultServiceAccount, clusterRole: "no-such-role", log: logr.Discard()}
	if err := missing.start(ctx); err == nil || !strings.Contains(err.Error(), "--namespaced-policy-role no-such-role") || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a ClusterRole that does not exist: %v", err)
	}
}
