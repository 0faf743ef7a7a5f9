// Package controlplanetest starts the local control plane for integration
// tests, the one way every package's tests do it.
package controlplanetest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/charter-dev/charter/internal/controlplane"
)

// Start starts etcd and kube-apiserver with charter's CRDs from
// config/crd/bases, stops them when the test ends, and keeps their logs
// (naming the folder) when it failed. ctx bounds the start and the
// control plane's life; opts add to it (controlplane.WithControllerManager).
func Start(ctx context.Context, t testing.TB, opts ...controlplane.Option) *controlplane.ControlPlane {
	t.Helper()
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := controlplane.Start(ctx, append([]controlplane.Option{controlplane.WithCRDs(filepath.Join(root, "config", "crd", "bases"))}, opts...)...)
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
	return cp
}

// InstallCRD installs a namespaced CustomResourceDefinition of
// group/version kind (resource plural) that keeps any fields, and waits
// until its objects can be listed: a stand-in for a third-party kind
// (Tekton's Task, Argo's Workflow) that policies match.
func InstallCRD(ctx context.Context, t testing.TB, cfg *rest.Config, gvr schema.GroupVersionResource, kind string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": gvr.Resource + "." + gvr.Group},
		"spec": map[string]any{
			"group": gvr.Group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": gvr.Resource, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List"},
			"versions": []any{map[string]any{"name": gvr.Version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crds).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not served 30s after its CRD was created: %v", gvr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
