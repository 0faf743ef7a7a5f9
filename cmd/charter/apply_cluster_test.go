package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/internal/cliapply"
	"github.com/charter-dev/charter/internal/controlplane"
)

// clusterPolicy reads the allowed teams from a ConfigMap and requires an
// owner label in namespaces labelled env=prod: both answers come from the
// cluster under --cluster.
const clusterPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: cluster-data}
spec:
  validationFailureAction: Enforce
  background: true
  rules:
  - name: known-team
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: teams
      configMap: {name: teams, namespace: shop}
    - name: namespaces
      apiCall: {urlPath: /api/v1/namespaces, jmesPath: "items[?metadata.labels.env=='prod'].metadata.name"}
    validate:
      message: "team {{ request.object.metadata.labels.team }} is not one of {{ teams.data.allowed }} (prod: {{ join(',', namespaces) }})"
      deny:
        conditions:
          all:
          - key: "{{ request.object.metadata.labels.team }}"
            operator: AnyNotIn
            value: "{{ split(teams.data.allowed, ',') }}"
  - name: prod-owner
    match:
      any:
      - resources:
          kinds: [Pod]
          namespaceSelector: {matchLabels: {env: prod}}
    validate:
      message: prod Pods need an owner
      pattern: {metadata: {labels: {owner: "?*"}}}
`

// TestApplyCluster runs `charter apply --cluster` against a local API
// server: without --resource it evaluates the cluster's Pods (only those
// of --namespace), reading the ConfigMap, the apiCall and the namespace
// labels from the cluster; with --resource it evaluates the file's Pod
// with the same cluster data.
func TestApplyCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	cl := devTestClient(t, cp.RESTConfig())
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"env": "prod"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dev"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "teams", Namespace: "shop"}, Data: map[string]string{"allowed": "payments,search"}},
		pod("shop", "web", map[string]string{"team": "payments", "owner": "ann"}),
		pod("shop", "rogue", map[string]string{"team": "games"}),
		pod("dev", "elsewhere", map[string]string{"team": "games"}),
	} {
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatalf("create %s: %v", obj.GetName(), err)
		}
	}
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	writeTestFile(t, policyFile, clusterPolicy)

	records, stderr, err := runApply(t, policyFile, "--cluster", "--kubeconfig", cp.KubeconfigPath(), "--namespace", "shop", "-o", "json")
	var exit exitError
	if !errors.As(err, &exit) || exit.code != 1 {
		t.Fatalf("apply --cluster: %v (stderr %s), want exit 1 for the Enforce failures", err, stderr)
	}
	want := []string{
		"Pod/shop/rogue cluster-data/known-team fail team games is not one of payments,search (prod: shop)",
		"Pod/shop/rogue cluster-data/prod-owner fail",
		"Pod/shop/web cluster-data/known-team pass",
		"Pod/shop/web cluster-data/prod-owner pass",
	}
	if got := recordLines(records); !slices.Equal(got, want) {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	resource := filepath.Join(dir, "pod.yaml")
	writeTestFile(t, resource, "apiVersion: v1\nkind: Pod\nmetadata: {name: new, namespace: dev, labels: {team: search}}\nspec: {containers: [{name: c, image: nginx}]}\n")
	records, stderr, err = runApply(t, policyFile, "--cluster", "--kubeconfig", cp.KubeconfigPath(), "--resource", resource, "-o", "json")
	if err != nil {
		t.Fatalf("apply --cluster --resource: %v (stderr %s)", err, stderr)
	}
	if got, want := recordLines(records), []string{"Pod/dev/new cluster-data/known-team pass"}; !slices.Equal(got, want) {
		t.Errorf("records %q, want %q (dev is no prod namespace)", got, want)
	}

	// Without --cluster the same file has no cluster to read from.
	records, _, _ = runApply(t, policyFile, "--resource", resource, "-o", "json")
	if got := recordLines(records); len(got) != 1 || !strings.Contains(got[0], "known-team error") {
		t.Errorf("without --cluster: %q, want an error result for the ConfigMap entry", got)
	}
}

func pod(namespace, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func runApply(t *testing.T, args ...string) ([]cliapply.Record, string, error) {
	t.Helper()
	cmd := newApplyCommand()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	var records []cliapply.Record
	if out.Len() > 0 {
		if jerr := json.Unmarshal(out.Bytes(), &records); jerr != nil {
			t.Fatalf("output is not JSON records: %v\n%s", jerr, out.String())
		}
	}
	return records, errOut.String(), err
}

// recordLines reduces records to "Kind/ns/name policy/rule result
// message", sorted; pass messages are left out.
func recordLines(records []cliapply.Record) []string {
	var out []string
	for _, r := range records {
		line := r.Resource.Kind + "/" + r.Resource.Namespace + "/" + r.Resource.Name + " " + r.Policy + "/" + r.Rule + " " + r.Result
		if r.Result == "fail" && r.Rule == "known-team" {
			line += " " + r.Message
		}
		if r.Result == "error" {
			line = r.Resource.Kind + "/" + r.Resource.Namespace + "/" + r.Resource.Name + " " + r.Rule + " error"
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return out
}
