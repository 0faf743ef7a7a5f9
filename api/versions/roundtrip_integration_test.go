package versions_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/api/internal/roundtrip"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
)

// TestRoundTripOnRealAPIServer creates an object of every kind charter
// serves in more than one version (testdata/roundtrip.yaml) in each served
// version on a real API server with charter's CRDs, and reads it back in
// every served version: the spec, labels and annotations read in any
// version are those written, whatever the version written (nothing
// pruned, nothing added but the schema's defaults, which every version
// shows alike).
func TestRoundTripOnRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "kube-apiserver")); err != nil {
		t.Skipf("control plane binaries not built (make controlplane): %v", err)
	}
	crds := servedVersions(t, filepath.Join(root, "config", "crd", "bases"))
	docs, err := roundtrip.ReadDocuments("testdata")
	if err != nil {
		t.Fatal(err)
	}
	cp := controlplanetest.Start(t.Context(), t)
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	covered := map[string]bool{}
	for _, d := range docs {
		gk := schema.FromAPIVersionAndKind(d.APIVersion, d.Kind).GroupKind()
		crd, ok := crds[gk]
		if !ok {
			t.Errorf("%s: no CRD serves %s", d, gk)
			continue
		}
		covered[gk.String()] = true
		var obj map[string]any
		if err := yaml.Unmarshal(d.YAML, &obj); err != nil {
			t.Fatal(err)
		}
		written := unstructured.Unstructured{Object: obj}
		for _, from := range crd.versions {
			in := written.DeepCopy()
			in.SetAPIVersion(gk.Group + "/" + from)
			in.SetName(written.GetName() + "-" + from)
			gvr := gk.WithVersion(from).GroupVersion().WithResource(crd.plural)
			var created *unstructured.Unstructured
			deadline := time.Now().Add(30 * time.Second)
			for {
				created, err = dyn.Resource(gvr).Namespace(in.GetNamespace()).Create(ctx, in, metav1.CreateOptions{FieldValidation: "Strict"})
				if err == nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err != nil {
				t.Errorf("create %s %s in %s: %v", gk.Kind, in.GetName(), from, err)
				continue
			}
			if missing := lost(written.Object["spec"], created.Object["spec"], "spec"); len(missing) > 0 {
				t.Errorf("%s written in %s: the API server dropped or changed %s", gk.Kind, from, strings.Join(missing, ", "))
			}
			for _, to := range crd.versions {
				read, err := dyn.Resource(gk.WithVersion(to).GroupVersion().WithResource(crd.plural)).Namespace(in.GetNamespace()).
					Get(ctx, in.GetName(), metav1.GetOptions{})
				if err != nil {
					t.Errorf("get %s %s (written in %s) in %s: %v", gk.Kind, in.GetName(), from, to, err)
					continue
				}
				if got := read.GetAPIVersion(); got != gk.Group+"/"+to {
					t.Errorf("%s read in %s came back as %s", gk.Kind, to, got)
				}
				for _, field := range []string{"spec"} {
					if !reflect.DeepEqual(read.Object[field], created.Object[field]) {
						t.Errorf("%s written in %s, read in %s: %s differs:\nwritten %v\nread    %v", gk.Kind, from, to, field, created.Object[field], read.Object[field])
					}
				}
				if !reflect.DeepEqual(read.GetLabels(), written.GetLabels()) || !reflect.DeepEqual(read.GetAnnotations(), written.GetAnnotations()) {
					t.Errorf("%s written in %s, read in %s: labels %v annotations %v, want %v %v", gk.Kind, from, to,
						read.GetLabels(), read.GetAnnotations(), written.GetLabels(), written.GetAnnotations())
				}
			}
		}
	}
	for gk, crd := range crds {
		if len(crd.versions) > 1 && !covered[gk.String()] {
			t.Errorf("%s is served in %v but testdata/roundtrip.yaml has no object of it", gk, crd.versions)
		}
	}
}

type servedCRD struct {
	plural   string
	versions []string
}

// servedVersions reads the Kyverno CRDs of dir: their plural and served
// versions, by group and kind.
func servedVersions(t *testing.T, dir string) map[schema.GroupKind]servedCRD {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*kyverno.io_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Kyverno CRDs under %s: %v", dir, err)
	}
	out := map[schema.GroupKind]servedCRD{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		s := servedCRD{plural: crd.Spec.Names.Plural}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				s.versions = append(s.versions, v.Name)
			}
		}
		out[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = s
	}
	return out
}

// lost lists the paths of want that got lacks or holds with another value.
func lost(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{path}
		}
		var out []string
		for k, v := range w {
			out = append(out, lost(v, g[k], path+"."+k)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{path}
		}
		var out []string
		for i := range w {
			out = append(out, lost(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	default:
		if fmt.Sprint(want) != fmt.Sprint(got) {
			return []string{path}
		}
		return nil
	}
}
