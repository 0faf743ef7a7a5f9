package reportsserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/localpg/localpgtest"
)

var (
	polr  = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}
	cpolr = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "clusterpolicyreports"}
	orep  = schema.GroupVersionResource{Group: "openreports.io", Version: "v1alpha1", Resource: "reports"}
)

// startBehindAggregator starts PostgreSQL, a local control plane without
// the report CRDs, and a reports server registered with it by APIServices
// (an ExternalName Service for localhost), and returns the administrator's
// configuration of kube-apiserver: every request below goes through the
// aggregator, as kubectl's and charter's do.
func startBehindAggregator(ctx context.Context, t *testing.T) (*rest.Config, *Server) {
	t.Helper()
	pg := localpgtest.Start(t)
	cp, err := controlplane.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			cp.KeepLogs()
			t.Logf("control plane logs kept in %s", cp.LogDir())
		}
		_ = cp.Stop()
	})
	o := NewOptions()
	o.DSN = pg.DSN()
	o.Kubeconfig = cp.KubeconfigPath()
	o.ServingNames = []string{"charter-reports-server.charter-system.svc"}
	o.SecureServing.ServerCert.CertDirectory = t.TempDir()
	if o.SecureServing.Listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	srv, err := o.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("reports server: %v", err)
		}
	})
	cfg := cp.RESTConfig()
	regCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := Register(regCtx, cfg, Registration{
		Namespace: "charter-system", Service: "charter-reports-server", ExternalName: "localhost",
		Port: srv.Port(), CABundle: srv.CABundle(),
	}); err != nil {
		t.Fatal(err)
	}
	return cfg, srv
}

func report(gvr schema.GroupVersionResource, kind, namespace, name string, labels map[string]string, result string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"summary":    map[string]any{"pass": int64(1)},
		"results": []any{map[string]any{
			"policy": "require-labels", "rule": "check-team", "result": result, "source": "charter",
			"timestamp": map[string]any{"seconds": int64(1), "nanos": int64(0)},
		}},
	}}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	u.SetLabels(labels)
	return u
}

