package engine

import (
	"context"
	"reflect"
	"testing"

	"github.com/charter-dev/charter/engine/loader"
)

// ValidateTimed answers exactly what Validate answers on every validate
// case, and times each policy that responded.
func TestValidateTimedMatchesValidate(t *testing.T) {
	eachCase(t, "validate", func(t *testing.T, tc *validateCase) {
		set, err := Compile(decodePolicies(t, tc.Policies), WithExceptions(tc.Exceptions))
		if err != nil {
			t.Fatalf("compile: %v", err)
		}
		req := tc.request()
		opts := []EvalOption{WithLoaders(loader.Loaders{ConfigMaps: fakeConfigMaps(tc.ConfigMaps), APICalls: fakeAPI(tc.APICalls)})}
		if tc.Values != nil || tc.ContextValues != nil || tc.ForeachValues != nil {
			opts = append(opts, WithValues(fixedValues{tc.Values, tc.ContextValues, tc.ForeachValues}))
		}
		want := set.Validate(context.Background(), req, opts...)
		got := set.ValidateTimed(context.Background(), req, opts...)
		if len(got.Policies) == 0 {
			t.Fatal("no policy responded")
		}
		for i := range got.Policies {
			if got.Policies[i].Duration <= 0 {
				t.Errorf("policy %s: Duration %v, want more than 0", got.Policies[i].Key, got.Policies[i].Duration)
			}
			got.Policies[i].Duration = 0
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ValidateTimed\n%+v\nValidate\n%+v", got, want)
		}
	})
}
