package argocd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
	"github.com/charter-dev/charter/reconciler/cleanup"
	"github.com/charter-dev/charter/webhook/admission"
	"github.com/charter-dev/charter/webhook/status"
)

// builtinDir holds Argo CD's own health checks for Kyverno's kinds, as Argo
// CD ships them (testdata/argocd-builtin/README.md).
var builtinDir = filepath.Join("testdata", "argocd-builtin", "resource_customizations")

// builtinHealth runs Argo CD's built-in health check of obj's kind on obj.
func builtinHealth(t *testing.T, obj client.Object) health {
	t.Helper()
	gvk := obj.GetObjectKind().GroupVersionKind()
	script, err := os.ReadFile(filepath.Join(builtinDir, gvk.Group, gvk.Kind, "health.lua"))
	if err != nil {
		t.Fatalf("Argo CD has no built-in health check for %s here: %v", gvk.Kind, err)
	}
	return runScript(t, string(script), obj)
}

// charterHealth runs charter's own argocd-cm health check on obj.
func charterHealth(t *testing.T, obj client.Object) health {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("argocd-cm", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	return runScript(t, string(script), obj)
}

func runScript(t *testing.T, script string, obj client.Object) health {
	t.Helper()
	// As Argo CD hands it over: the object's JSON.
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	got, err := runHealthCheck(script, m)
	if err != nil {
		t.Fatalf("%s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
	return got
}

// testScheme knows every kind of testdata/cluster and what charter's
// controllers read.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kyvernov1.AddToScheme, kyvernov2.AddToScheme, policiesv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// clusterObjects decodes testdata/cluster/<file> into typed policies.
func clusterObjects(t *testing.T, s *runtime.Scheme, file string) []kyvernov1.PolicyInterface {
	t.Helper()
	var out []kyvernov1.PolicyInterface
	for _, obj := range decodeCluster(t, s, file) {
		p, ok := obj.(kyvernov1.PolicyInterface)
		if !ok {
			t.Fatalf("%s: %s is not a policy", file, obj.GetObjectKind().GroupVersionKind())
		}
		out = append(out, p)
	}
	return out
}

// deletingObjects decodes testdata/cluster/deleting.yaml: DeletingPolicy
// kinds, which the cleanup controller decides on, by the prefix of their
// name (ready-, refused-).
func deletingObjects(t *testing.T, s *runtime.Scheme) (ready, refused []policiesv1.DeletingPolicyLike) {
	t.Helper()
	for _, obj := range decodeCluster(t, s, "deleting.yaml") {
		p, ok := obj.(policiesv1.DeletingPolicyLike)
		if !ok {
			t.Fatalf("deleting.yaml: %s is not a DeletingPolicy kind", obj.GetObjectKind().GroupVersionKind())
		}
		if strings.HasPrefix(p.GetName(), "refused-") {
			refused = append(refused, p)
		} else {
			ready = append(ready, p)
		}
	}
	return ready, refused
}

// decodeCluster decodes testdata/cluster/<file> into typed objects with
// their apiVersion and kind set.
func decodeCluster(t *testing.T, s *runtime.Scheme, file string) []client.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "cluster", file))
	if err != nil {
		t.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(s).UniversalDeserializer()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []client.Object
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		o, ok := obj.(client.Object)
		if !ok {
			t.Fatalf("%s: %s is not an API object", file, gvk)
		}
		o.GetObjectKind().SetGroupVersionKind(*gvk)
		out = append(out, o)
	}
}

// checkDeletingReady checks Argo CD's built-in verdict on a DeletingPolicy
// kind charter's cleanup controller scheduled: Healthy, with the first
// True condition's message (PolicyCached: its next run).
func checkDeletingReady(t *testing.T, p policiesv1.DeletingPolicyLike) error {
	got := builtinHealth(t, p.(client.Object))
	cs := p.GetStatus().ConditionStatus
	c := apimeta.FindStatusCondition(cs.Conditions, policiesv1.ConditionPolicyCached)
	if c == nil || !cs.ReadyAt(p.GetGeneration()) || got.Status != "Healthy" || got.Message != c.Message || !strings.HasPrefix(c.Message, "next run at ") {
		return fmt.Errorf("%s %s: Argo CD says %s %q, want Healthy with PolicyCached's message (conditionStatus %+v)", p.GetKind(), p.GetName(), got.Status, got.Message, cs)
	}
	return nil
}

