package reports

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/go-logr/logr"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/enginetest"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// writeCounter counts the write requests a client sends for reports.
type writeCounter struct {
	next   http.RoundTripper
	writes atomic.Int64
}

func (w *writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/apis/wgpolicyk8s.io/") {
		w.writes.Add(1)
	}
	return w.next.RoundTrip(req)
}

// env is a control plane with charter's CRDs and clients for the test.
type env struct {
	t    *testing.T
	cfg  *rest.Config
	cs   kubernetes.Interface
	dyn  dynamic.Interface
	ctx  context.Context
	cntr *writeCounter
	// images, when set, verifies the images of verifyImages rules.
	images loader.ImageVerifier
	// wrap, when set, wraps the transport of the controllers started next.
	wrap func(http.RoundTripper) http.RoundTripper
	// etcdURL is the control plane's etcd, for tests that act on it.
	etcdURL string
}

func startEnv(t *testing.T, opts ...controlplane.Option) *env {
	t.Helper()
	// A ceiling, not a target: the control plane's start and its CRDs
	// alone took four minutes at load 35 in a fresh-clone CI run
	// (TestReportsManagedByKyverno: "applying CRD ...: context deadline
	// exceeded"); the package's go test timeout still bounds the whole.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	cp := controlplanetest.Start(ctx, t, opts...)
	e := &env{t: t, ctx: ctx, cfg: cp.RESTConfig(), etcdURL: cp.EtcdURL()}
	e.cs = kubernetes.NewForConfigOrDie(e.cfg)
	e.dyn = dynamic.NewForConfigOrDie(e.cfg)
	return e
}

// startController runs the controller under a manager, as `charter serve`
// does, through a client whose report writes are counted.
func (e *env) startController(opts Options) (*Controller, context.CancelFunc) {
	e.t.Helper()
	c, stop := e.runController(opts)
	e.eventually("the controller's first scan", func() error {
		if !c.Synced() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	return c, stop
}

// runController is startController without waiting for the first scan.
func (e *env) runController(opts Options) (*Controller, context.CancelFunc) {
	e.t.Helper()
	cfg := rest.CopyConfig(e.cfg)
	e.cntr = &writeCounter{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { e.cntr.next = rt; return e.cntr })
	if e.wrap != nil {
		cfg.Wrap(e.wrap)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: e.scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := setup(mgr, e.withClusterState(mgr, opts))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("manager: %v", err)
		}
	}
	e.t.Cleanup(func() {
		if ctx.Err() == nil {
			stop()
		}
	})
	return c, stop
}

// scheme is the scheme of the tests' managers: the process's shared
// cluster state reads the kyverno.io types.
func (e *env) scheme() *runtime.Scheme {
	e.t.Helper()
	sch := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kyvernov1.AddToScheme, kyvernov2.AddToScheme, policiesv1.AddToScheme} {
		if err := add(sch); err != nil {
			e.t.Fatal(err)
		}
	}
	return sch
}

// withClusterState gives opts the manager's shared cluster state, as
// charter serve does.
func (e *env) withClusterState(mgr ctrl.Manager, opts Options) Options {
	e.t.Helper()
	state, err := clusterstate.New(mgr, logr.Discard())
	if err != nil {
		e.t.Fatal(err)
	}
	state.Loaders.ImageVerifier = e.images
	opts.State = state
	return opts
}

func (e *env) eventually(what string, check func() error) {
	e.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.t.Fatalf("%s: %v", what, err)
}

