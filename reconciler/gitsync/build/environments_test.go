package build

import (
	"context"
	"testing"
)

// TestDevEnvironmentHasTheLibrarysBackgroundPolicies: environments/dev
// (what charter dev and make run apply) carries every generate and mutate
// policy of charter's library (policies/generate, policies/mutate), so a
// policy added there reaches dev or this test says which is missing.
func TestDevEnvironmentHasTheLibrarysBackgroundPolicies(t *testing.T) {
	dev, err := Build(context.Background(), "../../..", "environments/dev")
	if err != nil {
		t.Fatal(err)
	}
	inDev := map[string]bool{}
	for _, o := range dev {
		inDev[o.GetKind()+"/"+o.GetName()] = true
	}
	for _, dir := range []string{"policies/generate", "policies/mutate"} {
		library, err := Build(context.Background(), "../../..", dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(library) == 0 {
			t.Fatalf("no policy in %s", dir)
		}
		for _, o := range library {
			// Policies only: the library's folders also hold the
			// expected outputs of its tests.
			if group := o.GroupVersionKind().Group; group != "kyverno.io" && group != "policies.kyverno.io" {
				continue
			}
			if key := o.GetKind() + "/" + o.GetName(); !inDev[key] {
				t.Errorf("%s (%s) is not in environments/dev", key, o.File)
			}
		}
	}
}
