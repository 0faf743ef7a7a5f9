package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/internal/controlplane"
)

var (
	clusterPolicies  = schema.GroupVersionResource{Group: "kyverno.io", Version: "v1", Resource: "clusterpolicies"}
	policyReports    = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}
	mutatingPolicies = schema.GroupVersionResource{Group: "policies.kyverno.io", Version: "v1", Resource: "mutatingpolicies"}
)

// startLocal starts the local provider with charter's CRDs from
// config/crd/bases. Missing binaries fail the test with the advice to run
// `make controlplane`; `make test` builds them first.
func startLocal(t *testing.T, ctx context.Context) *Local {
	t.Helper()
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := NewLocal()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			p.ControlPlane().KeepLogs()
			t.Logf("control plane logs kept in %s", p.ControlPlane().LogDir())
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Errorf("stopping the local cluster: %v", err)
		}
	})
	if err := InstallCRDs(ctx, p, filepath.Join(root, "config", "crd", "bases")); err != nil {
		t.Fatal(err)
	}
	return p
}

func readObject(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatalf("testdata/%s: %v", file, err)
	}
	return obj
}

// getTable reads one object the way kubectl get does: as a server-side Table.
func getTable(t *testing.T, ctx context.Context, cfg *rest.Config, path string) *metav1.Table {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := rest.RESTClientForConfigAndClient(withJSON(cfg), httpClient)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := client.Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET %s as Table: %v", path, err)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(raw, table); err != nil {
		t.Fatalf("decoding the Table of %s: %v\n%s", path, err, raw)
	}
	if table.Kind != "Table" {
		t.Fatalf("GET %s: got a %s, not a Table", path, table.Kind)
	}
	return table
}

func withJSON(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &schema.GroupVersion{}
	cfg.APIPath = "/"
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}

// kubectlColumns returns the column headers kubectl prints by default:
// priority 0 columns, upper-cased.
func kubectlColumns(table *metav1.Table) []string {
	var names []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			names = append(names, strings.ToUpper(c.Name))
		}
	}
	return names
}

func visibleCells(table *metav1.Table, row int) []string {
	var cells []string
	for i, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			cells = append(cells, fmt.Sprint(table.Rows[row].Cells[i]))
		}
	}
	return cells
}

