package background

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestSameNameGeneratingPolicies: a ClusterPolicy and a GeneratingPolicy
// of one name both generate for a new namespace, each through its own
// UpdateRequest (requestType generate and Kyverno's cel-generate, both
// naming the policy by its name), and each one's object, deleted, is
// brought back by its own policy although the downstream labels name no
// kind.
func TestSameNameGeneratingPolicies(t *testing.T) {
	e := startEnv(t)
	e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond})
	e.applyPolicy("samename-cpol.yaml", nil)
	e.createCELPolicies("samename-gpol.yaml")

	ns := e.namespace("both")
	e.admit(kyvernov1.Create, ns, nil)
	var types []string
	for _, ur := range e.updateRequests() {
		if ur.Spec.Policy != "same-gen" {
			t.Errorf("UpdateRequest spec.policy %q, want the bare name", ur.Spec.Policy)
		}
		types = append(types, string(ur.Spec.Type))
	}
	sort.Strings(types)
	if strings.Join(types, " ") != "cel-generate generate" {
		t.Errorf("UpdateRequest types %v, want one generate and one cel-generate", types)
	}
	configMap := func(name, from string) func() error {
		return func() error {
			var cm corev1.ConfigMap
			if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "both", Name: name}, &cm); err != nil {
				return err
			}
			if cm.Data["from"] != from || cm.Labels["generate.kyverno.io/policy-name"] != "same-gen" {
				return fmt.Errorf("data %v, labels %v", cm.Data, cm.Labels)
			}
			return nil
		}
	}
	for _, c := range []struct{ name, from string }{{"from-cpol", "cpol"}, {"from-gpol", "gpol"}} {
		e.eventually(c.name+" generated", configMap(c.name, c.from))
	}
	for _, c := range []struct{ name, from string }{{"from-gpol", "gpol"}, {"from-cpol", "cpol"}} {
		if err := e.cl.Delete(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "both", Name: c.name}}); err != nil {
			t.Fatal(err)
		}
		e.eventually("synchronize: "+c.name+" is back", configMap(c.name, c.from))
	}
}
