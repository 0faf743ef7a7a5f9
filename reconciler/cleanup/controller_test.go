package cleanup

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/impersonate/impersonatetest"
	"github.com/charter-dev/charter/engine/ttl"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
)

// env is a control plane with charter's CRDs.
type env struct {
	t   *testing.T
	ctx context.Context
	cfg *rest.Config
	cs  kubernetes.Interface
	cl  client.Client
	// serviceAccount is the controller's Options.ServiceAccount.
	serviceAccount string
}

func startEnv(t *testing.T, opts ...controlplane.Option) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	cp := controlplanetest.Start(ctx, t, opts...)
	e := &env{t: t, ctx: ctx, cfg: cp.RESTConfig()}
	e.cs = kubernetes.NewForConfigOrDie(e.cfg)
	var err error
	e.cl, err = client.New(e.cfg, client.Options{Scheme: testScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"charter", "team-a", "team-b"} {
		e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	// Namespaced policies of team-a and team-b delete as their
	// namespace's charter-policy, as a tenant would grant it.
	for _, ns := range []string{"team-a", "team-b"} {
		e.grantPolicyServiceAccount(ns)
	}
	return e
}

// grantPolicyServiceAccount creates the ServiceAccount namespaced policies
// of ns act as, with a namespace owner's rights (impersonatetest.Grant).
func (e *env) grantPolicyServiceAccount(ns string) {
	e.t.Helper()
	if err := impersonatetest.Grant(e.ctx, e.cl, ns); err != nil {
		e.t.Fatal(err)
	}
}

func testScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := kyvernov1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := kyvernov2.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := policiesv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// startController runs the controller under a manager, as charter serve
// does, on its own Lease; stop ends it.
func (e *env) startController(opts ...clusterstate.Option) (stop func()) {
	e.t.Helper()
	mgr, err := ctrl.NewManager(e.cfg, ctrl.Options{Scheme: testScheme(e.t), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		e.t.Fatal(err)
	}
	state, err := clusterstate.New(mgr, logr.Discard(), opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := Setup(mgr, Options{State: state, Namespace: "charter", LeaderElect: true, RetryPeriod: 500 * time.Millisecond, DiscoveryInterval: 5 * time.Second, MaxRetryDelay: 500 * time.Millisecond, ServiceAccount: e.serviceAccount}); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("manager: %v", err)
		}
	}
	e.t.Cleanup(stop)
	return stop
}

func (e *env) create(obj client.Object) {
	e.t.Helper()
	if err := e.cl.Create(e.ctx, obj); err != nil {
		e.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func (e *env) eventually(what string, within time.Duration, check func() error) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("%s: %v", what, err)
}

// gone reports nil once the ConfigMap is deleted.
func (e *env) gone(ns, name string) func() error {
	return func() error {
		err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("ConfigMap %s/%s still there (%v)", ns, name, err)
	}
}

func (e *env) exists(ns, name string) bool {
	e.t.Helper()
	err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
	return err == nil
}

func configMap(ns, name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

// eventFor returns the note of the first event with the reason regarding
// or related to the named object.
func (e *env) eventFor(reason, name string) (string, error) {
	list, err := e.cs.EventsV1().Events("").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, ev := range list.Items {
		if ev.Reason != reason {
			continue
		}
		if ev.Regarding.Name == name || (ev.Related != nil && ev.Related.Name == name) {
			return ev.Note, nil
		}
	}
	return "", fmt.Errorf("no %s event for %s", reason, name)
}

func decodePolicy[T client.Object](t *testing.T, obj T, y string) T {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(y), obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func TestController(t *testing.T) {
	e := startEnv(t)
	stop := e.startController()

	t.Run("TTL", func(t *testing.T) {
		e.t = t
		e.create(configMap("team-a", "short", map[string]string{ttl.Label: "2s"}))
		e.create(configMap("team-a", "long", map[string]string{ttl.Label: "1h"}))
		e.create(configMap("team-a", "bad", map[string]string{ttl.Label: "10ay"}))
		e.create(configMap("kube-system", "protected", map[string]string{ttl.Label: "1s"}))
		e.eventually("the expired ConfigMap deleted", 15*time.Second, e.gone("team-a", "short"))
		e.eventually("an event for the invalid TTL", 10*time.Second, func() error {
			note, err := e.eventFor(ReasonInvalidTTL, "bad")
			if err == nil && !strings.Contains(note, `"10ay" is not a duration`) {
				return fmt.Errorf("note %q", note)
			}
			return err
		})
		if _, err := e.eventFor(ReasonTTLExpired, "short"); err != nil {
			t.Error(err)
		}
		for _, name := range []string{"long", "bad"} {
			if !e.exists("team-a", name) {
				t.Errorf("team-a/%s deleted", name)
			}
		}
		if !e.exists("kube-system", "protected") {
			t.Error("kube-system/protected deleted: kube-system is excluded")
		}
	})

	t.Run("Lease", func(t *testing.T) {
		e.t = t
		if _, err := e.cs.CoordinationV1().Leases("charter").Get(e.ctx, "charter-cleanup", metav1.GetOptions{}); err != nil {
			t.Fatalf("the cleanup controller's own Lease: %v", err)
		}
	})

	t.Run("Schedule", func(t *testing.T) {
		e.t = t
		for _, cm := range []*corev1.ConfigMap{
			configMap("team-a", "purge-1", map[string]string{"purge": "yes"}),
			configMap("team-b", "purge-2", map[string]string{"purge": "yes", "size": "big"}),
			configMap("team-a", "other-label", map[string]string{"purge": "no"}),
			configMap("team-b", "keep-me", map[string]string{"purge": "yes"}),
			configMap("team-a", "big", map[string]string{"purge": "yes", "size": "huge"}),
			configMap("kube-system", "purge-3", map[string]string{"purge": "yes"}),
		} {
			e.create(cm)
		}
		e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "purge-secret", Labels: map[string]string{"purge": "yes"}}})
		e.create(decodePolicy(t, &kyvernov2.ClusterCleanupPolicy{}, `
metadata: {name: purge}
spec:
  schedule: "*/2 * * * * *"
  match:
    any:
    - resources:
        kinds: [ConfigMap]
        selector: {matchLabels: {purge: "yes"}}
  exclude:
    any:
    - resources:
        kinds: [ConfigMap]
        names: [keep-*]
  conditions:
    all:
    - key: "{{ target.metadata.labels.size || 'small' }}"
      operator: AnyNotIn
      value: [huge]
`))
		e.eventually("the matched ConfigMaps deleted", 15*time.Second, func() error {
			if err := e.gone("team-a", "purge-1")(); err != nil {
				return err
			}
			return e.gone("team-b", "purge-2")()
		})
		for _, k := range []client.ObjectKey{{Namespace: "team-a", Name: "other-label"}, {Namespace: "team-b", Name: "keep-me"}, {Namespace: "team-a", Name: "big"}, {Namespace: "kube-system", Name: "purge-3"}} {
			if !e.exists(k.Namespace, k.Name) {
				t.Errorf("%s deleted, outside the policy's match", k)
			}
		}
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "team-a", Name: "purge-secret"}, &corev1.Secret{}); err != nil {
			t.Errorf("the Secret (a kind the policy does not name): %v", err)
		}
		e.eventually("status", 10*time.Second, func() error {
			var p kyvernov2.ClusterCleanupPolicy
			if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "purge"}, &p); err != nil {
				return err
			}
			ready := findCondition(p.Status.Conditions, ConditionReady)
			if p.Status.LastExecutionTime == nil || ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != ReasonSucceeded {
				return fmt.Errorf("status %+v", p.Status)
			}
			return nil
		})
		if note, err := e.eventFor(ReasonPolicyApplied, "purge-1"); err != nil || note != "successfully cleaned up the target resource ConfigMap/team-a/purge-1" {
			t.Errorf("deletion event: %q, %v", note, err)
		}
	})

	t.Run("NamespacedAndDryRun", func(t *testing.T) {
		e.t = t
		e.create(configMap("team-a", "ns-a", map[string]string{"scope": "ns"}))
		e.create(configMap("team-b", "ns-b", map[string]string{"scope": "ns"}))
		e.create(configMap("team-b", "dry", map[string]string{"scope": "dry"}))
		e.create(decodePolicy(t, &kyvernov2.CleanupPolicy{}, `
metadata: {name: own, namespace: team-a}
spec:
  schedule: "*/2 * * * * *"
  match:
    any:
    - resources:
        kinds: [ConfigMap]
        selector: {matchLabels: {scope: ns}}
`))
		e.create(decodePolicy(t, &kyvernov2.ClusterCleanupPolicy{}, `
metadata: {name: rehearsal, annotations: {charter.dev/dry-run: "true"}}
spec:
  schedule: "*/2 * * * * *"
  match:
    any:
    - resources:
        kinds: [ConfigMap]
        selector: {matchLabels: {scope: dry}}
`))
		e.eventually("the namespaced policy's ConfigMap deleted", 15*time.Second, e.gone("team-a", "ns-a"))
		e.eventually("a dry-run event", 10*time.Second, func() error {
			_, err := e.eventFor(ReasonDryRun, "dry")
			return err
		})
		if !e.exists("team-b", "ns-b") {
			t.Error("team-b/ns-b deleted by a CleanupPolicy of team-a")
		}
		if !e.exists("team-b", "dry") {
			t.Error("team-b/dry deleted by a dry-run policy")
		}
	})

	t.Run("NamespacedPolicyClusterScopedKind", func(t *testing.T) {
		e.t = t
		e.create(decodePolicy(t, &kyvernov2.CleanupPolicy{}, `
metadata: {name: namespaces, namespace: team-b}
spec:
  schedule: "*/2 * * * * *"
  match: {any: [{resources: {kinds: [Namespace]}}]}
`))
		e.eventually("Ready=False naming the cluster-scoped kind", 10*time.Second, func() error {
			var p kyvernov2.CleanupPolicy
			if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "team-b", Name: "namespaces"}, &p); err != nil {
				return err
			}
			c := findCondition(p.Status.Conditions, ConditionReady)
			if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, `kind "Namespace" is cluster-scoped`) {
				return fmt.Errorf("status %+v", p.Status)
			}
			return nil
		})
		if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "team-b"}, &corev1.Namespace{}); err != nil {
			t.Errorf("Namespace team-b: %v", err)
		}
	})

	t.Run("InvalidPolicyStalled", func(t *testing.T) {
		e.t = t
		// No webhook runs here, so the API server stores what admission
		// would refuse.
		e.create(decodePolicy(t, &kyvernov2.ClusterCleanupPolicy{}, `
metadata: {name: broken}
spec:
  schedule: "every minute"
  match: {any: [{resources: {kinds: [ConfigMap]}}]}
`))
		e.eventually("Stalled", 10*time.Second, func() error {
			var p kyvernov2.ClusterCleanupPolicy
			if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "broken"}, &p); err != nil {
				return err
			}
			c := findCondition(p.Status.Conditions, ConditionStalled)
			if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "spec.schedule") {
				return fmt.Errorf("status %+v", p.Status)
			}
			return nil
		})
	})

	t.Run("NewCRD", func(t *testing.T) {
		e.t = t
		// A kind created after the controller started is watched within
		// seconds: the CRD's creation triggers discovery.
		preserve := true
		e.create(&apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}}},
			},
		})
		w := &unstructured.Unstructured{}
		w.SetAPIVersion("example.com/v1")
		w.SetKind("Widget")
		w.SetNamespace("team-a")
		w.SetName("w")
		w.SetLabels(map[string]string{ttl.Label: "1s"})
		e.eventually("the Widget created", 15*time.Second, func() error { return e.cl.Create(e.ctx, w) })
		e.eventually("the expired Widget deleted", 15*time.Second, func() error {
			err := e.cl.Get(e.ctx, client.ObjectKeyFromObject(w), w.DeepCopy())
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("Widget still there (%v)", err)
		})
	})

	t.Run("FailingPolicyIsNeverDropped", func(t *testing.T) {
		e.t = t
		// Its kind does not exist yet: every run fails, and is retried
		// (Kyverno drops the key after ten failures) until the CRD comes.
		// The other failing policy goes first, so the requeues counted
		// are this one's.
		if err := e.cl.Delete(e.ctx, &kyvernov2.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "namespaces"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		before := seriesValue(t, "kyverno_controller_requeue_total", "controller_name", "cleanup-controller")
		e.create(decodePolicy(t, &kyvernov2.ClusterCleanupPolicy{}, `
metadata: {name: gadgets}
spec:
  schedule: "*/2 * * * * *"
  match: {any: [{resources: {kinds: [example.com/v1/Gadget]}}]}
`))
		e.eventually("Ready=False with the run's error", 10*time.Second, func() error {
			var p kyvernov2.ClusterCleanupPolicy
			if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "gadgets"}, &p); err != nil {
				return err
			}
			c := findCondition(p.Status.Conditions, ConditionReady)
			if c == nil || c.Reason != ReasonRunFailed || !strings.Contains(c.Message, `kind "example.com/v1/Gadget"`) {
				return fmt.Errorf("status %+v", p.Status)
			}
			return nil
		})
		e.eventually("a dozen failed runs", 40*time.Second, func() error {
			if n := seriesValue(t, "kyverno_controller_requeue_total", "controller_name", "cleanup-controller") - before; n < 12 {
				return fmt.Errorf("%v requeues", n)
			}
			return nil
		})
		preserve := true
		e.create(&apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}}},
			},
		})
		g := &unstructured.Unstructured{}
		g.SetAPIVersion("example.com/v1")
		g.SetKind("Gadget")
		g.SetNamespace("team-a")
		g.SetName("g")
		e.eventually("the Gadget created", 15*time.Second, func() error { return e.cl.Create(e.ctx, g) })
		e.eventually("the Gadget deleted by the policy that kept failing", 20*time.Second, func() error {
			err := e.cl.Get(e.ctx, client.ObjectKeyFromObject(g), g.DeepCopy())
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("Gadget still there (%v)", err)
		})
		if v := seriesValue(t, "kyverno_controller_drop_total", "controller_name", "cleanup-controller"); v != 0 {
			t.Errorf("kyverno_controller_drop_total = %v", v)
		}
	})

	t.Run("Metrics", func(t *testing.T) {
		e.t = t
		for _, m := range []struct{ name, label, value string }{
			{"kyverno_ttl_controller_deletedobjects_total", "resource_resource", "configmaps"},
			{"kyverno_ttl_controller_info", "resource_resource", "configmaps"},
			{"kyverno_cleanup_controller_deletedobjects_total", "policy_name", "purge"},
			{"kyverno_controller_reconcile_total", "controller_name", "cleanup-controller"},
			{"kyverno_controller_reconcile_total", "controller_name", "v1/configmaps"},
			{"kyverno_controller_reconcile_total", "controller_name", "example.com/v1/widgets"},
		} {
			if v := seriesValue(t, m.name, m.label, m.value); v < 1 {
				t.Errorf("%s{%s=%q} = %v, want at least 1", m.name, m.label, m.value, v)
			}
		}
	})

	t.Run("RestartKeepsDeadlines", func(t *testing.T) {
		e.t = t
		stop()
		e.create(configMap("team-b", "while-down", map[string]string{ttl.Label: "1s"}))
		time.Sleep(2 * time.Second)
		if !e.exists("team-b", "while-down") {
			t.Fatal("deleted while no controller ran")
		}
		e.startController()
		e.eventually("the ConfigMap that expired while the controller was down deleted", 15*time.Second, e.gone("team-b", "while-down"))
	})
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// seriesValue sums the series of a metric in controller-runtime's
// registry whose label has the value.
func seriesValue(t *testing.T, name, label, value string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return sum
}