func TestLocalClusterServesCharterAPIs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := startLocal(t, ctx)
	cfg := p.RESTConfig()
	dyn := dynamic.NewForConfigOrDie(cfg)

	// A ClusterPolicy, then a Ready condition on its status subresource:
	// readiness lives in status, never in spec. So do admission and
	// background with their defaults applied, as charter's status
	// controller writes them: the spec leaves admission out, and the
	// ADMISSION column still reads true.
	cpol, err := dyn.Resource(clusterPolicies).Create(ctx, readObject(t, "clusterpolicy.yaml"), metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("creating the ClusterPolicy: %v", err)
	}
	generation := cpol.GetGeneration()
	ready := map[string]any{
		"type": "Ready", "status": "True", "reason": "Compiled", "message": "policy ready",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}
	if err := unstructured.SetNestedSlice(cpol.Object, []any{ready}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(cpol.Object, true, "status", "admission"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(cpol.Object, false, "status", "background"); err != nil {
		t.Fatal(err)
	}
	cpol, err = dyn.Resource(clusterPolicies).UpdateStatus(ctx, cpol, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("writing the ClusterPolicy status: %v", err)
	}
	if cpol.GetGeneration() != generation {
		t.Errorf("status update moved generation from %d to %d", generation, cpol.GetGeneration())
	}

	// A MutatingPolicy that only mutates existing resources: the status
	// controller writes admission false (it mutates nothing at
	// admission), and kubectl get mpol shows it.
	mpol, err := dyn.Resource(mutatingPolicies).Create(ctx, readObject(t, "mutatingpolicy.yaml"), metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("creating the MutatingPolicy: %v", err)
	}
	// The CEL kinds have Kyverno's status shape: status.conditionStatus,
	// whose message is empty while the policy is ready.
	cached := map[string]any{
		"type": "PolicyCached", "status": "True", "reason": "Succeeded", "message": "policy compiled",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": mpol.GetGeneration(),
	}
	conditionStatus := map[string]any{"ready": true, "conditions": []any{cached}}
	for path, v := range map[string]any{"conditionStatus": conditionStatus, "admission": false, "background": true} {
		if err := unstructured.SetNestedField(mpol.Object, v, "status", path); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dyn.Resource(mutatingPolicies).UpdateStatus(ctx, mpol, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing the MutatingPolicy status: %v", err)
	}

	if _, err := dyn.Resource(policyReports).Namespace("default").Create(ctx, readObject(t, "policyreport.yaml"), metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatalf("creating the PolicyReport: %v", err)
	}

	tests := []struct {
		name      string
		path      string
		wantCols  []string
		wantCells []string // the cells before AGE
		afterAge  []string // the cells after AGE (Kyverno puts MESSAGE last)
	}{
		{
			name:      "kubectl get cpol",
			path:      "/apis/kyverno.io/v1/clusterpolicies/require-team-label",
			wantCols:  []string{"NAME", "ADMISSION", "BACKGROUND", "READY", "AGE", "MESSAGE"},
			wantCells: []string{"require-team-label", "true", "false", "True"},
			afterAge:  []string{"policy ready"},
		},
		{
			name:      "kubectl get mpol",
			path:      "/apis/policies.kyverno.io/v1/mutatingpolicies/label-configmaps",
			wantCols:  []string{"NAME", "ADMISSION", "BACKGROUND", "READY", "AGE", "MESSAGE"},
			wantCells: []string{"label-configmaps", "false", "true", "true"},
			afterAge:  []string{"<nil>"}, // no MESSAGE while ready
		},
		{
			name:      "kubectl get polr",
			path:      "/apis/wgpolicyk8s.io/v1alpha2/namespaces/default/policyreports/7d1c2a9e-1f4b-4c55-9a0e-3b2f1d6e8c10",
			wantCols:  []string{"NAME", "KIND", "NAME", "PASS", "FAIL", "WARN", "ERROR", "SKIP", "AGE"},
			wantCells: []string{"7d1c2a9e-1f4b-4c55-9a0e-3b2f1d6e8c10", "Pod", "web-0", "2", "1", "0", "0", "3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := getTable(t, ctx, cfg, tt.path)
			if got := kubectlColumns(table); strings.Join(got, " ") != strings.Join(tt.wantCols, " ") {
				t.Errorf("columns = %v, want %v", got, tt.wantCols)
			}
			if len(table.Rows) != 1 {
				t.Fatalf("%d rows, want 1", len(table.Rows))
			}
			cells := visibleCells(table, 0)
			if len(cells) != len(tt.wantCells)+1+len(tt.afterAge) {
				t.Fatalf("cells = %v, want %v, an age and %v", cells, tt.wantCells, tt.afterAge)
			}
			if got := strings.Join(cells[:len(tt.wantCells)], " | "); got != strings.Join(tt.wantCells, " | ") {
				t.Errorf("cells = %s, want %s", got, strings.Join(tt.wantCells, " | "))
			}
			if got := strings.Join(cells[len(tt.wantCells)+1:], " | "); got != strings.Join(tt.afterAge, " | ") {
				t.Errorf("cells after AGE = %s, want %s", got, strings.Join(tt.afterAge, " | "))
			}
			if age := cells[len(tt.wantCells)]; age == "" || age == "<unknown>" {
				t.Errorf("AGE = %q, want a duration", age)
			}
		})
	}

	t.Run("misspelt field refused", func(t *testing.T) {
		_, err := dyn.Resource(clusterPolicies).Create(ctx, readObject(t, "clusterpolicy-misspelt.yaml"), metav1.CreateOptions{FieldValidation: "Strict"})
		if err == nil {
			t.Fatal("the API server accepted spec.rules[0].validat")
		}
		if !strings.Contains(err.Error(), `unknown field "spec.rules[0].validat"`) {
			t.Errorf("error does not name the misspelt field: %v", err)
		}
	})

	t.Run("logs export", func(t *testing.T) {
		dir := t.TempDir()
		if err := p.ExportLogs(ctx, dir); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(filepath.Join(dir, "kube-apiserver.log")); err != nil || fi.Size() == 0 {
			t.Errorf("exported kube-apiserver.log missing or empty (%v)", err)
		}
	})
}

func TestLocalStopRemovesWorkFolder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := NewLocal()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	kubeconfig := p.KubeconfigPath()
	if _, err := os.Stat(kubeconfig); err != nil {
		_ = p.Stop(ctx)
		t.Fatalf("kubeconfig %s: %v", kubeconfig, err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.ControlPlane().WorkDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("work folder left behind after Stop: %v", err)
	}
}
