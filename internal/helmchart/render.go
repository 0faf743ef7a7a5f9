// Package helmchart renders charter's Helm chart (charts/charter) as `helm
// template` does, through Helm's own Go packages, for the tests that check
// what it installs and the e2e specs that install it.
package helmchart

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// HookAnnotation marks a Helm hook: Helm runs it around an install,
// upgrade or uninstall (webhooksCleanup's post-delete Job), not with the
// release's objects.
const HookAnnotation = "helm.sh/hook"

// Options name the release the chart is rendered for.
type Options struct {
	// ReleaseName is the release's name (default charter).
	ReleaseName string
	// Namespace is the release's namespace (default charter).
	Namespace string
	// Values override the chart's values.yaml, as `helm --values` does.
	Values map[string]any
}

// Rendered is what an install of the chart would create.
type Rendered struct {
	// CRDs are the chart's crds/ folder (config/crd/bases), which Helm
	// installs before anything else and never upgrades.
	CRDs []*unstructured.Unstructured
	// Objects are the release's objects, in template file order.
	Objects []*unstructured.Unstructured
	// Hooks are the objects Helm runs as hooks (HookAnnotation).
	Hooks []*unstructured.Unstructured
}

// Render renders the chart in dir with o.
func Render(dir string, o Options) (*Rendered, error) {
	if o.ReleaseName == "" {
		o.ReleaseName = "charter"
	}
	if o.Namespace == "" {
		o.Namespace = "charter"
	}
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", dir, err)
	}
	values, err := chartutil.ToRenderValues(ch, o.Values,
		chartutil.ReleaseOptions{Name: o.ReleaseName, Namespace: o.Namespace, Revision: 1, IsInstall: true, IsUpgrade: false},
		chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("chart %s values: %w", dir, err)
	}
	files, err := engine.Render(ch, values)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", dir, err)
	}
	out := &Rendered{}
	for _, crd := range ch.CRDObjects() {
		objs, err := decode(crd.Name, string(crd.File.Data))
		if err != nil {
			return nil, err
		}
		out.CRDs = append(out.CRDs, objs...)
	}
	names := slices.Sorted(maps.Keys(files))
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") || strings.HasPrefix(path.Base(name), "_") {
			continue // NOTES.txt, helpers
		}
		objs, err := decode(name, files[name])
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			if _, ok := obj.GetAnnotations()[HookAnnotation]; ok {
				out.Hooks = append(out.Hooks, obj)
			} else {
				out.Objects = append(out.Objects, obj)
			}
		}
	}
	return out, nil
}

// decode reads the YAML documents of one rendered file, in order.
func decode(name, manifest string) ([]*unstructured.Unstructured, error) {
	docs := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var out []*unstructured.Unstructured
	for i, k := range keys {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(docs[k]), &m); err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", name, i+1, err)
		}
		if len(m) == 0 {
			continue // only comments
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s, document %d: no kind or apiVersion", name, i+1)
		}
		out = append(out, u)
	}
	return out, nil
}