// checkDeletingRefused checks Argo CD's built-in verdict on a DeletingPolicy
// kind charter's cleanup controller cannot compile: Degraded, with
// charter's reason naming the field.
func checkDeletingRefused(t *testing.T, p policiesv1.DeletingPolicyLike) error {
	got := builtinHealth(t, p.(client.Object))
	cs := p.GetStatus().ConditionStatus
	want := "PolicyCached: " + cs.Message
	if got.Status != "Degraded" || got.Message != want || cs.IsReady() || !strings.Contains(cs.Message, "spec.schedule") {
		return fmt.Errorf("%s %s: Argo CD says %s %q, want Degraded %q naming spec.schedule (conditionStatus %+v)", p.GetKind(), p.GetName(), got.Status, got.Message, want, cs)
	}
	return nil
}

// healthyMessage is what Argo CD's built-in check says of a policy
// charter serves: WebhookConfigured's message for the policies.kyverno.io
// kinds (the condition it reads, or the first True one), the Ready
// condition's for ClusterPolicy and a fixed text for Policy.
func healthyMessage(kind string) string {
	switch kind {
	case kyvernov1.ClusterPolicyKind:
		return status.MessageReady
	case kyvernov1.PolicyKind:
		return "Policy is ready"
	}
	return status.MessageWebhookConfigured
}

// progressingMessage is what Argo CD's built-in check says of a policy
// with no status yet.
func progressingMessage(kind string) string {
	switch kind {
	case kyvernov1.ClusterPolicyKind:
		return "Waiting for ClusterPolicy to become ready"
	case kyvernov1.PolicyKind:
		return "Waiting for Policy to be ready"
	}
	return "Waiting for " + kind + " status"
}

// checkRefused checks Argo CD's built-in verdict on a policy charter does
// not serve: Degraded with charter's reason, except for Policy, whose
// built-in check knows no Degraded (Progressing, "Waiting for Policy to be
// ready"): there charter's own argocd-cm check says Degraded.
func checkRefused(t *testing.T, p kyvernov1.PolicyInterface) error {
	obj := p.(client.Object)
	got := builtinHealth(t, obj)
	switch p := p.(type) {
	case policiesv1.StatusHolder:
		cs := p.GetStatus().ConditionStatus
		want := "PolicyCached: " + cs.Message
		if got.Status != "Degraded" || got.Message != want || cs.Message == "" || cs.IsReady() {
			return fmt.Errorf("%s %s: Argo CD says %s %q, want Degraded %q (conditionStatus %+v)", p.GetKind(), p.GetName(), got.Status, got.Message, want, cs)
		}
	case *kyvernov1.ClusterPolicy:
		if got.Status != "Degraded" || !strings.Contains(got.Message, `unknown anchor "~(x)"`) {
			return fmt.Errorf("ClusterPolicy %s: Argo CD says %s %q, want Degraded naming the fault", p.Name, got.Status, got.Message)
		}
	case *kyvernov1.Policy:
		if got.Status != "Progressing" || got.Message != progressingMessage(p.Kind) {
			return fmt.Errorf("Policy %s: Argo CD's built-in check says %s %q, want Progressing (it knows no Degraded)", p.Name, got.Status, got.Message)
		}
		if own := charterHealth(t, obj); own.Status != "Degraded" || !strings.Contains(own.Message, `unknown anchor "~(x)"`) {
			return fmt.Errorf("Policy %s: charter's health check says %s %q, want Degraded naming the fault", p.Name, own.Status, own.Message)
		}
	}
	return nil
}

// checkReady checks Argo CD's built-in verdict on a policy charter serves.
func checkReady(t *testing.T, p kyvernov1.PolicyInterface) error {
	got := builtinHealth(t, p.(client.Object))
	if got.Status != "Healthy" || got.Message != healthyMessage(p.GetKind()) {
		return fmt.Errorf("%s %s: Argo CD says %s %q, want Healthy %q", p.GetKind(), p.GetName(), got.Status, got.Message, healthyMessage(p.GetKind()))
	}
	return nil
}

