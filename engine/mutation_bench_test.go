package engine

import (
	"context"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/review"
)

// benchMutatePolicy has three mutate rules on Deployments: an add-if-absent
// securityContext (strategic merge with anchors), a JSON patch with a
// variable, and a foreach over the containers.
const benchMutatePolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: deployment-defaults}
spec:
  rules:
  - name: security-context
    match: {any: [{resources: {kinds: [Deployment]}}]}
    mutate:
      patchStrategicMerge:
        spec:
          template:
            spec:
              securityContext:
                +(runAsNonRoot): true
                +(seccompProfile): {type: RuntimeDefault}
  - name: owner-annotation
    match: {any: [{resources: {kinds: [Deployment]}}]}
    mutate:
      patchesJson6902: |-
        - op: add
          path: /metadata/annotations/owner
          value: "team-{{ request.object.metadata.labels.team }}"
  - name: pull-policy
    match: {any: [{resources: {kinds: [Deployment]}}]}
    mutate:
      foreach:
      - list: request.object.spec.template.spec.containers
        patchStrategicMerge:
          spec:
            template:
              spec:
                containers:
                - (name): "{{ element.name }}"
                  +(imagePullPolicy): IfNotPresent
`

func benchDeployment() map[string]any {
	return map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata": map[string]any{
			"name": "web", "namespace": "default",
			"labels":      map[string]any{"app": "web", "team": "payments"},
			"annotations": map[string]any{"note": "x"},
		},
		"spec": map[string]any{
			"replicas": int64(3),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{
					"containers": []any{
						map[string]any{"name": "app", "image": "ghcr.io/example/app:1.2.3",
							"ports": []any{map[string]any{"containerPort": int64(8080)}}},
						map[string]any{"name": "sidecar", "image": "envoyproxy/envoy:v1.30", "imagePullPolicy": "Always"},
					},
				},
			},
		},
	}
}

// BenchmarkMutateDeployment mutates a Deployment with three mutate rules
// and builds the admission patch.
func BenchmarkMutateDeployment(b *testing.B) {
	var p kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(benchMutatePolicy), &p); err != nil {
		b.Fatal(err)
	}
	set, err := Compile([]kyvernov1.PolicyInterface{&p})
	if err != nil {
		b.Fatal(err)
	}
	obj := benchDeployment()
	ctx := context.Background()
	req := &review.Request{Object: obj}
	if resp := set.Mutate(ctx, req); len(resp.Patch) == 0 || len(resp.Policies[0].Rules) != 3 {
		b.Fatalf("unexpected response: %+v", resp)
	}
	b.ReportAllocs()
	for b.Loop() {
		resp := set.Mutate(ctx, req)
		if len(resp.Patch) == 0 {
			b.Fatal("no patch")
		}
	}
}
