package admission

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/internal/validationcases"
)

// warningCollector keeps the warnings the API server relays.
type warningCollector struct {
	mu       sync.Mutex
	warnings []string
}

func (c *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warnings = append(c.warnings, text)
}

func (c *warningCollector) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.warnings
	c.warnings = nil
	return out
}

// dryRun creates obj with a dry run as cl, whose warnings c keeps, and
// returns the warnings the API server relayed that start with prefix.
func (c *warningCollector) dryRun(ctx context.Context, cl client.Client, obj client.Object, prefix string) ([]string, error) {
	c.take()
	if err := cl.Create(ctx, obj, client.DryRunAll); err != nil {
		return nil, err
	}
	var got []string
	for _, w := range c.take() {
		if strings.HasPrefix(w, prefix) {
			got = append(got, w)
		}
	}
	return got, nil
}

// warningClient is a client of the control plane's administrator that
// keeps the warnings the API server relays.
func (f *fixture) warningClient(t *testing.T) (client.Client, *warningCollector) {
	t.Helper()
	warnings := &warningCollector{}
	cfg := rest.CopyConfig(f.cp.RESTConfig())
	cfg.WarningHandler = warnings
	cl, err := client.New(cfg, client.Options{Scheme: f.scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl, warnings
}

// TestKyvernoPolicyValidationOnRealAPIServer: every policy of
// engine/testdata/validation (the checks docs/policy-validation.md lists)
// is refused by /policyvalidate on a real API server, the denial naming
// the field, and every warning case is admitted with Kyverno's warning.
func TestKyvernoPolicyValidationOnRealAPIServer(t *testing.T) {
	cases := validationcases.Load(t)
	f := startAdmission(t, withNamespaces("team"))
	cl, warnings := f.warningClient(t)
	first := true
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			policy := &unstructured.Unstructured{Object: tc.Policy}
			create := func() error {
				warnings.take()
				err := cl.Create(f.ctx, policy.DeepCopy())
				if err == nil {
					_ = cl.Delete(f.ctx, policy.DeepCopy())
				}
				return err
			}
			if tc.Warning != "" {
				if err := create(); err != nil {
					t.Fatalf("a warning case must be admitted: %v", err)
				}
				if got := warnings.take(); !slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, tc.Warning) }) {
					t.Fatalf("warnings %q lack %q", got, tc.Warning)
				}
				return
			}
			check := func() error {
				err := create()
				switch {
				case err == nil:
					t.Fatalf("admitted; want a denial naming %s", tc.Field)
				case apierrors.IsInvalid(err) && strings.Contains(err.Error(), tc.Field+": "):
					// The CRD schema refuses it (a required field, an
					// enum), as Kyverno's does: the API server refuses
					// before the webhook, naming the field.
					return nil
				case !strings.Contains(err.Error(), `admission webhook "validate-policy.charter.svc" denied the request`):
					return err
				case !strings.Contains(err.Error(), ": "+tc.Field+": "):
					t.Fatalf("denied, but not naming %s: %v", tc.Field, err)
				}
				return nil
			}
			if first {
				// The API server may call the webhook before its
				// certificate is served.
				eventually(t, "denial", 30*time.Second, check)
				first = false
				return
			}
			if err := check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