func (e *env) apply(file string) *unstructured.Unstructured {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		e.t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		e.t.Fatal(err)
	}
	gvr := map[string]schema.GroupVersionResource{
		"ClusterPolicy":                       kyvernov1.GroupVersion.WithResource("clusterpolicies"),
		"Pod":                                 {Version: "v1", Resource: "pods"},
		"PolicyException":                     kyvernov2.GroupVersion.WithResource("policyexceptions"),
		"ValidatingPolicy":                    policiesv1.GroupVersion.WithResource("validatingpolicies"),
		"MutatingPolicy":                      policiesv1.GroupVersion.WithResource("mutatingpolicies"),
		"policies.kyverno.io/PolicyException": policiesv1.GroupVersion.WithResource("policyexceptions"),
	}[applyKey(u)]
	if gvr.Resource == "" {
		e.t.Fatalf("%s: kind %q is not one the test applies", file, u.GetKind())
	}
	ri := e.dyn.Resource(gvr)
	var out *unstructured.Unstructured
	if ns := u.GetNamespace(); ns != "" {
		out, err = ri.Namespace(ns).Create(e.ctx, u, metav1.CreateOptions{})
	} else {
		out, err = ri.Create(e.ctx, u, metav1.CreateOptions{})
	}
	if err != nil {
		e.t.Fatalf("creating %s: %v", file, err)
	}
	return out
}

// applyKey is the kind of u, prefixed by its group for the
// policies.kyverno.io kinds.
func applyKey(u *unstructured.Unstructured) string {
	if g := u.GroupVersionKind().Group; g == policiesv1.Group && u.GetKind() == policiesv1.PolicyExceptionKind {
		return g + "/" + u.GetKind()
	}
	return u.GetKind()
}

