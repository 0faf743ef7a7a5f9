package globalcontext

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/loaders"
	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
)

func testScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kyvernov1.AddToScheme, kyvernov2.AddToScheme,
		kyvernov2alpha1.AddToScheme, policiesv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// restrictedUser may read GlobalContextEntries and the ConfigMaps of
// namespace platform, nothing else: charter's store reads as this user.
const restrictedUser = "charter-restricted"

func grants() []client.Object {
	subject := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: restrictedUser}}
	return []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "entries"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"kyverno.io"}, Resources: []string{"globalcontextentries"}, Verbs: []string{"list", "watch"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "entries"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "entries"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "configmaps", Namespace: "platform"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "configmaps", Namespace: "platform"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmaps"}},
	}
}

// TestStatusOnRealAPIServer: each GlobalContextEntry's conditions say
// whether policies can read it and, when not, why, naming what and
// where; an API call that recovers makes its entry Ready again.
func TestStatusOnRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := controlplanetest.Start(ctx, t)
	sch := testScheme(t)
	cl, err := client.New(cp.RESTConfig(), client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}
	objs := append([]client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}}}, grants()...)
	for _, o := range objs {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var failing atomic.Bool
	failing.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if failing.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"registries": ["ghcr.io"]}`))
	}))
	defer srv.Close()

	cases := []struct {
		name, spec string
		// want is the Ready condition's status and reason, and a part of
		// its message.
		status             metav1.ConditionStatus
		reason, message    string
		stalled, refreshed bool
	}{
		{name: "configmaps", spec: `kubernetesResource: {version: v1, resource: configmaps, namespace: platform}`,
			status: metav1.ConditionTrue, reason: kyvernov2alpha1.ReasonSucceeded, message: "watching configmaps of namespace platform", refreshed: true},
		{name: "secrets", spec: `kubernetesResource: {version: v1, resource: secrets}`,
			status: metav1.ConditionFalse, reason: kyvernov2alpha1.ReasonForbidden, stalled: true,
			message: `charter may not list secrets of API group "" (core) in every namespace`},
		{name: "widgets", spec: `kubernetesResource: {group: example.com, version: v1, resource: widgets}`,
			status: metav1.ConditionFalse, reason: kyvernov2alpha1.ReasonUnknownResource, stalled: true,
			message: "spec.kubernetesResource example.com/v1/widgets: the API server does not serve it"},
		{name: "bad-projection", spec: "kubernetesResource: {version: v1, resource: configmaps, namespace: platform}\nprojections: [{name: p, jmesPath: \"[\"}]",
			status: metav1.ConditionFalse, reason: kyvernov2alpha1.ReasonInvalidSpec, stalled: true, message: `spec.projections[0].jmesPath: "["`},
		{name: "dotted-projection", spec: "kubernetesResource: {version: v1, resource: configmaps, namespace: platform}\nprojections: [{name: a.b, jmesPath: \"@\"}]",
			status: metav1.ConditionFalse, reason: kyvernov2alpha1.ReasonInvalidSpec, stalled: true, message: `spec.projections[0].name: "a.b": must not contain a dot`},
		{name: "api-down", spec: "apiCall: {service: {url: \"" + srv.URL + "/registries\"}, refreshInterval: 1s, retryLimit: 1}",
			status: metav1.ConditionFalse, reason: kyvernov2alpha1.ReasonAPICallFailed,
			message: "spec.apiCall GET " + srv.URL + "/registries: 1 tries: HTTP 503: down for maintenance"},
	}
	for _, c := range cases {
		var gce kyvernov2alpha1.GlobalContextEntry
		if err := yaml.UnmarshalStrict([]byte(fmt.Sprintf("metadata: {name: %s}\nspec:\n  %s\n", c.name, strings.ReplaceAll(c.spec, "\n", "\n  "))), &gce); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := cl.Create(ctx, &gce); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}

	mgr, err := ctrl.NewManager(cp.RESTConfig(), ctrl.Options{Scheme: sch, Metrics: metricsserver.Options{BindAddress: "0"}, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	restricted := rest.CopyConfig(cp.RESTConfig())
	restricted.Impersonate = rest.ImpersonationConfig{UserName: restrictedUser, Groups: []string{"system:authenticated"}}
	state, err := clusterstate.New(mgr, testr.New(t), clusterstate.WithGlobalContextConfig(restricted),
		// The API answers from an httptest server on loopback.
		clusterstate.WithHTTPLimits(loaders.HTTPLimits{Blocklist: []string{}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := (&GlobalContextEntryReconciler{Client: mgr.GetClient(), Store: state.GlobalContext}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	ready := func(name string, status metav1.ConditionStatus, reason, message string) func() (*kyvernov2alpha1.GlobalContextEntry, error) {
		return func() (*kyvernov2alpha1.GlobalContextEntry, error) {
			var gce kyvernov2alpha1.GlobalContextEntry
			if err := cl.Get(ctx, client.ObjectKey{Name: name}, &gce); err != nil {
				return nil, err
			}
			c := apimeta.FindStatusCondition(gce.Status.Conditions, kyvernov2alpha1.ConditionReady)
			if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, message) || gce.Status.ObservedGeneration != gce.Generation {
				return nil, fmt.Errorf("status %+v", gce.Status)
			}
			return &gce, nil
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gce := eventually(t, "Ready "+string(c.status)+" "+c.reason, ready(c.name, c.status, c.reason, c.message))
			if got := apimeta.IsStatusConditionTrue(gce.Status.Conditions, kyvernov2alpha1.ConditionStalled); got != c.stalled {
				t.Errorf("Stalled %v, want %v: %+v", got, c.stalled, gce.Status.Conditions)
			}
			if got := gce.Status.LastRefreshTime != nil; got != c.refreshed {
				t.Errorf("lastRefreshTime %v, want set %v", gce.Status.LastRefreshTime, c.refreshed)
			}
		})
	}
	t.Run("an API call that recovers is Ready at its next refresh", func(t *testing.T) {
		failing.Store(false)
		gce := eventually(t, "api-down Ready", ready("api-down", metav1.ConditionTrue, kyvernov2alpha1.ReasonSucceeded, "API call answered; refreshed every 1s"))
		if gce.Status.LastRefreshTime == nil || apimeta.FindStatusCondition(gce.Status.Conditions, kyvernov2alpha1.ConditionReconciling) != nil {
			t.Errorf("status %+v", gce.Status)
		}
		data, err := state.GlobalContext.GlobalContextEntry(ctx, "api-down")
		if err != nil || fmt.Sprint(data) != "map[registries:[ghcr.io]]" {
			t.Errorf("data %v, %v", data, err)
		}
	})
}

func eventually[T any](t *testing.T, what string, f func() (T, error)) T {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := f()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after 30s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
