package controlplane

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/charter-dev/charter/internal/workdir"
)

func TestMissingBinariesSaysToRunMakeControlplane(t *testing.T) {
	dir := t.TempDir()
	// etcd present, kube-apiserver absent: the error names exactly what is missing.
	if err := os.WriteFile(filepath.Join(dir, EtcdBinary), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cp := New(WithBinaryDir(dir))
	err := cp.Start(context.Background())
	var missing *MissingBinariesError
	if !errors.As(err, &missing) {
		t.Fatalf("Start with no kube-apiserver: error = %v, want a *MissingBinariesError", err)
	}
	if got := strings.Join(missing.Missing, ","); got != APIServerBinary {
		t.Errorf("missing = %q, want %q", got, APIServerBinary)
	}
	if !strings.Contains(err.Error(), "run `make controlplane`") {
		t.Errorf("error %q does not say to run `make controlplane`", err)
	}
	if err := cp.Stop(); err != nil {
		t.Errorf("Stop after a failed Start: %v", err)
	}
}

func TestDefaultBinaryDir(t *testing.T) {
	t.Setenv(AssetsEnv, "/opt/assets")
	if got, err := DefaultBinaryDir(); err != nil || got != "/opt/assets" {
		t.Errorf("with %s set: DefaultBinaryDir() = %q, %v; want /opt/assets", AssetsEnv, got, err)
	}
	t.Setenv(AssetsEnv, "")
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("ModuleRoot() = %s, which holds no go.mod", root)
	}
	if got, err := DefaultBinaryDir(); err != nil || got != filepath.Join(root, "bin") {
		t.Errorf("without %s: DefaultBinaryDir() = %q, %v; want %s", AssetsEnv, got, err, filepath.Join(root, "bin"))
	}
}

// requireBinaries fails (never skips) when the binaries are missing: `make
// test` builds them first, and a skipped control plane test hides breakage.
func requireBinaries(t *testing.T) string {
	t.Helper()
	dir, err := DefaultBinaryDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := binaryPaths(dir, true); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestControlPlaneLifecycle(t *testing.T) {
	requireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	started := time.Now()
	cp, err := Start(ctx, WithCRDs("testdata/crds"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control plane started in %s", time.Since(started).Round(time.Millisecond))
	stopped := false
	defer func() {
		if !stopped {
			_ = cp.Stop()
		}
	}()

	// The kubeconfig file is what kubectl would use: load it the same way.
	kcfg, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath())
	if err != nil {
		t.Fatalf("loading %s: %v", cp.KubeconfigPath(), err)
	}
	cs := kubernetes.NewForConfigOrDie(kcfg)
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("reading namespace default through the kubeconfig file: %v", err)
	}
	// Its user is named as kubeadm and kind name the administrator:
	// policies reading request.userInfo see what they see there.
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := review.Status.UserInfo; u.Username != KubeconfigUser || !slices.Contains(u.Groups, "system:masters") {
		t.Errorf("the kubeconfig file's user is %s %v, want %s in system:masters", u.Username, u.Groups, KubeconfigUser)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stored", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a Pod: %v", err)
	}

	// The CRDs from WithCRDs are served as soon as Start returns.
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	widgets := schema.GroupVersionResource{Group: "test.charter.dev", Version: "v1", Resource: "widgets"}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.charter.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1"},
		"spec":     map[string]any{"size": int64(3)},
	}}
	if _, err := dyn.Resource(widgets).Namespace("default").Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a Widget: %v", err)
	}

	// Installing again is an idempotent apply.
	if _, err := InstallCRDs(ctx, cp.RESTConfig(), "testdata/crds"); err != nil {
		t.Fatalf("installing the CRDs a second time: %v", err)
	}

	for _, name := range []string{"etcd.log", "kube-apiserver.log"} {
		if fi, err := os.Stat(filepath.Join(cp.LogDir(), name)); err != nil || fi.Size() == 0 {
			t.Errorf("log %s missing or empty (%v)", name, err)
		}
	}
	exported := t.TempDir()
	if err := cp.CopyLogs(exported); err != nil {
		t.Fatalf("CopyLogs: %v", err)
	}
	if _, err := os.Stat(filepath.Join(exported, "kube-apiserver.log")); err != nil {
		t.Errorf("CopyLogs did not copy kube-apiserver.log: %v", err)
	}

	workDir := cp.WorkDir()
	certDir := cp.env.WebhookInstallOptions.LocalServingCertDir
	if certDir == "" {
		t.Error("envtest wrote no serving certificates: the leak this checks is no longer tested")
	}
	// Removed by Start already, so a killed process does not leave it.
	if _, err := os.Stat(certDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("envtest's serving certificates %s still there while the control plane runs (err %v)", certDir, err)
	}
	if _, err := os.Stat(filepath.Join(workDir, workdir.LockFile)); err != nil {
		t.Errorf("the running control plane's work folder has no lock: %v", err)
	}
	if stale, err := RemoveStaleWorkDirs(filepath.Dir(workDir)); err != nil || slices.Contains(stale, workDir) {
		t.Errorf("RemoveStaleWorkDirs removed %v (err %v): a folder in use is not stale", stale, err)
	}
	if err := cp.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	stopped = true
	for _, dir := range []string{workDir, certDir} {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("folder %s still there after Stop (err %v)", dir, err)
		}
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
		t.Error("the API server still answers after Stop")
	}
	if err := cp.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestFailedStartStopsEverythingAndKeepsLogs(t *testing.T) {
	requireBinaries(t)
	// A flag kube-apiserver refuses: etcd starts, the API server exits at once.
	cp := New(WithAPIServerFlag("no-such-flag", "x"), WithStartTimeout(20*time.Second))
	err := cp.Start(context.Background())
	if err == nil {
		_ = cp.Stop()
		t.Fatal("Start with an unknown kube-apiserver flag succeeded")
	}
	t.Cleanup(func() { _ = os.RemoveAll(cp.WorkDir()) })
	if !strings.Contains(err.Error(), cp.LogDir()) {
		t.Errorf("error does not say where the logs are (%s): %v", cp.LogDir(), err)
	}
	if !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("error does not quote kube-apiserver's complaint: %v", err)
	}
	if !cp.LogsKept() {
		t.Error("logs not kept after a failed start")
	}
	if err := cp.Stop(); err != nil {
		t.Errorf("Stop after a failed Start: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cp.LogDir(), "kube-apiserver.log")); err != nil {
		t.Errorf("kube-apiserver.log gone after a failed start: %v", err)
	}
}

