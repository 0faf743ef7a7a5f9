package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// cleanupPodsPolicy is a cleanup policy of KIND (ClusterCleanupPolicy or
// CleanupPolicy) deleting the Pod named stale.
const cleanupPodsPolicy = `
apiVersion: kyverno.io/v2
kind: KIND
metadata: {name: stale-pods, namespace: NAMESPACE}
spec:
  schedule: "0 * * * *"
  match:
    any:
    - resources: {kinds: [Pod], names: [stale]}
`

// TestClusterCleanupPolicyNeedsTheCleanupControllersRights: as Kyverno
// refuses a cleanup policy matching a kind its cleanup controller may
// not delete or list, /policyvalidate asks the real API server's RBAC
// (SubjectAccessReviews for charter-cleanup, delete first, then list) and
// refuses the ClusterCleanupPolicy naming the kind's field in Kyverno's
// words; once a ClusterRole grants delete it is refused for list, once it
// grants list too it is admitted. The namespaced CleanupPolicy is
// admitted all along: charter deletes for it as its namespace's
// charter-policy ServiceAccount, whose rights meet it when it runs.
func TestClusterCleanupPolicyNeedsTheCleanupControllersRights(t *testing.T) {
	const sa = "charter-cleanup"
	f := startAdmission(t, withNamespaces("team"), withAdminOptions(func(admin *rest.Config, o *Options) {
		o.CleanupDeleter = controllerIdentity(admin, sa)
	}))
	create := func(kind string) error {
		doc := strings.NewReplacer("KIND", kind, "NAMESPACE", map[bool]string{true: "team", false: `""`}[kind == "CleanupPolicy"]).Replace(cleanupPodsPolicy)
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		err := f.client.Create(f.ctx, obj)
		if err == nil {
			_ = f.client.Delete(f.ctx, obj)
		}
		return err
	}
	refused := func(want string) func() error {
		return func() error {
			err := create("ClusterCleanupPolicy")
			if err == nil {
				return fmt.Errorf("admitted; want a refusal with %q", want)
			}
			if !strings.Contains(err.Error(), want) {
				return fmt.Errorf("%v; want %q", err, want)
			}
			return nil
		}
	}
	const field = "spec.match.any[0].resources.kinds[0]: "
	eventually(t, "refused for delete", 30*time.Second, refused(field+"cleanup controller has no permission to delete kind Pod"))
	eventually(t, "namespaced CleanupPolicy admitted", 30*time.Second, func() error { return create("CleanupPolicy") })

	grant := func(verbs ...string) {
		t.Helper()
		grantClusterRole(t, f, "cleanup-pods-"+strings.Join(verbs, "-"), sa, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: verbs})
	}
	grant("delete")
	eventually(t, "refused for list once delete is granted", 30*time.Second, refused(field+"cleanup controller has no permission to list kind Pod"))
	grant("list")
	eventually(t, "admitted once delete and list are granted", 30*time.Second, func() error { return create("ClusterCleanupPolicy") })
}