func (e *env) deletePolicy(name string) {
	e.t.Helper()
	gvr := schema.GroupVersionResource{Group: "kyverno.io", Version: "v1", Resource: "clusterpolicies"}
	if err := e.dyn.Resource(gvr).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// results reads a resource's report as "policy/rule=result" strings; nil
// when there is no report.
func (e *env) results(namespace, uid string) ([]string, *unstructured.Unstructured, error) {
	return e.resultsIn(policyreport.WGPolicyK8s, namespace, uid)
}

// resultsIn is results in one report API.
func (e *env) resultsIn(api policyreport.API, namespace, uid string) ([]string, *unstructured.Unstructured, error) {
	var ri dynamic.ResourceInterface = e.dyn.Resource(api.Resource(namespace == ""))
	if namespace != "" {
		ri = e.dyn.Resource(api.Resource(false)).Namespace(namespace)
	}
	u, err := ri.Get(e.ctx, uid, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	p, err := report.Parse(u)
	if err != nil {
		return nil, nil, err
	}
	var out []string
	for _, r := range p.Results {
		out = append(out, r.Policy+"/"+r.Rule+"="+string(r.Result))
	}
	return out, u, nil
}

func (e *env) wantResults(what, namespace string, uid string, want ...string) *unstructured.Unstructured {
	e.t.Helper()
	return e.wantResultsIn(policyreport.WGPolicyK8s, what, namespace, uid, want...)
}

// wantResultsIn is wantResults in one report API.
func (e *env) wantResultsIn(api policyreport.API, what, namespace string, uid string, want ...string) *unstructured.Unstructured {
	e.t.Helper()
	var last *unstructured.Unstructured
	e.eventually(what, func() error {
		got, u, err := e.resultsIn(api, namespace, string(uid))
		if err != nil {
			return err
		}
		last = u
		if strings.Join(got, " ") != strings.Join(want, " ") {
			return fmt.Errorf("results %v, want %v", got, want)
		}
		return nil
	})
	return last
}

func TestBackgroundReports(t *testing.T) {
	e := startEnv(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reports-test"}}
	nsObj, err := e.cs.CoreV1().Namespaces().Create(e.ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The Pod exists before any policy does.
	pod := e.apply("pod.yaml")
	podUID := string(pod.GetUID())

	admission := NewAdmissionQueue(10)
	c, stop := e.startController(Options{Admission: admission})

	e.apply("disallow-latest.yaml")
	e.apply("require-team.yaml")
	rep := e.wantResults("the existing Pod's report after the policies are added", "reports-test", podUID,
		"disallow-latest/no-latest=fail", "require-team/team-label=fail")

	t.Run("report shape", func(t *testing.T) {
		var polr v1alpha2.PolicyReport
		if err := runtimeFromUnstructured(rep, &polr); err != nil {
			t.Fatal(err)
		}
		if polr.Scope == nil || polr.Scope.Kind != "Pod" || polr.Scope.Name != "web" || string(polr.Scope.UID) != podUID || polr.Scope.APIVersion != "v1" {
			t.Errorf("scope %+v, want the Pod", polr.Scope)
		}
		if len(polr.OwnerReferences) != 1 || string(polr.OwnerReferences[0].UID) != podUID {
			t.Errorf("owners %+v, want the Pod", polr.OwnerReferences)
		}
		if polr.Labels[report.ManagedByLabel] != report.ManagedBy {
			t.Errorf("labels %v", polr.Labels)
		}
		if polr.Summary != (v1alpha2.PolicyReportSummary{Fail: 2}) {
			t.Errorf("summary %+v, want fail 2", polr.Summary)
		}
		r := polr.Results[0]
		if r.Source != "charter" || r.Severity != "medium" || r.Category != "Best Practices" || !r.Scored ||
			r.Timestamp.Seconds == 0 || r.Properties["process"] != "background scan" ||
			!strings.Contains(r.Message, "images must not use the latest tag") {
			t.Errorf("result %+v lacks Kyverno's fields", r)
		}
	})

	t.Run("fixing the Pod turns fail to pass", func(t *testing.T) {
		patch := []byte(`{"metadata":{"labels":{"team":"web"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}`)
		if _, err := e.cs.CoreV1().Pods("reports-test").Patch(e.ctx, "web", "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		e.wantResults("the fixed Pod's report", "reports-test", podUID,
			"disallow-latest/no-latest=pass", "require-team/team-label=pass")
	})

	t.Run("a Namespace gets a ClusterPolicyReport", func(t *testing.T) {
		e.apply("namespace-owner.yaml")
		rep := e.wantResults("the namespace's report", "", string(nsObj.UID), "namespace-owner/owner-label=fail")
		if rep.GetKind() != "ClusterPolicyReport" {
			t.Errorf("kind %s", rep.GetKind())
		}
	})

	t.Run("admission results land in the same report and survive rescans", func(t *testing.T) {
		// The webhook may report a policy before the controller has
		// compiled it (it debounces policy changes): the results wait for
		// it instead of being dropped as results of an unknown policy.
		e.apply("admission-only.yaml")
		if c.snap.Load().catalog[report.Source+"/admission-only"] != nil {
			t.Log("the controller compiled the policy before the admission came; the wait is not exercised")
		}
		responses := evaluateAdmission(t, pod)
		if !admission.Enqueue(Resource{APIVersion: "v1", Kind: "Pod", Namespace: "reports-test", Name: "web", UID: pod.GetUID()}, responses) {
			t.Fatal("queue full")
		}
		e.wantResults("the admission result in the Pod's report", "reports-test", podUID,
			"admission-only/created-by=fail", "disallow-latest/no-latest=pass", "require-team/team-label=pass")
		if err := c.FullRescan(e.ctx); err != nil {
			t.Fatal(err)
		}
		e.wantResults("the admission result after a full rescan", "reports-test", podUID,
			"admission-only/created-by=fail", "disallow-latest/no-latest=pass", "require-team/team-label=pass")
	})

	t.Run("a full rescan with nothing changed writes nothing", func(t *testing.T) {
		before := c.Stats().Evaluations.Load()
		writes := e.cntr.writes.Load()
		if err := c.FullRescan(e.ctx); err != nil {
			t.Fatal(err)
		}
		if n := e.cntr.writes.Load() - writes; n != 0 {
			t.Errorf("%d report writes during an unchanged rescan, want 0", n)
		}
		if c.Stats().Evaluations.Load() == before {
			t.Error("the full rescan evaluated nothing")
		}
	})

	t.Run("deleting a policy removes its results", func(t *testing.T) {
		e.deletePolicy("disallow-latest")
		e.wantResults("the Pod's report without the deleted policy", "reports-test", podUID,
			"admission-only/created-by=fail", "require-team/team-label=pass")
		e.deletePolicy("admission-only")
		e.wantResults("the Pod's report without the admission-only policy", "reports-test", podUID,
			"require-team/team-label=pass")
	})

	t.Run("a restart loses nothing and rewrites nothing", func(t *testing.T) {
		stop()
		// Changed while no controller runs.
		patch := []byte(`{"metadata":{"labels":{"team":null}}}`)
		if _, err := e.cs.CoreV1().Pods("reports-test").Patch(e.ctx, "web", "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		c, _ = e.startController(Options{})
		e.wantResults("the report caught up after the restart", "reports-test", podUID, "require-team/team-label=fail")
		// Exactly the changed report was written: the namespace's report
		// was already right.
		if n := e.cntr.writes.Load(); n != 1 {
			t.Errorf("%d report writes after the restart, want 1", n)
		}
	})

	t.Run("an exception with background false does not apply in scans", func(t *testing.T) {
		e.apply("exception-admission-only.yaml")
		// Created after the first: once the namespace's result turns to
		// skip, the controller's policy set holds both exceptions.
		e.apply("exception-namespace.yaml")
		e.wantResults("the namespace's result skipped by its exception", "", string(nsObj.UID), "namespace-owner/owner-label=skip")
		if err := c.FullRescan(e.ctx); err != nil {
			t.Fatal(err)
		}
		e.wantResults("the Pod's result despite the admission-only exception", "reports-test", podUID, "require-team/team-label=fail")
	})

	t.Run("a ValidatingPolicy is scanned and its policies.kyverno.io exception honoured", func(t *testing.T) {
		e.apply("vpol-require-owner.yaml")
		e.wantResults("the ValidatingPolicy's failure in the Pod's report", "reports-test", podUID,
			"require-team/team-label=fail", "vpol-require-owner/=fail")
		e.apply("vpol-exception-web.yaml")
		e.wantResults("the failure skipped by the exception", "reports-test", podUID,
			"require-team/team-label=fail", "vpol-require-owner/exception=skip")
	})

	t.Run("a ValidatingPolicy named like a ClusterPolicy is reported beside it", func(t *testing.T) {
		e.apply("vpol-require-team.yaml")
		rep := e.wantResults("both require-team policies' failures in the Pod's report", "reports-test", podUID,
			"require-team/=fail", "require-team/team-label=fail", "vpol-require-owner/exception=skip")
		var polr v1alpha2.PolicyReport
		if err := runtimeFromUnstructured(rep, &polr); err != nil {
			t.Fatal(err)
		}
		bySource := map[string]string{}
		for _, r := range polr.Results {
			if r.Policy == "require-team" {
				bySource[r.Source] = r.Message
			}
		}
		if bySource[report.SourceValidatingPolicy] != "annotation team is required" || !strings.Contains(bySource[report.Source], "label") {
			t.Errorf("require-team results by source: %v, want the ValidatingPolicy's and the ClusterPolicy's own messages", bySource)
		}
		if polr.Summary != (v1alpha2.PolicyReportSummary{Fail: 2, Skip: 1}) {
			t.Errorf("summary %+v, want fail 2, skip 1", polr.Summary)
		}
	})

	t.Run("deleting the Pod deletes its report", func(t *testing.T) {
		if err := e.cs.CoreV1().Pods("reports-test").Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.eventually("the report is gone", func() error {
			got, u, err := e.results("reports-test", podUID)
			if err != nil {
				return err
			}
			if u != nil {
				return fmt.Errorf("report still there with %v", got)
			}
			return nil
		})
	})
}

// evaluateAdmission evaluates the admission-only policy as the webhook
// would for a CREATE by a non-admin.
func evaluateAdmission(t *testing.T, pod *unstructured.Unstructured) []engine.PolicyResponse {
	t.Helper()
	data, err := os.ReadFile("testdata/admission-only.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var p kyvernov1.ClusterPolicy
	if err := yaml.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	set := enginetest.Set(t, &p)
	req := engine.RequestForObject(pod)
	req.UserInfo.Username = "alice"
	return set.Validate(context.Background(), req).Policies
}

func runtimeFromUnstructured(u *unstructured.Unstructured, into any) error {
	return runtimeConverter.FromUnstructured(u.Object, into)
}

var runtimeConverter = runtime.DefaultUnstructuredConverter
