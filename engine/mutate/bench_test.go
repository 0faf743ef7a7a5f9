package mutate

import (
	"testing"
)

const benchDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web, tier: frontend}
  annotations: {owner: team-a}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      serviceAccountName: web
      volumes:
      - {name: cfg, configMap: {name: web}}
      - {name: tmp, emptyDir: {}}
      containers:
      - name: web
        image: "registry.example.com/web:1.4.2"
        ports: [{containerPort: 8080, name: http}]
        env: [{name: MODE, value: prod}, {name: LOG, value: info}]
        resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 256Mi}}
        volumeMounts: [{name: cfg, mountPath: /etc/web}, {name: tmp, mountPath: /tmp}]
        securityContext: {runAsUser: 1000}
      - name: sidecar
        image: "registry.example.com/proxy:2.0"
        ports: [{containerPort: 15001}]
`

var (
	benchAddLabels = map[string]any{
		"metadata": map[string]any{"labels": map[string]any{
			"+(app.kubernetes.io/managed-by)": "charter",
			"+(tier)":                         "backend",
		}},
	}
	benchSecurityContext = map[string]any{
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{
				"(name)": "?*",
				"securityContext": map[string]any{
					"+(runAsNonRoot)":             true,
					"+(allowPrivilegeEscalation)": false,
					"+(runAsUser)":                int64(1000),
				},
			}},
		}}},
	}
	benchJSONPatch = `- {op: add, path: /metadata/annotations/charter.dev~1mutated, value: "true"}`
)

// BenchmarkThreeRules runs three typical mutate rules on a Deployment, each on the
// previous one's output, as the engine does: add labels with +(), default
// securityContext on every container through a conditional element, a JSON 6902 add.
func BenchmarkThreeRules(b *testing.B) {
	deploy := mustYAML(b, benchDeployment)
	jp, err := DecodeJSON6902(benchJSONPatch)
	if err != nil {
		b.Fatal(err)
	}
	run := func() map[string]any {
		r, err := StrategicMerge(deploy, benchAddLabels)
		if err != nil {
			b.Fatal(err)
		}
		if r, err = StrategicMerge(r, benchSecurityContext); err != nil {
			b.Fatal(err)
		}
		if r, err = ApplyJSON6902(r, jp); err != nil {
			b.Fatal(err)
		}
		return r
	}
	run() // load kyaml's schema outside the measurement
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run()
	}
}

func BenchmarkStrategicMerge(b *testing.B) {
	deploy := mustYAML(b, benchDeployment)
	if _, err := StrategicMerge(deploy, benchSecurityContext); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := StrategicMerge(deploy, benchSecurityContext); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJSON6902(b *testing.B) {
	deploy := mustYAML(b, benchDeployment)
	jp, _ := DecodeJSON6902(benchJSONPatch)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ApplyJSON6902(deploy, jp); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDiff(b *testing.B) {
	deploy := mustYAML(b, benchDeployment)
	after, _ := StrategicMerge(deploy, benchSecurityContext)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Diff(deploy, after)
	}
}
