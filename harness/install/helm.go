// Package install puts charter into a cluster the way a platform team
// does, with its Helm chart (charts/charter) and charter's image, and takes
// it out again. The e2e suite uses it on clusters whose nodes run Pods
// (kind) to test charter from its image: its in-cluster RBAC,
// Service-routed webhooks, leader election across replicas, and uninstall.
package install

import (
	"context"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// Helm installs and uninstalls a chart (charts/charter) as `helm install
// --create-namespace --wait` and `helm uninstall --wait` do, hooks
// included, through Helm's own library.
type Helm struct {
	cfg       *action.Configuration
	release   string
	namespace string
}

// NewHelm prepares Helm for the cluster of kubeconfig, with the release
// named release in namespace; log receives Helm's progress messages.
func NewHelm(kubeconfig, namespace, release string, log func(format string, args ...any)) (*Helm, error) {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	flags.Namespace = &namespace
	cfg := new(action.Configuration)
	logLine := func(format string, args ...any) { log(format+"\n", args...) }
	if err := cfg.Init(flags, namespace, "secret", logLine); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	return &Helm{cfg: cfg, release: release, namespace: namespace}, nil
}

// ImageValues are the chart values that run image (name:tag).
func ImageValues(image string) map[string]any {
	repo, tag, _ := strings.Cut(image, ":")
	if tag == "" {
		tag = "latest"
	}
	return map[string]any{"image": map[string]any{"repository": repo, "tag": tag}}
}

// Install installs the chart in dir with values and waits until its
// workloads are ready.
func (h *Helm) Install(ctx context.Context, dir string, values map[string]any, timeout time.Duration) error {
	chart, err := loader.Load(dir)
	if err != nil {
		return fmt.Errorf("loading chart %s: %w", dir, err)
	}
	install := action.NewInstall(h.cfg)
	install.ReleaseName = h.release
	install.Namespace = h.namespace
	install.CreateNamespace = true
	install.Wait = true
	install.Timeout = timeout
	if _, err := install.RunWithContext(ctx, chart, values); err != nil {
		return fmt.Errorf("helm install %s %s: %w", h.release, dir, err)
	}
	return nil
}

// Uninstall uninstalls the release, running its hooks, and waits until
// its objects are gone.
func (h *Helm) Uninstall(timeout time.Duration) error {
	uninstall := action.NewUninstall(h.cfg)
	uninstall.Wait = true
	uninstall.Timeout = timeout
	if _, err := uninstall.Run(h.release); err != nil {
		return fmt.Errorf("helm uninstall %s: %w", h.release, err)
	}
	return nil
}
