package cpol

import (
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/internal/cachetest"
	"github.com/charter-dev/charter/engine/jmespath"
)

// A compiled CEL part of a ClusterPolicy (a validate.cel rule, webhook
// matchConditions; engine/vpol and engine/mpol test their kinds') is
// shared by the policies compiled with one cache while one holds it, and
// dropped from the cache once none does, so a process that compiles
// policy after policy (every edit in the cluster, every suite of charter
// test) does not keep them all. Without a cache nothing is shared.
func TestCompiledVariantsAreSharedThenReleased(t *testing.T) {
	const marker = "TestCompiledVariantsAreSharedThenReleased"
	tests := []struct {
		name     string
		manifest string
		// compiled is the shared part of the policy.
		compiled func(*Policy) any
	}{{
		name: "ClusterPolicy validate.cel",
		manifest: `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: released}
spec:
  rules:
  - name: cel
    match:
      any:
      - resources: {kinds: [Pod]}
    validate:
      cel:
        expressions:
        - expression: "'TestCompiledVariantsAreSharedThenReleased' != ''"
`,
		compiled: func(p *Policy) any { return p.rules[0].validate.cel },
	}, {
		name: "webhook matchConditions",
		manifest: `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: released}
spec:
  webhookConfiguration:
    matchConditions:
    - {name: released, expression: "'TestCompiledVariantsAreSharedThenReleased' != ''"}
  rules:
  - name: deny
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {failureAction: Enforce, deny: {}}
`,
		compiled: func(p *Policy) any { return p.webhookConditions },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cachetest.SharedThenReleased(t, marker, func(cache *celruntime.Cache) any {
				src := &kyvernov1.ClusterPolicy{}
				if err := yaml.UnmarshalStrict([]byte(tt.manifest), src); err != nil {
					t.Fatal(err)
				}
				p, errs := Compile(src, src.GetName(), jmespath.New(), cache)
				if len(errs) > 0 {
					t.Fatal(errs)
				}
				return tt.compiled(p)
			})
		})
	}
}
