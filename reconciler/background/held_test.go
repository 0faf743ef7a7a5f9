package background

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestPolicyThatStopsCompilingKeepsItsObjects: on a real API server, a
// synchronized generate policy edited into one that does not compile
// (generateExistingOnPolicyUpdate is refused) is held, not treated as
// deleted: its NetworkPolicy stays, the very object, and stays when the
// policy is fixed. Deleted while it does not compile, the policy's
// synchronized objects go, as for any deleted policy.
func TestPolicyThatStopsCompilingKeepsItsObjects(t *testing.T) {
	e := startEnv(t)
	e.namespace("held")
	e.startController(Options{})
	const name = "held-default-deny"
	valid := func(p *kyvernov1.ClusterPolicy) {
		p.Name = name
		p.Spec.Rules[0].MatchResources.Any[0].ResourceDescription.Names = []string{"held"}
	}
	broken := func(p *kyvernov1.ClusterPolicy) {
		valid(p)
		p.Spec.GenerateExistingOnPolicyUpdate = ptr.To(true)
	}
	e.applyPolicy("default-deny.yaml", valid)
	var uid types.UID
	e.eventually("the NetworkPolicy generated", func() error {
		np, err := e.networkPolicy("held")
		if err == nil {
			uid = np.UID
		}
		return err
	})
	// marker applies a second policy generating ConfigMap <n> in held:
	// once that exists, the controller has compiled every policy change
	// made before it.
	marker := func(n string) {
		t.Helper()
		e.applyPolicy("default-deny.yaml", func(p *kyvernov1.ClusterPolicy) {
			valid(p)
			p.Name = n
			g := p.Spec.Rules[0].Generation
			g.Kind, g.APIVersion, g.Name = "ConfigMap", "v1", n
			g.RawData = &apiextv1.JSON{Raw: []byte(`{"data":{"marker":"` + n + `"}}`)}
		})
		e.eventually("marker ConfigMap "+n, func() error {
			return e.cl.Get(e.ctx, client.ObjectKey{Namespace: "held", Name: n}, &corev1.ConfigMap{})
		})
	}
	sameNetworkPolicy := func(when string) {
		t.Helper()
		// policiesChanged deletes right after it queues the marker's
		// work: give a wrong deletion time to land.
		for range 20 {
			np, err := e.networkPolicy("held")
			if err != nil {
				t.Fatalf("%s: NetworkPolicy: %v", when, err)
			}
			if np.UID != uid {
				t.Fatalf("%s: NetworkPolicy was re-created (uid %s, first %s)", when, np.UID, uid)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	e.applyPolicy("default-deny.yaml", broken)
	marker("held-marker-1")
	sameNetworkPolicy("after an edit that does not compile")

	e.applyPolicy("default-deny.yaml", valid)
	marker("held-marker-2")
	sameNetworkPolicy("after the fix")

	e.applyPolicy("default-deny.yaml", broken)
	marker("held-marker-3")
	sameNetworkPolicy("after a second edit that does not compile")
	if err := e.cl.Delete(e.ctx, &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the NetworkPolicy of the deleted policy deleted", func() error {
		if _, err := e.networkPolicy("held"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("NetworkPolicy still there (err %v)", err)
		}
		return nil
	})
}