// TestReportsServerThroughAggregator: the report APIs served from
// PostgreSQL, used through kube-apiserver as clients use them.
func TestReportsServerThroughAggregator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg, srv := startBehindAggregator(ctx, t)
	dyn := dynamic.NewForConfigOrDie(cfg)

	// Reports are created before any test reads them.
	for i, labels := range []map[string]string{{"team": "a"}, {"team": "a"}, {"team": "b"}} {
		name := fmt.Sprintf("pod-%d", i)
		if _, err := dyn.Resource(polr).Namespace("apps").Create(ctx, report(polr, "PolicyReport", "apps", name, labels, "pass"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating PolicyReport apps/%s: %v", name, err)
		}
	}
	if _, err := dyn.Resource(cpolr).Create(ctx, report(cpolr, "ClusterPolicyReport", "", "ns-apps", nil, "fail"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ClusterPolicyReport: %v", err)
	}

	t.Run("discovery names polr and cpolr", func(t *testing.T) {
		disco := discovery.NewDiscoveryClientForConfigOrDie(cfg)
		list, err := disco.ServerResourcesForGroupVersion(polr.GroupVersion().String())
		if err != nil {
			t.Fatal(err)
		}
		short := map[string][]string{}
		for _, r := range list.APIResources {
			short[r.Name] = r.ShortNames
		}
		if fmt.Sprint(short["policyreports"]) != "[polr]" || fmt.Sprint(short["clusterpolicyreports"]) != "[cpolr]" {
			t.Fatalf("short names %v, want policyreports [polr], clusterpolicyreports [cpolr]", short)
		}
	})

	// kube-controller-manager's namespace and garbage collectors ask for
	// protobuf first: JSON must answer them, or a namespace holding
	// reports is never deleted.
	t.Run("a client preferring protobuf gets JSON", func(t *testing.T) {
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/apis/wgpolicyk8s.io/v1alpha2/namespaces/apps/policyreports", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/vnd.kubernetes.protobuf, application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !strings.Contains(string(body), `"pod-0"`) {
			t.Fatalf("HTTP %d, Content-Type %q: %.300s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		meta, err := metadata.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		list, err := meta.Resource(polr).Namespace("apps").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 3 {
			t.Fatalf("the metadata client's list: %v items, err %v; want 3", list, err)
		}
	})

	t.Run("list by label selector", func(t *testing.T) {
		list, err := dyn.Resource(polr).Namespace("apps").List(ctx, metav1.ListOptions{LabelSelector: "team=a"})
		if err != nil {
			t.Fatal(err)
		}
		if got := itemNames(list); got != "pod-0,pod-1" {
			t.Fatalf("team=a lists %s, want pod-0,pod-1", got)
		}
	})

	t.Run("pages with continue tokens at one resourceVersion", func(t *testing.T) {
		var got []string
		opts := metav1.ListOptions{Limit: 1}
		rv := ""
		for page := 0; ; page++ {
			list, err := dyn.Resource(polr).Namespace("apps").List(ctx, opts)
			if err != nil {
				t.Fatalf("page %d: %v", page, err)
			}
			if len(list.Items) != 1 {
				t.Fatalf("page %d has %d items, want 1", page, len(list.Items))
			}
			if rv == "" {
				rv = list.GetResourceVersion()
			} else if list.GetResourceVersion() != rv {
				t.Fatalf("page %d at resourceVersion %s, first at %s", page, list.GetResourceVersion(), rv)
			}
			got = append(got, list.Items[0].GetName())
			if list.GetContinue() == "" {
				break
			}
			opts.Continue = list.GetContinue()
		}
		if strings.Join(got, ",") != "pod-0,pod-1,pod-2" {
			t.Fatalf("pages list %v", got)
		}
	})

	t.Run("watch from a list delivers later writes in order", func(t *testing.T) {
		list, err := dyn.Resource(polr).Namespace("apps").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := dyn.Resource(polr).Namespace("apps").Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		created, err := dyn.Resource(polr).Namespace("apps").Create(ctx, report(polr, "PolicyReport", "apps", "watched", nil, "pass"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.SetLabels(map[string]string{"team": "c"})
		if _, err := dyn.Resource(polr).Namespace("apps").Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := dyn.Resource(polr).Namespace("apps").Delete(ctx, "watched", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
			select {
			case e := <-w.ResultChan():
				u, _ := e.Object.(*unstructured.Unstructured)
				if e.Type != want || u == nil || u.GetName() != "watched" {
					t.Fatalf("event %s %v, want %s of watched", e.Type, e.Object, want)
				}
			case <-ctx.Done():
				t.Fatalf("no %s event", want)
			}
		}
	})

	t.Run("an informer syncs and sees a new report", func(t *testing.T) {
		factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, "apps", nil)
		informer := factory.ForResource(polr).Informer()
		added := make(chan string, 10)
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				added <- u.GetName()
			}
		}}); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		defer close(stop)
		factory.Start(stop)
		if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			t.Fatal("informer did not sync")
		}
		if _, err := dyn.Resource(polr).Namespace("apps").Create(ctx, report(polr, "PolicyReport", "apps", "late", nil, "pass"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case name := <-added:
				if name == "late" {
					return
				}
			case <-ctx.Done():
				t.Fatal("the informer never saw apps/late")
			}
		}
	})

	t.Run("the CRD schema rejects a bad result", func(t *testing.T) {
		_, err := dyn.Resource(polr).Namespace("apps").Create(ctx, report(polr, "PolicyReport", "apps", "bad", nil, "bogus"), metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "results[0].result") {
			t.Fatalf("creating a report with result bogus: %v, want Invalid naming results[0].result", err)
		}
	})

	t.Run("OpenReports are served too", func(t *testing.T) {
		r := report(orep, "Report", "apps", "or-0", nil, "pass")
		if _, err := dyn.Resource(orep).Namespace("apps").Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := dyn.Resource(orep).Namespace("apps").Get(ctx, "or-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetAPIVersion() != "openreports.io/v1alpha1" || got.GetKind() != "Report" {
			t.Fatalf("got %s %s", got.GetAPIVersion(), got.GetKind())
		}
	})

	t.Run("a tenant reads its own namespace's reports only", func(t *testing.T) {
		tenantReadsOwnNamespaceOnly(ctx, t, cfg, srv)
	})

	t.Run("reports are rows in PostgreSQL", func(t *testing.T) {
		var n int
		if err := srv.DB().Pool().QueryRow(ctx, `SELECT count(*) FROM charter_objects WHERE key LIKE '/wgpolicyk8s.io/policyreports/apps/%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n < 3 {
			t.Fatalf("%d PolicyReport rows in apps, want at least 3", n)
		}
	})
}

func itemNames(list *unstructured.UnstructuredList) string {
	var out []string
	for _, item := range list.Items {
		out = append(out, item.GetName())
	}
	return strings.Join(out, ",")
}

// tenantReadsOwnNamespaceOnly is issue #27's tenant against the reports
// server: the ServiceAccount apps/report-reader, whose Role lets it get,
// list and watch the PolicyReports of its namespace "apps" and nothing
// else, and whose token its namespace's admin may request, tries to read
// another namespace's reports (they name its workloads and their
// failures). It tries through the aggregated API, as kubectl does, and
// straight at the server's port, which a Pod reaches through its Service
// without passing kube-apiserver's own authorisation; there it also
// claims to be system:admin by the front proxy's headers. Every attempt is
// refused, while the reads of its own namespace succeed.
func tenantReadsOwnNamespaceOnly(ctx context.Context, t *testing.T, admin *rest.Config, srv *Server) {
	t.Helper()
	const own, other, reader = "apps", "other-team", "report-reader"
	kube := kubernetes.NewForConfigOrDie(admin)
	for _, ns := range []string{own, other} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if _, err := dynamic.NewForConfigOrDie(admin).Resource(polr).Namespace(other).Create(ctx, report(polr, "PolicyReport", other, "payments", nil, "fail"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PolicyReport %s/payments: %v", other, err)
	}
	for _, err := range []error{
		create(ctx, kube.CoreV1().ServiceAccounts(own).Create, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: reader}}),
		create(ctx, kube.RbacV1().Roles(own).Create, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: reader},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{polr.Group}, Resources: []string{polr.Resource}, Verbs: []string{"get", "list", "watch"}}},
		}),
		create(ctx, kube.RbacV1().RoleBindings(own).Create, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: reader},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: reader},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: own, Name: reader}},
		}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	token, err := kube.CoreV1().ServiceAccounts(own).CreateToken(ctx, reader, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	aggregated := rest.AnonymousClientConfig(admin)
	aggregated.BearerToken = token.Status.Token
	direct := &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", srv.Port()),
		TLSClientConfig: rest.TLSClientConfig{CAData: srv.CABundle()},
		BearerToken:     token.Status.Token,
	}
	// Headers a front proxy sets; without its client certificate they
	// must count for nothing.
	posing := rest.CopyConfig(direct)
	posing.BearerToken = ""
	posing.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("X-Remote-User", "system:admin")
			r.Header.Set("X-Remote-Group", "system:masters")
			return rt.RoundTrip(r)
		})
	}

	for path, cfg := range map[string]*rest.Config{"through the aggregator": aggregated, "at the server's port": direct} {
		as := dynamic.NewForConfigOrDie(cfg)
		// RBAC reaches the authorisers through informers, and the server
		// caches a denial for a while: wait until the reader reads its
		// own namespace, which also shows the refusals below are RBAC's,
		// not a server refusing every tenant.
		for {
			if _, err = as.Resource(polr).Namespace(own).List(ctx, metav1.ListOptions{}); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: the reader never listed the PolicyReports of its own namespace %s: %v", path, own, err)
			case <-time.After(time.Second):
			}
		}
		if _, err := as.Resource(polr).Namespace(own).Get(ctx, "pod-0", metav1.GetOptions{}); err != nil {
			t.Fatalf("%s: the reader's get of %s/pod-0: %v", path, own, err)
		}
		for attempt, err := range reportReads(ctx, as, other) {
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s: the reader's %s: %v, want Forbidden", path, attempt, err)
			}
		}
	}
	for attempt, err := range reportReads(ctx, dynamic.NewForConfigOrDie(posing), other) {
		if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
			t.Errorf("posing as system:admin by the front proxy's headers at the server's port: %s: %v, want Forbidden or Unauthorized", attempt, err)
		}
	}
}

// reportReads tries every read of the reports of namespace other, and of
// all namespaces, and returns what each answered.
func reportReads(ctx context.Context, as dynamic.Interface, other string) map[string]error {
	out := map[string]error{}
	_, out["list "+other] = as.Resource(polr).Namespace(other).List(ctx, metav1.ListOptions{})
	_, out["get "+other+"/payments"] = as.Resource(polr).Namespace(other).Get(ctx, "payments", metav1.GetOptions{})
	_, out["list across namespaces"] = as.Resource(polr).List(ctx, metav1.ListOptions{})
	_, out["list clusterpolicyreports"] = as.Resource(cpolr).List(ctx, metav1.ListOptions{})
	for name, ri := range map[string]dynamic.ResourceInterface{"watch " + other: as.Resource(polr).Namespace(other), "watch across namespaces": as.Resource(polr)} {
		w, err := ri.Watch(ctx, metav1.ListOptions{})
		if err == nil {
			w.Stop()
		}
		out[name] = err
	}
	return out
}

// create calls a typed client's Create, taking an existing object as
// created.
func create[T any](ctx context.Context, fn func(context.Context, T, metav1.CreateOptions) (T, error), obj T) error {
	_, err := fn(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
