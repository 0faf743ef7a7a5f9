package engine

import (
	"context"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/mutate"
	"github.com/charter-dev/charter/engine/review"
)

// TestMutateConcurrentUse runs one PolicySet from several goroutines (run
// it with -race): compiled patches are shared and must never be modified.
func TestMutateConcurrentUse(t *testing.T) {
	var p kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(benchMutatePolicy), &p); err != nil {
		t.Fatal(err)
	}
	set, err := Compile([]kyvernov1.PolicyInterface{&p})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := set.Mutate(ctx, &review.Request{Object: benchDeployment()}).Object
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				got := set.Mutate(ctx, &review.Request{Object: benchDeployment()}).Object
				if !mutate.Equal(got, want) {
					t.Errorf("concurrent Mutate gave a different object")
					return
				}
			}
		})
	}
	wg.Wait()
}
