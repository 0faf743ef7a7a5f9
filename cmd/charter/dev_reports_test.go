package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/localpg"
)

// applyExample creates the objects of one of the example files the README's tour uses,
// as kubectl apply -f does on a fresh cluster.
func applyExample(ctx context.Context, t *testing.T, cl client.Client, path string) {
	t.Helper()
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if err := cl.Create(ctx, u); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatalf("%s: creating %s %s: %v", path, u.GetKind(), u.GetName(), err)
		}
	}
}

// TestDevReportsAPIOpenReports walks the README's tour on
// `charter dev --reports-api=openreports`: the hint names OpenReports'
// reports, and the tour (walkReportsTour) reads openreports.io Reports.
func TestDevReportsAPIOpenReports(t *testing.T) {
	out, interrupt := startDev(t, "dev", "--crds", crdDir(t), "--reports-api=openreports")
	if !strings.Contains(out, "kubectl get reports -A") {
		t.Errorf("the hint does not name OpenReports' reports:\n%s", out)
	}
	walkReportsTour(t, out, policyreport.OpenReports)
	if err, out := interrupt(); err != nil {
		t.Fatalf("charter dev returned %v after the interrupt:\n%s", err, out)
	}
}

// TestDevReportsStorePostgres walks the README's tour on
// `charter dev --reports-store=postgres`: the report CRDs are not
// installed, APIServices route wgpolicyk8s.io and openreports.io to
// charter reports-server, and the tour's PolicyReports, written and read
// by every controller unchanged, are rows in PostgreSQL.
func TestDevReportsStorePostgres(t *testing.T) {
	if _, err := localpg.BinDir(); err != nil && os.Getenv(localpg.RequireEnv) == "" {
		t.Skipf("%v; set %s to make this a failure", err, localpg.RequireEnv)
	}
	out, interrupt := startDev(t, "dev", "--crds", crdDir(t), "--reports-store=postgres")
	if !strings.Contains(out, "reports in PostgreSQL, served by charter reports-server") {
		t.Errorf("charter dev does not say where reports go:\n%s", out)
	}
	cfg := devRESTConfig(t, out)
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cfg)
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, name := range []string{"policyreports.wgpolicyk8s.io", "clusterpolicyreports.wgpolicyk8s.io", "reports.openreports.io"} {
		if _, err := dyn.Resource(crds).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("CRD %s: %v, want NotFound: reports-server serves it", name, err)
		}
	}
	apiServices := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	for _, name := range []string{"v1alpha2.wgpolicyk8s.io", "v1alpha1.openreports.io"} {
		svc, err := dyn.Resource(apiServices).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("APIService %s: %v", name, err)
		}
		if got, _, _ := unstructured.NestedString(svc.Object, "spec", "service", "name"); got != "charter-reports-server" {
			t.Errorf("APIService %s routes to service %q, want charter-reports-server", name, got)
		}
	}
	walkReportsTour(t, out, policyreport.WGPolicyK8s)
	if err, out := interrupt(); err != nil {
		t.Fatalf("charter dev returned %v after the interrupt:\n%s", err, out)
	}
}

// walkReportsTour walks the README's tour on a running charter dev that
// writes reports to api: the two example Pods get a report each (the
// privileged one failing, the compliant one not), no report of the other
// API is written, and the promotion gate reads the reports: namespace
// demo cannot be promoted while the privileged Pod's report fails, and
// can once the Pod and its report are gone.
func walkReportsTour(t *testing.T, out string, api policyreport.API) {
	t.Helper()
	cfg := devRESTConfig(t, out)
	ctx := context.Background()
	cl := devTestClient(t, cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	if err := waitForWebhook(ctx, cl); err != nil {
		t.Fatal(err)
	}
	applyExample(ctx, t, cl, "examples/pods/compliant.yaml")
	applyExample(ctx, t, cl, "examples/pods/privileged.yaml")

	reportOf := func(name string) (*unstructured.Unstructured, error) {
		var pod corev1.Pod
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "demo", Name: name}, &pod); err != nil {
			return nil, err
		}
		return dyn.Resource(api.Resource(false)).Namespace("demo").Get(ctx, string(pod.UID), metav1.GetOptions{})
	}
	// Minutes, not seconds: admission results wait for the Pod to be
	// stored, and a loaded 2-core machine is slow.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := func() error {
			privileged, err := reportOf("privileged")
			if err != nil {
				return err
			}
			if fail, _, _ := unstructured.NestedInt64(privileged.Object, "summary", "fail"); fail == 0 {
				return errors.New("the privileged Pod's report has no fail yet")
			}
			parsed, err := policyreport.Decode(privileged)
			if err != nil {
				return err
			}
			failing := map[string]bool{}
			for _, r := range parsed.Results {
				if r.Result == "fail" {
					failing[r.Policy] = true
				}
			}
			if !failing["disallow-privileged-containers"] {
				return fmt.Errorf("the privileged Pod's report fails only %v", failing)
			}
			compliant, err := reportOf("compliant")
			if err != nil {
				return err
			}
			pass, _, _ := unstructured.NestedInt64(compliant.Object, "summary", "pass")
			fail, _, _ := unstructured.NestedInt64(compliant.Object, "summary", "fail")
			if pass == 0 || fail != 0 {
				return fmt.Errorf("the compliant Pod's report: pass %d, fail %d", pass, fail)
			}
			return nil
		}()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the walkthrough's reports: %v\ncharter dev's output:\n%s", err, out)
		}
		time.Sleep(time.Second)
	}
	other := policyreport.WGPolicyK8s
	if api == policyreport.WGPolicyK8s {
		other = policyreport.OpenReports
	}
	for _, clusterScoped := range []bool{false, true} {
		gvr := other.Resource(clusterScoped)
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			t.Errorf("%d %s written while reports go to %s", len(list.Items), gvr.Resource, api)
		}
	}

	setEnforcement := func() error {
		var ns corev1.Namespace
		if err := cl.Get(ctx, client.ObjectKey{Name: "demo"}, &ns); err != nil {
			return err
		}
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels["charter.dev/enforcement"] = "enforce"
		return cl.Update(ctx, &ns)
	}
	err := setEnforcement()
	if err == nil || !strings.Contains(err.Error(), `namespace "demo" cannot be labelled charter.dev/enforcement=enforce`) ||
		!strings.Contains(err.Error(), "Pod/privileged (") {
		t.Fatalf("promoting demo while the privileged Pod's report fails: %v, want a refusal naming Pod/privileged", err)
	}
	if err := cl.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "privileged"}}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(2 * time.Minute)
	for {
		err := setEnforcement()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("promoting demo once the privileged Pod is gone: %v", err)
		}
		time.Sleep(time.Second)
	}
}