// RestartAPIServer replaces the kube-apiserver process in place: a watch
// opened before it ends, and afterwards the same clients (the kubeconfig
// file's user, RESTConfig's) reach the new process on the same port,
// which serves what etcd kept.
func TestRestartAPIServer(t *testing.T) {
	requireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := Start(ctx)
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
	kcfg, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	fromFile := kubernetes.NewForConfigOrDie(kcfg)
	before, err := fromFile.CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before-restart"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watch, err := fromFile.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	host := cp.RESTConfig().Host

	restarted := time.Now()
	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver restarted in %s", time.Since(restarted).Round(time.Millisecond))
	// The old process is gone: its watch ended (the channel closes).
	for range watch.ResultChan() {
	}
	if got := cp.RESTConfig().Host; got != host {
		t.Errorf("RESTConfig's host changed from %s to %s", host, got)
	}
	admin := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	for name, cs := range map[string]kubernetes.Interface{"kubeconfig file": fromFile, "RESTConfig": admin} {
		got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, before.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("through the %s after the restart: %v", name, err)
		}
		if got.UID != before.UID {
			t.Errorf("through the %s: ConfigMap %s has UID %s after the restart, %s before: etcd's data was not kept", name, before.Name, got.UID, before.UID)
		}
	}
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-restart"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("writing after the restart: %v", err)
	}

	// etcd, which the restart left alone, serves its key count.
	resp, err := http.Get(cp.EtcdURL() + "/metrics")
	if err != nil {
		t.Fatalf("etcd's metrics at %s: %v", cp.EtcdURL(), err)
	}
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(metrics), "etcd_debugging_mvcc_keys_total") {
		t.Errorf("etcd's metrics at %s (err %v) hold no etcd_debugging_mvcc_keys_total", cp.EtcdURL(), err)
	}

	if err := cp.Stop(); err != nil {
		t.Fatalf("Stop after a restart: %v", err)
	}
	if _, err := admin.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
		t.Error("the restarted API server still answers after Stop")
	}
	if err := cp.RestartAPIServer(ctx); err == nil {
		t.Error("RestartAPIServer after Stop succeeded")
	}
}
