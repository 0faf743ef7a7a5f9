package cleanup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/engine/ttl"
	"github.com/charter-dev/charter/internal/controlplane"
)

// TestTTLWithShippedRights runs the cleanup controller as its
// ServiceAccount with the rights config/rbac/cleanup ships, on a real API
// server whose kube-controller-manager aggregates ClusterRoles: like
// Kyverno's cleanup controller with its chart's defaults, it may delete no
// ConfigMap, so an expired TTL leaves one in place (Kyverno's
// ttl/permission-lack); a ClusterRole labelled as Kyverno's tests label
// their grants (rbac.kyverno.io/aggregate-to-cleanup-controller) widens it,
// and the ConfigMap goes.
func TestTTLWithShippedRights(t *testing.T) {
	e := startEnv(t, controlplane.WithControllerManager())
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"service_account.yaml", "role.yaml", "role_binding.yaml", "aggregate.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "cleanup", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---\n") {
			var obj unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if obj.GetKind() == "" {
				continue
			}
			if err := e.cl.Create(e.ctx, &obj); err != nil {
				t.Fatalf("%s: creating %s %s: %v", f, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	admin := e.cfg
	e.cfg = rest.CopyConfig(admin)
	e.cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:charter:charter-cleanup",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:charter", "system:authenticated"}}
	e.startController()

	e.create(configMap("team-a", "expired", map[string]string{ttl.Label: "1s"}))
	// Two rediscoveries (DiscoveryInterval 5s) with the shipped rights.
	time.Sleep(12 * time.Second)
	if !e.exists("team-a", "expired") {
		t.Fatal("the cleanup controller deleted a ConfigMap with the shipped rights, which let it delete none (as Kyverno's defaults)")
	}

	e.create(&rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "grant-configmaps", Labels: map[string]string{"rbac.kyverno.io/aggregate-to-cleanup-controller": "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "delete"}}},
	})
	e.eventually("the expired ConfigMap deleted once granted", 90*time.Second, e.gone("team-a", "expired"))
}
