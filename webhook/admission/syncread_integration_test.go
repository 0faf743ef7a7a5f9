package admission

import (
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/rest"
)

// syncReadPolicies are a ClusterPolicy and a Policy whose generate rules
// synchronize ConfigMaps, and a ClusterPolicy whose rule does not.
const syncReadPolicies = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: sync-configmap}
spec:
  rules:
  - name: gen
    match: {any: [{resources: {kinds: [Secret]}}]}
    generate:
      synchronize: true
      apiVersion: v1
      kind: ConfigMap
      name: generated
      namespace: team
      data: {data: {a: b}}
---
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: sync-configmap, namespace: team}
spec:
  rules:
  - name: gen
    match: {any: [{resources: {kinds: [Secret]}}]}
    generate:
      synchronize: true
      apiVersion: v1
      kind: ConfigMap
      name: generated
      namespace: team
      data: {data: {a: b}}
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: once-configmap}
spec:
  rules:
  - name: gen
    match: {any: [{resources: {kinds: [Secret]}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: generated
      namespace: team
      data: {data: {a: b}}
`

// TestSynchronizedGenerateNeedsAdmissionsReads: as Kyverno refuses a
// synchronized generate rule whose kind its admission controller may not
// list and get, /policyvalidate asks the real API server's RBAC
// (SubjectAccessReviews for the identity serving admission, here the
// ServiceAccount charter-admission) and refuses the ClusterPolicy and the
// Policy naming the rule's field, the identity, the verbs it lacks and
// the resource; granted list, they are refused for get; granted get too,
// both are admitted. A rule without synchronize is admitted all along:
// nothing is asked of it.
func TestSynchronizedGenerateNeedsAdmissionsReads(t *testing.T) {
	const sa = "charter-admission"
	username := serviceaccount.MakeUsername(charterNamespace, sa)
	f := startAdmission(t, withNamespaces("team"), withAdminOptions(func(admin *rest.Config, o *Options) {
		o.AdmissionReader = controllerIdentity(admin, sa)
	}))
	probe := newPolicyProbe(t, f, syncReadPolicies)
	lacks := func(verbs string) string {
		return `spec.rules[0].generate: ` + username + ` requires permissions ` + verbs + ` for resource v1/ConfigMap in namespace team`
	}

	eventually(t, "synchronized ClusterPolicy refused", 30*time.Second, probe.refused("ClusterPolicy/sync-configmap", `ClusterPolicy "sync-configmap": `+lacks("list,get")))
	eventually(t, "synchronized Policy refused", 30*time.Second, probe.refused("Policy/sync-configmap", `Policy "team/sync-configmap": `+lacks("list,get")))
	eventually(t, "generate without synchronize admitted", 30*time.Second, probe.admitted("ClusterPolicy/once-configmap"))

	grantClusterRole(t, f, "admission-list-configmaps", sa, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}})
	eventually(t, "refused for get once list is granted", 30*time.Second, probe.refused("ClusterPolicy/sync-configmap", lacks("get")))

	grantClusterRole(t, f, "admission-get-configmaps", sa, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}})
	eventually(t, "ClusterPolicy admitted once granted", 30*time.Second, probe.admitted("ClusterPolicy/sync-configmap"))
	eventually(t, "Policy admitted once granted", 30*time.Second, probe.admitted("Policy/sync-configmap"))
}