// TestBuiltinHealthChecksOnCharterStatus runs Argo CD's built-in health
// checks on the statuses charter's status controller decides for one
// policy of each kind it serves and one it cannot compile, before any
// status (Progressing), once decided (Healthy; Degraded with charter's
// reason) and after an edit not yet decided (Progressing).
func TestBuiltinHealthChecksOnCharterStatus(t *testing.T) {
	s := testScheme(t)
	ready, refused := clusterObjects(t, s, "ready.yaml"), clusterObjects(t, s, "refused.yaml")
	all := append(append([]kyvernov1.PolicyInterface{}, ready...), refused...)
	for _, p := range all {
		p.SetGeneration(1)
		if got := builtinHealth(t, p.(client.Object)); got.Status != "Progressing" || got.Message != progressingMessage(p.GetKind()) {
			t.Errorf("%s %s with no status: Argo CD says %s %q, want Progressing", p.GetKind(), p.GetName(), got.Status, got.Message)
		}
	}
	snap, err := policycache.Build(all, nil)
	if err != nil {
		t.Fatal(err)
	}
	decide := func(p kyvernov1.PolicyInterface) {
		t.Helper()
		v, ok := status.Decide(p, snap)
		if !ok {
			t.Fatalf("%s %s: no verdict", p.GetKind(), p.GetName())
		}
		switch p := p.(type) {
		case policiesv1.StatusHolder:
			*p.GetStatus() = *status.DesiredPolicyStatus(p, v)
		case kyvernov1.StatusHolder:
			*p.GetStatus() = *status.Desired(p, v)
		}
	}
	for _, p := range ready {
		decide(p)
		if err := checkReady(t, p); err != nil {
			t.Error(err)
		}
		// Edited: the status is about the last generation until charter
		// decides on the new one.
		p.SetGeneration(2)
		got := builtinHealth(t, p.(client.Object))
		if _, ok := p.(policiesv1.StatusHolder); ok && (got.Status != "Progressing" || !strings.Contains(got.Message, "to reflect latest generation")) {
			t.Errorf("%s %s edited: Argo CD says %s %q, want Progressing", p.GetKind(), p.GetName(), got.Status, got.Message)
		}
	}
	for _, p := range refused {
		decide(p)
		if err := checkRefused(t, p); err != nil {
			t.Error(err)
		}
	}
}

