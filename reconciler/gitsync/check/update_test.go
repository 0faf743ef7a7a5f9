package check

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

// teamPolicy is a Policy of team-a whose synchronized generate rule
// matches the ConfigMaps labelled selector.
func teamPolicy(selector string) string {
	return `apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: copy, namespace: team-a}
spec:
  rules:
  - name: copy
    match: {any: [{resources: {kinds: [ConfigMap], selector: {matchLabels: {` + selector + `: "true"}}}}]}
    generate:
      synchronize: true
      apiVersion: v1
      kind: Secret
      name: copy
      namespace: team-a
      data: {stringData: {a: b}}
`
}

func revision(t *testing.T, docs ...string) []build.Object {
	t.Helper()
	var objs []build.Object
	for _, doc := range docs {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, build.Object{Unstructured: &unstructured.Unstructured{Object: m}, File: "repo/policy.yaml"})
	}
	return objs
}

// TestUpdates: an installed policy's kept generate rule may change its
// data but not its match; a policy not installed yet, or without generate
// rules, is not read at all.
func TestUpdates(t *testing.T) {
	var installed kyvernov1.Policy
	if err := yaml.UnmarshalStrict([]byte(teamPolicy("copy")), &installed); err != nil {
		t.Fatal(err)
	}
	live := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(&installed).Build()
	ctx := context.Background()

	if err := Updates(ctx, revision(t, teamPolicy("copy")), testScheme(), live); err != nil {
		t.Errorf("unchanged: %v", err)
	}
	err := Updates(ctx, revision(t, teamPolicy("mirror")), testScheme(), live)
	var invalid *Error
	want := `repo/policy.yaml: Policy "team-a/copy": spec.rules[0] (generate rule "copy"): changes of immutable fields of a rule spec in a generate rule is disallowed: match changed`
	if !errors.As(err, &invalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("match changed: %v, want an *Error containing %q", err, want)
	}

	if err := Updates(ctx, revision(t, teamPolicy("mirror")), testScheme(), fake.NewClientBuilder().WithScheme(testScheme()).Build()); err != nil {
		t.Errorf("not installed yet: %v", err)
	}

	failing := interceptor.NewClient(live, interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return errors.New("API server down")
	}})
	if err := Updates(ctx, revision(t, policyWithoutGenerate), testScheme(), failing); err != nil {
		t.Errorf("a policy without generate rules was read: %v", err)
	}
	if err := Updates(ctx, revision(t, teamPolicy("copy")), testScheme(), failing); err == nil || errors.As(err, &invalid) || !strings.Contains(err.Error(), "API server down") {
		t.Errorf("a failed read: %v, want the read's error, not *Error", err)
	}
}

const policyWithoutGenerate = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: labels}
spec:
  rules:
  - name: team
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {message: team, pattern: {metadata: {labels: {team: "?*"}}}}
`
