package check

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/internal/validationcases"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

// TestKyvernoPolicyValidation: a revision holding any policy of
// engine/testdata/validation that Kyverno refuses is not applied, its
// fault naming the file and the field; one holding a policy Kyverno only
// warns about applies, and the warning is given, naming the file. It is
// the check policy admission makes; a discovery case is checked against
// the kinds a fake discovery serves (fakeDiscovery), as policy admission
// checks it against the API server's.
func TestKyvernoPolicyValidation(t *testing.T) {
	for _, tc := range validationcases.Load(t) {
		t.Run(tc.Name, func(t *testing.T) {
			const repoFile = "policies/policy.yaml"
			var warnings []Fault
			opts := []Option{Warnings(&warnings)}
			if tc.Discovery {
				opts = append(opts, Cluster(policycheck.NewDiscoveryCluster(fakeDiscovery())))
			}
			err := Objects([]build.Object{{Unstructured: &unstructured.Unstructured{Object: tc.Policy}, File: repoFile}}, testScheme(), opts...)
			if tc.Warning != "" {
				if err != nil {
					t.Fatalf("a policy Kyverno only warns about must apply: %v", err)
				}
				for _, w := range warnings {
					if w.File == repoFile && strings.Contains(w.Message, tc.Warning) {
						return
					}
				}
				t.Fatalf("warnings %v: none in %s says %q", warnings, repoFile, tc.Warning)
			}
			var revErr *Error
			if !errors.As(err, &revErr) {
				t.Fatalf("applied; want a fault at %s: %v", tc.Field, err)
			}
			for _, f := range revErr.Faults {
				if f.File == repoFile && f.Field == tc.Field {
					return
				}
			}
			t.Fatalf("no fault names %s in %s: %v", tc.Field, repoFile, err)
		})
	}
}
