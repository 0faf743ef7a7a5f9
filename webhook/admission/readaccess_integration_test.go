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

// secretsAuditPolicy audits Secrets, which the reports controller must
// read to scan.
const secretsAuditPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: secrets-labelled}
spec:
  rules:
  - name: team
    match: {any: [{resources: {kinds: [Secret]}}]}
    validate:
      failureAction: Audit
      pattern: {metadata: {labels: {team: "?*"}}}
`

// TestPolicyReadsWarnWithoutTheReportsControllersRights: as Kyverno warns
// of a validate rule matching a kind its reports controller may not get,
// list and watch, /policyvalidate asks the real API server's RBAC
// (SubjectAccessReviews for charter-reports) and admits the policy with
// the warning naming the ServiceAccount, the verbs and the resource; once
// a ClusterRole grants them, without it.
func TestPolicyReadsWarnWithoutTheReportsControllersRights(t *testing.T) {
	const sa = "charter-reports"
	f := startAdmission(t, withAdminOptions(func(admin *rest.Config, o *Options) {
		o.ReportsReader = controllerIdentity(admin, sa)
	}))
	cl, warnings := f.warningClient(t)
	var policy unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(secretsAuditPolicy), &policy.Object); err != nil {
		t.Fatal(err)
	}
	readWarnings := func() ([]string, error) {
		return warnings.dryRun(f.ctx, cl, policy.DeepCopy(), "system:serviceaccount:")
	}
	want := "system:serviceaccount:" + charterNamespace + ":" + sa + " requires permissions get,list,watch for resource v1/Secret"
	eventually(t, "warned", 30*time.Second, func() error {
		got, err := readWarnings()
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0] != want {
			return fmt.Errorf("warnings %q, want %q", got, want)
		}
		return nil
	})
	grantClusterRole(t, f, "reports-secrets", sa, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}})
	eventually(t, "not warned once granted", 30*time.Second, func() error {
		got, err := readWarnings()
		if err != nil {
			return err
		}
		if len(got) > 0 {
			return fmt.Errorf("warnings %s", strings.Join(got, "; "))
		}
		return nil
	})
}
