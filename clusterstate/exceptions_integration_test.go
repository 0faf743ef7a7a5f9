package clusterstate

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
)

const denyPods = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: deny-pods}
spec:
  rules:
  - name: deny
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {failureAction: Enforce, message: no Pods, deny: {}}
`

const denyPodsVPol = `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: deny-pods-cel}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - {expression: "false", message: no Pods}
`

// celPodException exempts Pods in namespace for from the ValidatingPolicy
// deny-pods-cel.
func celPodException(namespace, name, forNamespace string) *policiesv1.PolicyException {
	return &policiesv1.PolicyException{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: policiesv1.PolicyExceptionSpec{
			PolicyRefs:      []policiesv1.PolicyRef{{Name: "deny-pods-cel", Kind: policiesv1.ValidatingPolicyKind}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "ns", Expression: "object.metadata.namespace == '" + forNamespace + "'"}},
		},
	}
}

// podException exempts Pods in namespace for from deny-pods.
func podException(namespace, name, forNamespace string) *kyvernov2.PolicyException {
	return &kyvernov2.PolicyException{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: kyvernov2.PolicyExceptionSpec{
			Exceptions: []kyvernov2.Exception{{PolicyName: "deny-pods", RuleNames: []string{"deny"}}},
			Match: kyvernov2.MatchResources{Any: kyvernov1.ResourceFilters{{ResourceDescription: kyvernov1.ResourceDescription{
				Kinds: []string{"Pod"}, Namespaces: []string{forNamespace}}}}},
		},
	}
}

// TestExceptionNamespacesOnAPIServer runs the process's cluster state
// against a real API server with --exception-namespaces=platform: the
// platform team's exception exempts Pods in team-a, as Kyverno applies a
// trusted namespace's exceptions to any namespace; team-b's exception for
// itself is in no set (admission's snapshot nor Installed, which every
// other controller compiles from) and gets one Warning event saying why,
// once per generation of the exception. The same holds for a
// policies.kyverno.io PolicyException of a ValidatingPolicy.
func TestExceptionNamespacesOnAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := controlplanetest.Start(ctx, t)
	mgr := newManager(t, cp, ctrl.Options{})
	state, err := New(mgr, logr.Discard(), WithExceptionNamespaces(trustPlatform(t)), WithExceptionEvents())
	if err != nil {
		t.Fatal(err)
	}
	cl := mgr.GetClient()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	for _, ns := range []string{"platform", "team-a", "team-b"} {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	var policy kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(denyPods), &policy); err != nil {
		t.Fatal(err)
	}
	var vpol policiesv1.ValidatingPolicy
	if err := yaml.UnmarshalStrict([]byte(denyPodsVPol), &vpol); err != nil {
		t.Fatal(err)
	}
	platform, teamB := podException("platform", "let-team-a", "team-a"), podException("team-b", "let-me-in", "team-b")
	celPlatform, celTeamB := celPodException("platform", "cel-let-team-a", "team-a"), celPodException("team-b", "cel-let-me-in", "team-b")
	for _, obj := range []client.Object{&policy, platform, teamB, &vpol, celPlatform, celTeamB} {
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	if !state.Policies.WaitForSync(ctx) {
		t.Fatal("the policy cache did not sync")
	}

	in := state.Policies.Installed()
	if len(in.Exceptions) != 1 || in.Exceptions[0].Namespace != "platform" {
		t.Errorf("Installed exceptions %v, want platform/let-team-a only", exceptionKeys(in.Exceptions))
	}
	if len(in.CELExceptions) != 1 || in.CELExceptions[0].Namespace != "platform" {
		t.Errorf("Installed CEL exceptions %d, want platform/cel-let-team-a only", len(in.CELExceptions))
	}
	// verdict is each policy's result ("<kind> <status>") for a Pod in ns.
	verdict := func(ns string) string {
		pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "web", "namespace": ns}}
		req := &engine.Request{Object: pod, Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}}
		resp := state.Policies.Snapshot().Fail.Validate(ctx, req)
		var out []string
		for _, p := range resp.Policies {
			for _, r := range p.Rules {
				out = append(out, p.Policy.GetKind()+" "+string(r.Status))
			}
		}
		sort.Strings(out)
		return strings.Join(out, ", ")
	}
	if got, want := verdict("team-a"), "ClusterPolicy skip, ValidatingPolicy skip"; got != want {
		t.Errorf("Pod in team-a: %s, want %s (the platform team's exceptions)", got, want)
	}
	if got, want := verdict("team-b"), "ClusterPolicy fail, ValidatingPolicy fail"; got != want {
		t.Errorf("Pod in team-b: %s, want %s (team-b's own exceptions are ignored)", got, want)
	}

	ignoredEventsOf := func(name string) (int, string) {
		events, err := kube.EventsV1().Events("team-b").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n, msg := 0, ""
		for _, ev := range events.Items {
			if ev.Regarding.Kind == "PolicyException" && ev.Regarding.Name == name && ev.Reason == ReasonExceptionIgnored {
				n, msg = n+1, ev.Note
				if ev.Series != nil {
					n += int(ev.Series.Count) - 1
				}
			}
		}
		return n, msg
	}
	ignoredEvents := func() (int, string) { return ignoredEventsOf("let-me-in") }
	eventually(t, "the event on team-b's CEL exception", func() error {
		if n, msg := ignoredEventsOf("cel-let-me-in"); n != 1 || !strings.Contains(msg, `PolicyException team-b/cel-let-me-in is ignored`) {
			return fmt.Errorf("%d events, last %q", n, msg)
		}
		return nil
	})
	eventually(t, "the event on team-b's exception", func() error {
		if n, msg := ignoredEvents(); n != 1 || !strings.Contains(msg, `only from namespace platform (--exception-namespaces=platform), not from "team-b"`) {
			return fmt.Errorf("%d events, last %q", n, msg)
		}
		return nil
	})

	// Rebuilds for other changes report nothing new; a new generation of
	// the ignored exception is reported again.
	if err := cl.Get(ctx, client.ObjectKeyFromObject(platform), platform); err != nil {
		t.Fatal(err)
	}
	platform.Spec.Match.Any[0].ResourceDescription.Names = []string{"web"}
	if err := cl.Update(ctx, platform); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the platform exception's edit in Installed", func() error {
		if ex := state.Policies.Installed().Exceptions; len(ex) != 1 || len(ex[0].Spec.Match.Any[0].ResourceDescription.Names) != 1 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	time.Sleep(time.Second)
	if n, _ := ignoredEvents(); n != 1 {
		t.Errorf("%d events after an unrelated rebuild, want still 1", n)
	}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(teamB), teamB); err != nil {
		t.Fatal(err)
	}
	teamB.Spec.Match.Any[0].ResourceDescription.Names = []string{"web"}
	if err := cl.Update(ctx, teamB); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a second event for the exception's new generation", func() error {
		if n, _ := ignoredEvents(); n != 2 {
			return fmt.Errorf("%d events", n)
		}
		return nil
	})
}

func exceptionKeys(exs []*kyvernov2.PolicyException) []string {
	out := make([]string, len(exs))
	for i, ex := range exs {
		out[i] = ex.Namespace + "/" + ex.Name
	}
	return out
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

// newManager is a manager on cp knowing the kyverno.io and
// policies.kyverno.io types, without metrics or probes, as o further sets.
func newManager(t *testing.T, cp *controlplane.ControlPlane, o ctrl.Options) ctrl.Manager {
	t.Helper()
	o.Scheme = runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kyvernov1.AddToScheme, kyvernov2.AddToScheme, policiesv1.AddToScheme} {
		if err := add(o.Scheme); err != nil {
			t.Fatal(err)
		}
	}
	o.Logger = logr.Discard()
	o.Metrics = metricsserver.Options{BindAddress: "0"}
	o.HealthProbeBindAddress = "0"
	mgr, err := ctrl.NewManager(cp.RESTConfig(), o)
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// trustPlatform is --exception-namespaces=platform.
func trustPlatform(t *testing.T) policycache.ExceptionNamespaces {
	t.Helper()
	trusted, err := policycache.ParseExceptionNamespaces([]string{"platform"})
	if err != nil {
		t.Fatal(err)
	}
	return trusted
}
