package admission

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestGlobalContextEntryWarningOnRealAPIServer: a ClusterPolicy whose
// rules read a GlobalContextEntry that does not exist is admitted with
// Kyverno's warning for each reference ("Global context entry registries
// does not exist or is not ready"), and without it once the entry is
// written and Ready.
func TestGlobalContextEntryWarningOnRealAPIServer(t *testing.T) {
	f := startAdmission(t, withNamespaces("platform"), withObjects(registryHost("ghcr", "ghcr.io")),
		withOptions(func(o *Options) { o.Events.Disabled = true }))
	cl, warnings := f.warningClient(t)
	var policy unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(registriesPolicy), &policy.Object); err != nil {
		t.Fatal(err)
	}
	entryWarnings := func() ([]string, error) {
		return warnings.dryRun(f.ctx, cl, policy.DeepCopy(), "Global context entry")
	}

	want := []string{
		"Global context entry registries.hosts does not exist or is not ready",
		"Global context entry registries does not exist or is not ready",
	}
	eventually(t, "warnings for the missing entry", 30*time.Second, func() error {
		got, err := entryWarnings()
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("warnings %q, want %q", got, want)
		}
		return nil
	})

	f.createUnstructured(t, registriesFromConfigMaps)
	eventually(t, "no warning once the entry is Ready", 30*time.Second, func() error {
		got, err := entryWarnings()
		if err != nil {
			return err
		}
		if len(got) > 0 {
			return fmt.Errorf("warnings %q", got)
		}
		return nil
	})
}
