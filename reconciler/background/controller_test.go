package background

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/enginetest"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/webhook/server"
	"github.com/charter-dev/charter/webhook/updaterequest"
)

const charterNamespace = "charter-system"

type env struct {
	t   *testing.T
	ctx context.Context
	cp  *controlplane.ControlPlane
	cl  client.Client
	sch *runtime.Scheme
}

// startEnv gives a test the package's shared control plane, emptied of
// what earlier tests made (resetCluster), with charter's namespace.
func startEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	cp := sharedControlPlane(t)
	sch := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kyvernov1.AddToScheme, kyvernov2.AddToScheme, policiesv1.AddToScheme} {
		if err := add(sch); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := client.New(cp.RESTConfig(), client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, cp: cp, cl: cl, sch: sch}
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: charterNamespace}})
	return e
}

// startController runs a background controller under its own manager, as
// charter serve does.
func (e *env) startController(opts Options) (*Controller, *clusterstate.State) {
	e.t.Helper()
	return e.startControllerAs(e.cp.RESTConfig(), opts)
}

// startControllerAs runs a background controller with the given
// identity.
func (e *env) startControllerAs(cfg *rest.Config, opts Options) (*Controller, *clusterstate.State) {
	e.t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: e.sch, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		e.t.Fatal(err)
	}
	state, err := clusterstate.New(mgr, testr.New(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	opts.State, opts.Namespace, opts.Logger = state, charterNamespace, testr.New(e.t)
	c, err := Setup(mgr, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("manager: %v", err)
		}
	})
	return c, state
}

func (e *env) create(obj client.Object) {
	e.t.Helper()
	if err := e.cl.Create(e.ctx, obj); err != nil {
		e.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func (e *env) applyPolicy(file string, edit func(*kyvernov1.ClusterPolicy)) *kyvernov1.ClusterPolicy {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		e.t.Fatal(err)
	}
	var p kyvernov1.ClusterPolicy
	if err := yaml.Unmarshal(data, &p); err != nil {
		e.t.Fatal(err)
	}
	if edit != nil {
		edit(&p)
	}
	var cur kyvernov1.ClusterPolicy
	if err := e.cl.Get(e.ctx, client.ObjectKey{Name: p.Name}, &cur); err == nil {
		cur.Spec = p.Spec
		if err := e.cl.Update(e.ctx, &cur); err != nil {
			e.t.Fatal(err)
		}
		return &cur
	}
	e.create(&p)
	return &p
}

func (e *env) namespace(name string) *corev1.Namespace {
	e.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bg-test": "true"}}}
	e.create(ns)
	return ns
}

func (e *env) eventually(what string, check func() error) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("%s: %v", what, err)
}

func (e *env) networkPolicy(ns string) (*networkingv1.NetworkPolicy, error) {
	var np networkingv1.NetworkPolicy
	err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "default-deny"}, &np)
	return &np, err
}

func (e *env) wantPolicyTypes(ns string, want ...networkingv1.PolicyType) {
	e.t.Helper()
	e.eventually("NetworkPolicy default-deny in "+ns+" with policyTypes "+fmt.Sprint(want), func() error {
		np, err := e.networkPolicy(ns)
		if err != nil {
			return err
		}
		if fmt.Sprint(np.Spec.PolicyTypes) != fmt.Sprint(want) {
			return fmt.Errorf("policyTypes %v", np.Spec.PolicyTypes)
		}
		if np.Labels["generate.kyverno.io/policy-name"] != "default-deny" || np.Labels["app.kubernetes.io/managed-by"] != "kyverno" {
			return fmt.Errorf("labels %v", np.Labels)
		}
		return nil
	})
}

