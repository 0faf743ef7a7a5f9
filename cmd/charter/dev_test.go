package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/charter-dev/charter/internal/controlplane"
)

// readyWriter collects output and closes ready once marker has been written.
type readyWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	ready  chan struct{}
	once   sync.Once
}

func newReadyWriter(marker string) *readyWriter {
	return &readyWriter{marker: marker, ready: make(chan struct{})}
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.marker) {
		w.once.Do(func() { close(w.ready) })
	}
	return n, err
}

func (w *readyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// startDev runs `charter <args>` until it prints that it is ready, and
// returns its output so far and a function that interrupts it and returns
// its error and full output.
func startDev(t *testing.T, args ...string) (string, func() (error, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := newReadyWriter("Ctrl-C stops charter dev.")
	cmd := newRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(out)
	var runErr error
	exited := make(chan struct{})
	go func() { runErr = cmd.ExecuteContext(ctx); close(exited) }()
	t.Cleanup(func() { cancel(); <-exited })

	select {
	case <-out.ready:
	case <-exited:
		t.Fatalf("charter %s exited before it was ready: %v\n%s", strings.Join(args, " "), runErr, out)
	case <-time.After(2 * time.Minute):
		t.Fatalf("charter %s not ready within 2 minutes:\n%s", strings.Join(args, " "), out)
	}
	interrupt := func() (error, string) {
		cancel()
		select {
		case <-exited:
			return runErr, out.String()
		case <-time.After(time.Minute):
			t.Fatalf("charter dev did not stop within a minute of the interrupt:\n%s", out)
			return nil, ""
		}
	}
	return out.String(), interrupt
}

func crdDir(t *testing.T) string {
	t.Helper()
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "config", "crd", "bases")
}

var kubeconfigLine = regexp.MustCompile(`kubeconfig: (\S+)`)

func TestDevStartsAControlPlaneWithCharterCRDs(t *testing.T) {
	out, interrupt := startDev(t, "dev", "--crds", crdDir(t))

	m := kubeconfigLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no kubeconfig path in the output:\n%s", out)
	}
	kubeconfig := m[1]
	if want := "KUBECONFIG=" + kubeconfig + " kubectl get cpol"; !strings.Contains(out, want) {
		t.Errorf("output does not suggest %q:\n%s", want, out)
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("colour escapes written to a non-terminal:\n%q", out)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	crds := apiextensionsclient.NewForConfigOrDie(cfg).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Get(ctx, "clusterpolicies.kyverno.io", metav1.GetOptions{}); err != nil {
		t.Errorf("clusterpolicies.kyverno.io not installed: %v", err)
	}

	err, out = interrupt()
	if err != nil {
		t.Fatalf("charter dev returned %v after the interrupt:\n%s", err, out)
	}
	if !strings.Contains(out, "✓ stopped") {
		t.Errorf("output does not say the control plane stopped:\n%s", out)
	}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		t.Error("the control plane still answers after charter dev stopped")
	}
}

func TestDevWithKubeconfigLeavesTheClusterRunning(t *testing.T) {
	ctx := context.Background()
	cp, err := controlplane.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })

	out, interrupt := startDev(t, "dev", "--kubeconfig", cp.KubeconfigPath(), "--crds", crdDir(t))
	if !strings.Contains(out, "using the cluster at "+cp.RESTConfig().Host) {
		t.Errorf("output does not name the cluster in use:\n%s", out)
	}
	if err, out := interrupt(); err != nil {
		t.Fatalf("charter dev returned %v:\n%s", err, out)
	}
	crds := apiextensionsclient.NewForConfigOrDie(cp.RESTConfig()).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Get(ctx, "policyreports.wgpolicyk8s.io", metav1.GetOptions{}); err != nil {
		t.Errorf("after charter dev --kubeconfig: policyreports.wgpolicyk8s.io not there (%v); the cluster should still run with the CRDs installed", err)
	}
}
