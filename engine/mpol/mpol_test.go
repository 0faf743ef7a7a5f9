package mpol

import (
	"testing"

	"sigs.k8s.io/yaml"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/internal/cachetest"
)

// TestVariantsAreSharedThenReleased: a compiled variant is shared by the
// policies compiled from the same spec with one cache while one holds it,
// and dropped from the cache once none does, so a process that compiles
// policy after policy does not keep them all. Without a cache, or across
// two, nothing is shared.
func TestVariantsAreSharedThenReleased(t *testing.T) {
	const marker = "TestMutatingVariantsAreSharedThenReleased"
	src := &policiesv1.MutatingPolicy{}
	if err := yaml.UnmarshalStrict([]byte(`
apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: released}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  variables:
  - {name: released, expression: "'`+marker+`'"}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{metadata: Object.metadata{labels: {'released': variables.released}}}"
`), src); err != nil {
		t.Fatal(err)
	}
	cachetest.SharedThenReleased(t, marker, func(cache *celruntime.Cache) any {
		mp, errs := Compile(src, src.Name, cache)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return mp.variants[0]
	})
}