// build returns the UpdateRequests admission would make for a request,
// through the webhook's generator and the policies as admission compiles
// them, without creating them.
func (e *env) build(op kyvernov1.AdmissionOperation, obj, old client.Object) []*kyvernov2.UpdateRequest {
	e.t.Helper()
	toMap := func(o client.Object) map[string]any {
		if o == nil {
			return nil
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			e.t.Fatal(err)
		}
		gvk, _, _ := e.sch.ObjectKinds(o)
		m["apiVersion"], m["kind"] = gvk[0].GroupVersion().String(), gvk[0].Kind
		return m
	}
	return e.buildRequest(&engine.Request{Operation: op, Object: toMap(obj), OldObject: toMap(old)})
}

// buildRequest is build of an engine request.
func (e *env) buildRequest(req *engine.Request) []*kyvernov2.UpdateRequest {
	e.t.Helper()
	policies, err := policycache.ListPolicies(e.ctx, e.cl)
	if err != nil {
		e.t.Fatal(err)
	}
	set := enginetest.Set(e.t, policies...)
	gen := updaterequest.NewGenerator(e.cl, charterNamespace, loader.Loaders{}, 0, testr.New(e.t))
	return gen.Build(e.ctx, server.BackgroundRecord{UID: types.UID("admission-" + string(req.Operation)), Request: req, Sets: []*engine.PolicySet{set}})
}

// admit creates the UpdateRequests admission would for a request, through
// the webhook's generator and the policies as admission compiles them.
func (e *env) admit(op kyvernov1.AdmissionOperation, obj, old client.Object) {
	e.t.Helper()
	urs := e.build(op, obj, old)
	if len(urs) == 0 {
		e.t.Fatalf("admission of %s %s made no UpdateRequest", op, obj.GetName())
	}
	e.createUpdateRequests(urs)
}

// createUpdateRequests creates UpdateRequests as the generator does.
func (e *env) createUpdateRequests(urs []*kyvernov2.UpdateRequest) {
	e.t.Helper()
	for _, ur := range urs {
		e.create(ur)
		// As the generator does: Pending after the create, unless the
		// controller was quicker and wrote a state already.
		ur.Status.State = kyvernov2.Pending
		if err := e.cl.Status().Update(e.ctx, ur); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			e.t.Fatal(err)
		}
	}
}

func (e *env) updateRequests() []kyvernov2.UpdateRequest {
	e.t.Helper()
	var urs kyvernov2.UpdateRequestList
	if err := e.cl.List(e.ctx, &urs, client.InNamespace(charterNamespace)); err != nil {
		e.t.Fatal(err)
	}
	return urs.Items
}

// TestGenerate drives the controller through generate's lifecycle on a
// real API server: existing triggers (generateExisting), a new trigger's
// UpdateRequest, drift restored (edit and delete), a data change reaching
// every copy, a clone following its source, and the trigger's deletion
// removing its downstream object.
func TestGenerate(t *testing.T) {
	e := startEnv(t)
	e.namespace("existing")
	c, _ := e.startController(Options{})

	e.applyPolicy("default-deny.yaml", nil)
	e.wantPolicyTypes("existing", networkingv1.PolicyTypeIngress)

	// A new namespace: admission's UpdateRequest.
	created := e.namespace("created")
	e.admit(kyvernov1.Create, created, nil)
	e.wantPolicyTypes("created", networkingv1.PolicyTypeIngress)
	e.eventually("the UpdateRequest is removed once done", func() error {
		if urs := e.updateRequests(); len(urs) != 0 {
			return fmt.Errorf("%d UpdateRequests left: %+v", len(urs), urs[0].Status)
		}
		return nil
	})

	// Drift: an edit and a deletion are undone.
	np, err := e.networkPolicy("created")
	if err != nil {
		t.Fatal(err)
	}
	np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	if err := e.cl.Update(e.ctx, np); err != nil {
		t.Fatal(err)
	}
	e.wantPolicyTypes("created", networkingv1.PolicyTypeIngress)
	if err := e.cl.Delete(e.ctx, np); err != nil {
		t.Fatal(err)
	}
	e.wantPolicyTypes("created", networkingv1.PolicyTypeIngress)

	// A data change reaches every copy.
	e.applyPolicy("default-deny.yaml", func(p *kyvernov1.ClusterPolicy) {
		p.Spec.Rules[0].Generation.RawData = &apiextv1.JSON{Raw: []byte(`{"spec":{"podSelector":{},"policyTypes":["Ingress","Egress"]}}`)}
	})
	e.wantPolicyTypes("existing", networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress)
	e.wantPolicyTypes("created", networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress)

	// An unchanged cluster is not written again.
	time.Sleep(time.Second)
	writes := c.Stats().Writes.Load()
	time.Sleep(2 * time.Second)
	if n := c.Stats().Writes.Load() - writes; n != 0 {
		t.Errorf("%d writes while nothing changed, want none", n)
	}

	// The trigger goes: its downstream object goes with it.
	if err := e.cl.Delete(e.ctx, created); err != nil {
		t.Fatal(err)
	}
	e.admit(kyvernov1.Delete, nil, created)
	e.eventually("the NetworkPolicy of the deleted namespace is deleted", func() error {
		_, err := e.networkPolicy("created")
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %v)", err)
	})
	if _, err := e.networkPolicy("existing"); err != nil {
		t.Errorf("the other namespace's NetworkPolicy: %v", err)
	}
}