// TestBuiltinHealthChecksOnRealAPIServer: on a real API server, with
// charter's admission controllers (and so its status controller) and its
// cleanup controller (the DeletingPolicy kinds' status) running, Argo CD's
// built-in health checks find one policy of each kind
// Progressing before charter ran, Healthy once charter serves it, Degraded
// with charter's reason when charter cannot compile it, and Progressing
// right after an edit.
func TestBuiltinHealthChecksOnRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "kube-apiserver")); err != nil {
		t.Skipf("control plane binaries not built (make controlplane): %v", err)
	}
	ctx := t.Context()
	cp := controlplanetest.Start(ctx, t)
	s := testScheme(t)
	cl, err := client.New(cp.RESTConfig(), client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	const charterNamespace = "charter-system"
	for _, ns := range []string{charterNamespace, "team-a"} {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// Written before charter runs: its policy webhook would refuse the
	// broken ones.
	ready, refused := clusterObjects(t, s, "ready.yaml"), clusterObjects(t, s, "refused.yaml")
	readyDeleting, refusedDeleting := deletingObjects(t, s)
	var all []client.Object
	for _, p := range append(append([]kyvernov1.PolicyInterface{}, ready...), refused...) {
		all = append(all, p.(client.Object))
	}
	for _, p := range append(append([]policiesv1.DeletingPolicyLike{}, readyDeleting...), refusedDeleting...) {
		all = append(all, p.(client.Object))
	}
	for _, obj := range all {
		gvk := obj.GetObjectKind().GroupVersionKind()
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s %s: %v", gvk.Kind, obj.GetName(), err)
		}
		// The typed client drops apiVersion and kind; Argo CD reads them.
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		if got := builtinHealth(t, obj); got.Status != "Progressing" || got.Message != progressingMessage(gvk.Kind) {
			t.Errorf("%s %s before charter ran: Argo CD says %s %q, want Progressing", gvk.Kind, obj.GetName(), got.Status, got.Message)
		}
	}

	startCharter(t, cp.RESTConfig(), s, charterNamespace)

	get := func(p kyvernov1.PolicyInterface) (kyvernov1.PolicyInterface, error) {
		fresh := p.CreateDeepCopy()
		if err := cl.Get(ctx, client.ObjectKeyFromObject(p.(client.Object)), fresh.(client.Object)); err != nil {
			return nil, err
		}
		fresh.GetObjectKind().SetGroupVersionKind(p.GetObjectKind().GroupVersionKind())
		return fresh, nil
	}
	for _, p := range ready {
		eventually(t, p.GetKind()+" "+p.GetName()+" Healthy", func() error {
			fresh, err := get(p)
			if err != nil {
				return err
			}
			return checkReady(t, fresh)
		})
	}
	for _, p := range refused {
		eventually(t, p.GetKind()+" "+p.GetName()+" refused", func() error {
			fresh, err := get(p)
			if err != nil {
				return err
			}
			return checkRefused(t, fresh)
		})
	}
	getDeleting := func(p policiesv1.DeletingPolicyLike) (policiesv1.DeletingPolicyLike, error) {
		obj := p.(client.Object)
		fresh := obj.DeepCopyObject().(client.Object)
		if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
			return nil, err
		}
		fresh.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
		return fresh.(policiesv1.DeletingPolicyLike), nil
	}
	for _, p := range readyDeleting {
		eventually(t, p.GetKind()+" "+p.GetName()+" Healthy", func() error {
			fresh, err := getDeleting(p)
			if err != nil {
				return err
			}
			return checkDeletingReady(t, fresh)
		})
	}
	for _, p := range refusedDeleting {
		eventually(t, p.GetKind()+" "+p.GetName()+" refused", func() error {
			fresh, err := getDeleting(p)
			if err != nil {
				return err
			}
			return checkDeletingRefused(t, fresh)
		})
	}

	// An edit: the API server's answer carries the new generation and the
	// last one's status, which Argo CD calls Progressing; charter then
	// decides on the new generation.
	vpol, err := get(ready[2])
	if err != nil {
		t.Fatal(err)
	}
	edited := vpol.(*policiesv1.ValidatingPolicy)
	edited.Spec.Validations[0].Message = "label team is required (edited)"
	if err := cl.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	edited.GetObjectKind().SetGroupVersionKind(vpol.GetObjectKind().GroupVersionKind())
	if got := builtinHealth(t, edited); got.Status != "Progressing" || !strings.Contains(got.Message, "to reflect latest generation") {
		t.Errorf("ValidatingPolicy just edited: Argo CD says %s %q, want Progressing", got.Status, got.Message)
	}
	eventually(t, "edited ValidatingPolicy Healthy again", func() error {
		fresh, err := get(edited)
		if err != nil {
			return err
		}
		if !policiesv1.ReadyAt(fresh) {
			return fmt.Errorf("not ready at generation %d: %+v", fresh.GetGeneration(), fresh.(*policiesv1.ValidatingPolicy).Status.ConditionStatus)
		}
		return checkReady(t, fresh)
	})
}

// startCharter runs charter's admission controllers (policy cache, webhook
// configuration, status) and its cleanup controller on a manager until
// the test ends.
func startCharter(t *testing.T, cfg *rest.Config, s *runtime.Scheme, namespace string) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  s,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Setup reads its certificate Secret from charter's namespace only.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{namespace: {}}},
		}},
		Logger: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	state, err := clusterstate.New(mgr, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(freePort(t))
	if _, err := admission.Setup(mgr, admission.Options{
		State:        state,
		Addr:         "127.0.0.1:" + port,
		URL:          "https://127.0.0.1:" + port,
		Namespace:    namespace,
		ConfigResync: time.Second,
		StatusResync: 500 * time.Millisecond,
		Log:          testr.New(t),
	}); err != nil {
		t.Fatal(err)
	}
	// The cleanup controller decides on the DeletingPolicy kinds.
	if err := cleanup.Setup(mgr, cleanup.Options{State: state, Namespace: namespace, Log: testr.New(t)}); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Logf("manager: %v", err)
		}
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// eventually retries f until it returns nil, for up to two minutes: the
// machine may be slow, never the assertion.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
