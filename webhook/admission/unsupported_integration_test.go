package admission

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// warningRecorder keeps the warnings the API server relays.
type warningRecorder struct {
	mu       sync.Mutex
	messages []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, message string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.messages = append(w.messages, message)
}

func (w *warningRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.messages...)
}

// TestUnsupportedOnRealAPIServer: what charter cannot run in the cluster
// never looks enforced. An Enforce policy using it is refused at policy
// admission with its field path, an Audit one is admitted with a warning,
// and both, if they are in the cluster, are Ready=False with reason
// Unsupported.
func TestUnsupportedOnRealAPIServer(t *testing.T) {
	// Written before charter runs, as a policy restored from a backup
	// would be: the policy webhook never saw it.
	slipped := policyFile(t, "assert-enforce.yaml")
	slipped.Name = "slipped-in"
	f := startAdmission(t,
		withObjects(slipped),
		withOptions(func(o *Options) { o.StatusResync = 500 * time.Millisecond }),
	)
	ctx := f.ctx
	warnings := &warningRecorder{}
	cfg := rest.CopyConfig(f.cp.RESTConfig())
	cfg.WarningHandler = warnings
	cl, err := client.New(cfg, client.Options{Scheme: f.scheme})
	if err != nil {
		t.Fatal(err)
	}
	const notSupported = "spec.rules[0].validate.assert: validate.assert is not supported by charter anywhere yet"

	t.Run("an Enforce validate.assert policy is refused with its field path", func(t *testing.T) {
		p := policyFile(t, "assert-enforce.yaml")
		// The API server may call the webhook before its certificate is
		// served; retry until the answer is the webhook's.
		eventually(t, "policy refused", 30*time.Second, func() error {
			err := cl.Create(ctx, p.DeepCopy())
			if err == nil {
				_ = cl.Delete(ctx, p.DeepCopy())
				t.Fatal("an Enforce policy charter cannot run was admitted")
			}
			want := `admission webhook "validate-policy.charter.svc" denied the request: ClusterPolicy "assert-enforce": ` + notSupported
			if !strings.Contains(err.Error(), want) {
				return fmt.Errorf("%v, want %q", err, want)
			}
			return nil
		})
	})

	t.Run("kubectl apply refuses it the same way", func(t *testing.T) {
		kubectl, err := exec.LookPath("kubectl")
		if err != nil {
			t.Skip("kubectl is not on PATH; the request it sends is the one above")
		}
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", f.cp.KubeconfigPath(), "apply",
			"-f", filepath.Join("testdata", "policies", "assert-enforce.yaml"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err == nil {
			t.Fatalf("kubectl apply succeeded: %s", out.String())
		}
		if !strings.Contains(out.String(), notSupported) {
			t.Errorf("kubectl apply said %q, want %q", out.String(), notSupported)
		}
		t.Logf("kubectl apply: %s", out.String())
	})

	condition := func(name string) (*metav1.Condition, error) {
		var p kyvernov1.ClusterPolicy
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
			return nil, err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, kyvernov1.PolicyConditionReady)
		if c == nil || c.ObservedGeneration != p.Generation {
			return nil, errNotYet(name + ": no Ready condition for this generation yet")
		}
		return c, nil
	}
	wantUnsupported := func(name, message string) {
		t.Helper()
		eventually(t, name+" Unsupported", 30*time.Second, func() error {
			c, err := condition(name)
			if err != nil {
				return err
			}
			if c.Status != metav1.ConditionFalse || c.Reason != kyvernov1.PolicyReasonUnsupported || c.Message != message {
				return fmt.Errorf("Ready condition %+v", c)
			}
			return nil
		})
	}

	t.Run("an Audit policy is admitted with a warning, and is not Ready", func(t *testing.T) {
		p := policyFile(t, "assert-audit.yaml")
		if err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		field := notSupported
		want := `ClusterPolicy "assert-audit": ` + field + "; admitted as its rule only audits, and its status shows Ready=False, reason Unsupported"
		if got := warnings.all(); len(got) != 1 || got[0] != want {
			t.Errorf("warnings %q, want [%q]", got, want)
		}
		wantUnsupported("assert-audit", field)
	})

	t.Run("an Enforce policy that got in anyway is not Ready", func(t *testing.T) {
		wantUnsupported("slipped-in", notSupported)
	})

	t.Run("kubectl get cpol shows why", func(t *testing.T) {
		kubectl, err := exec.LookPath("kubectl")
		if err != nil {
			t.Skip("kubectl is not on PATH; the columns come from the CRD's additionalPrinterColumns")
		}
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", f.cp.KubeconfigPath(), "get", "cpol", "slipped-in").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl get cpol: %v: %s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], "READY") || !strings.Contains(lines[0], "MESSAGE") ||
			!strings.Contains(lines[1], "False") || !strings.HasSuffix(lines[1], notSupported) {
			t.Errorf("kubectl get cpol:\n%s", out)
		}
		t.Logf("kubectl get cpol:\n%s", out)
	})
}