// TestGenerateClone clones a Secret from platform into labelled
// namespaces and carries a change of the source to the copy.
func TestGenerateClone(t *testing.T) {
	e := startEnv(t)
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}})
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "registry"}, StringData: map[string]string{"token": "v1"}})
	e.namespace("team-a")
	e.startController(Options{})
	e.applyPolicy("clone-secret.yaml", nil)
	wantToken := func(v string) {
		e.t.Helper()
		e.eventually("Secret team-a/registry with token "+v, func() error {
			var s corev1.Secret
			if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "team-a", Name: "registry"}, &s); err != nil {
				return err
			}
			if string(s.Data["token"]) != v {
				return fmt.Errorf("token %q", s.Data["token"])
			}
			return nil
		})
	}
	wantToken("v1")
	var src corev1.Secret
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "platform", Name: "registry"}, &src); err != nil {
		t.Fatal(err)
	}
	src.Data["token"] = []byte("v2")
	if err := e.cl.Update(e.ctx, &src); err != nil {
		t.Fatal(err)
	}
	wantToken("v2")
}

// TestUnmanagedObjectIsNotTakenOver: a NetworkPolicy a user made is left
// as it is, and the controller says so.
func TestUnmanagedObjectIsNotTakenOver(t *testing.T) {
	e := startEnv(t)
	e.namespace("hand-made")
	user := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "hand-made", Name: "default-deny"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}}
	e.create(user)
	e.startController(Options{})
	e.applyPolicy("default-deny.yaml", nil)
	e.eventually("an event saying the NetworkPolicy is not taken over", func() error {
		var events corev1.EventList
		if err := e.cl.List(e.ctx, &events); err != nil {
			return err
		}
		for _, ev := range events.Items {
			if ev.Reason == ReasonDownstreamExists && strings.Contains(ev.Message, "hand-made/default-deny") {
				return nil
			}
		}
		return fmt.Errorf("no %s event among %d", ReasonDownstreamExists, len(events.Items))
	})
	np, err := e.networkPolicy("hand-made")
	if err != nil {
		t.Fatal(err)
	}
	if np.Labels["generate.kyverno.io/policy-name"] != "" || fmt.Sprint(np.Spec.PolicyTypes) != "[Egress]" {
		t.Errorf("the user's NetworkPolicy was changed: labels %v, policyTypes %v", np.Labels, np.Spec.PolicyTypes)
	}
}

