package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/webhook/status"
)

// paramsPolicy limits the containers of a Pod to the maxContainers of the
// ConfigMap "limits" of the Pod's namespace; a missing ConfigMap denies.
const paramsPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: container-limit
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: max-containers
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      cel:
        paramKind: {apiVersion: v1, kind: ConfigMap}
        paramRef: {name: limits, parameterNotFoundAction: Deny}
        expressions:
        - expression: "object.spec.containers.size() <= int(params.data.maxContainers)"
          messageExpression: "'at most ' + params.data.maxContainers + ' containers'"
`

func limits(ns, maxContainers string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: ns}, Data: map[string]string{"maxContainers": maxContainers}}
}

func twoContainers(ns string) *corev1.Pod {
	p := podIn("two", ns, nil)
	p.Spec.Containers = []corev1.Container{{Name: "a", Image: "nginx:1.27"}, {Name: "b", Image: "nginx:1.27"}}
	return p
}

// TestParamsOnRealAPIServer: validate.cel params come from the param
// kind's informer: the ConfigMap's data decides, an update of it changes
// the verdict with no policy change, and a missing param under Deny fails
// closed.
func TestParamsOnRealAPIServer(t *testing.T) {
	f := startAdmission(t, withNamespaces("shop", "bare"), withObjects(limits("shop", "1")),
		withOptions(func(o *Options) { o.Events.Disabled = true }))
	ctx, cl := f.ctx, f.client
	f.installReady(t, paramsPolicy)

	verdict := func(ns string) error { return cl.Create(ctx, twoContainers(ns), client.DryRunAll) }
	denied := func(ns, want string) func() error {
		return deniedBy("validate.charter.svc-fail", want, func() error { return verdict(ns) })
	}
	t.Run("the param's data denies", func(t *testing.T) {
		eventually(t, "denied by limits", 30*time.Second, denied("shop", "at most 1 containers"))
	})
	t.Run("an update of the param admits, with no policy change", func(t *testing.T) {
		cm := &corev1.ConfigMap{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "limits"}, cm); err != nil {
			t.Fatal(err)
		}
		cm.Data["maxContainers"] = "2"
		if err := cl.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		eventually(t, "admitted after the update", 30*time.Second, func() error { return verdict("shop") })
		cm.Data["maxContainers"] = "1"
		if err := cl.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		eventually(t, "denied again", 30*time.Second, denied("shop", "at most 1 containers"))
	})
	t.Run("a missing param under Deny fails closed", func(t *testing.T) {
		eventually(t, "denied without params", 30*time.Second, denied("bare", "no params found for v1 ConfigMap"))
		if err := cl.Create(ctx, limits("bare", "5")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "admitted once the param exists", 30*time.Second, func() error { return verdict("bare") })
	})
}

// TestParamsForbiddenOnRealAPIServer: a param kind charter may not list
// makes its policy not Ready, naming the verb, group and resource, and
// its requests are denied, never silently admitted.
func TestParamsForbiddenOnRealAPIServer(t *testing.T) {
	f := startAdmission(t, withNamespaces("shop"), withObjects(limits("shop", "5")),
		withOptions(func(o *Options) {
			o.Events.Disabled = true
			o.StatusResync = 500 * time.Millisecond
		}),
		// charter reads params as a user with no rights of its own.
		withStateOption(func(admin *rest.Config) clusterstate.Option {
			cfg := rest.CopyConfig(admin)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: "charter-without-grants", Groups: []string{"system:authenticated"}}
			return clusterstate.WithParamsConfig(cfg)
		}))
	ctx, cl := f.ctx, f.client
	p := &kyvernov1.ClusterPolicy{}
	eventually(t, "policy created", 30*time.Second, func() error {
		var fresh kyvernov1.ClusterPolicy
		if err := yaml.UnmarshalStrict([]byte(paramsPolicy), &fresh); err != nil {
			t.Fatal(err)
		}
		return cl.Create(ctx, &fresh)
	})
	const want = `forbidden: charter may not list configmaps of API group "" (core), which a paramKind names; ` +
		`grant it with a ClusterRole labelled rbac.charter.dev/aggregate-to-admission: "true" and rbac.charter.dev/aggregate-to-reports: "true"`
	eventually(t, "policy not Ready, Forbidden", 30*time.Second, func() error {
		if err := cl.Get(ctx, client.ObjectKey{Name: "container-limit"}, p); err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, kyvernov1.PolicyConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != status.ReasonForbidden || c.Message != want {
			return fmt.Errorf("Ready condition %+v", c)
		}
		return nil
	})
	// Within the limit, yet denied: the param cannot be read.
	eventually(t, "request denied", 30*time.Second, func() error {
		err := cl.Create(ctx, twoContainers("shop"), client.DryRunAll)
		if err == nil {
			return errNotYet("admitted")
		}
		if !strings.Contains(err.Error(), "forbidden: charter may not list configmaps") {
			return err
		}
		return nil
	})
}
