//go:build unix

package controlplane

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

func TestMissingControllerManagerIsNamed(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{EtcdBinary, APIServerBinary} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Without WithControllerManager its binary is not needed.
	if _, _, _, err := binaryPaths(dir, false); err != nil {
		t.Fatalf("binaryPaths without kube-controller-manager: %v", err)
	}
	cp := New(WithBinaryDir(dir), WithControllerManager())
	err := cp.Start(context.Background())
	var missing *MissingBinariesError
	if !errors.As(err, &missing) {
		t.Fatalf("Start with no kube-controller-manager: error = %v, want a *MissingBinariesError", err)
	}
	if got := strings.Join(missing.Missing, ","); got != ControllerManagerBinary {
		t.Errorf("missing = %q, want %q", got, ControllerManagerBinary)
	}
	_ = cp.Stop()
}

// TestControllerManagerActsAsInARealCluster: with kube-controller-manager
// a deleted namespace goes away with its objects, and an object whose
// owner is deleted is garbage-collected; without it both stay forever
// (the namespace Terminating).
func TestControllerManagerActsAsInARealCluster(t *testing.T) {
	ctx, cp := startWithControllerManager(t)
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig())

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "inside", Namespace: "doomed"}}
	if _, err := cs.CoreV1().ConfigMaps("doomed").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	owner, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owned", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, BlockOwnerDeletion: ptr.To(true)}}}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, owned, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := cs.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, "namespace doomed", func() error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		return err
	})
	waitGone(ctx, t, "ConfigMap default/owned, whose owner was deleted", func() error {
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "owned", metav1.GetOptions{})
		return err
	})

	if fi, err := os.Stat(filepath.Join(cp.LogDir(), controllerManagerLog)); err != nil || fi.Size() == 0 {
		t.Errorf("%s missing or empty (%v)", controllerManagerLog, err)
	}
	pid := cp.kcm.cmd.Process.Pid
	if err := cp.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kube-controller-manager (pid %d) still there after Stop: kill -0 = %v", pid, err)
	}
}

// waitGone polls get until it answers NotFound; ctx bounds the wait.
func waitGone(ctx context.Context, t *testing.T, what string, get func() error) {
	t.Helper()
	for {
		err := get()
		if apierrors.IsNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still there (last answer: %v)", what, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// startWithControllerManager starts a control plane with
// kube-controller-manager for the test, stopped at its end (logs kept
// when it failed), and a context bounding the test to 5 minutes.
func startWithControllerManager(t *testing.T) (context.Context, *ControlPlane) {
	t.Helper()
	requireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	cp, err := Start(ctx, WithControllerManager())
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
	return ctx, cp
}