// TestFailedUpdateRequestStays: an UpdateRequest that keeps failing is
// retried, then stays Failed with its reason and an event on the policy.
func TestFailedUpdateRequestStays(t *testing.T) {
	e := startEnv(t)
	e.startController(Options{MaxAttempts: 3, RetryBase: 100 * time.Millisecond})
	e.applyPolicy("default-deny.yaml", nil)
	// A CREATE whose object never got stored (another webhook denied it).
	ghost := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "never-stored", UID: "0000-ghost", Labels: map[string]string{"bg-test": "true"}}}
	e.admit(kyvernov1.Create, ghost, nil)
	e.eventually("the UpdateRequest Failed with its reason", func() error {
		urs := e.updateRequests()
		if len(urs) != 1 {
			return fmt.Errorf("%d UpdateRequests", len(urs))
		}
		st := urs[0].Status
		if st.State != kyvernov2.Failed || st.RetryCount != 3 || !strings.Contains(st.Message, "never-stored") {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	time.Sleep(time.Second)
	if n := len(e.updateRequests()); n != 1 {
		t.Errorf("the Failed UpdateRequest is gone (%d left)", n)
	}
}

// TestMutateExisting rolls a label onto existing ConfigMaps when the
// policy is installed (mutateExistingOnPolicyUpdate) and onto a new
// namespace's through its UpdateRequest.
func TestMutateExisting(t *testing.T) {
	e := startEnv(t)
	for _, ns := range []string{"one", "two"} {
		e.namespace(ns)
		e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}})
	}
	e.startController(Options{})
	e.applyPolicy("label-configmaps.yaml", nil)
	wantLabel := func(ns string) {
		e.t.Helper()
		e.eventually("ConfigMap "+ns+"/settings labelled rolled=v1", func() error {
			var cm corev1.ConfigMap
			if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &cm); err != nil {
				return err
			}
			if cm.Labels["rolled"] != "v1" {
				return fmt.Errorf("labels %v", cm.Labels)
			}
			return nil
		})
	}
	wantLabel("one")
	wantLabel("two")
	three := e.namespace("three")
	e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "three", Name: "settings"}})
	e.admit(kyvernov1.Update, three, three)
	wantLabel("three")
}

// TestTwoLeadersConverge runs two controllers that both think they lead
// against one API server: they converge on one NetworkPolicy per
// namespace, leave no UpdateRequest behind and, once converged, write
// nothing more (no flapping between them).
func TestTwoLeadersConverge(t *testing.T) {
	e := startEnv(t)
	a, _ := e.startController(Options{})
	b, _ := e.startController(Options{})
	e.applyPolicy("default-deny.yaml", nil)
	var names []string
	for i := range 5 {
		ns := e.namespace(fmt.Sprintf("twice-%d", i))
		e.admit(kyvernov1.Create, ns, nil)
		names = append(names, ns.Name)
	}
	for _, ns := range names {
		e.wantPolicyTypes(ns, networkingv1.PolicyTypeIngress)
	}
	e.eventually("every UpdateRequest done and removed", func() error {
		if urs := e.updateRequests(); len(urs) != 0 {
			return fmt.Errorf("%d UpdateRequests left, first %+v", len(urs), urs[0].Status)
		}
		return nil
	})
	// A user edit is put back, and both settle on the same object.
	np, err := e.networkPolicy(names[0])
	if err != nil {
		t.Fatal(err)
	}
	np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	if err := e.cl.Update(e.ctx, np); err != nil {
		t.Fatal(err)
	}
	e.wantPolicyTypes(names[0], networkingv1.PolicyTypeIngress)
	time.Sleep(time.Second)
	before := a.Stats().Writes.Load() + b.Stats().Writes.Load()
	time.Sleep(3 * time.Second)
	if n := a.Stats().Writes.Load() + b.Stats().Writes.Load() - before; n != 0 {
		t.Errorf("the two controllers wrote %d times after converging, want none", n)
	}
	var nps networkingv1.NetworkPolicyList
	if err := e.cl.List(e.ctx, &nps, client.MatchingLabels{"generate.kyverno.io/policy-name": "default-deny"}); err != nil {
		t.Fatal(err)
	}
	if len(nps.Items) != len(names) {
		t.Errorf("%d generated NetworkPolicies for %d namespaces", len(nps.Items), len(names))
	}
	for _, c := range []*Controller{a, b} {
		if f := c.Stats().Failed.Load(); f != 0 {
			t.Errorf("a controller left %d UpdateRequests Failed", f)
		}
	}
}
