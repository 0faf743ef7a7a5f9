package admission

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/webhook/config"
	"github.com/charter-dev/charter/webhook/metrics"
)

const charterNamespace = "charter"

// fixture is the admission controller running out of cluster, with URL
// webhooks, against its own etcd and kube-apiserver. Every test gets its
// own control plane: the tests install cluster-wide policies that would
// change each other's answers.
type fixture struct {
	ctx    context.Context
	cp     *controlplane.ControlPlane
	scheme *runtime.Scheme
	// client acts as the control plane's administrator.
	client client.Client
	// options are the admission Options Setup was given.
	options Options
	// metrics is the registry of the admission metrics (options.Metrics).
	metrics *prometheus.Registry

	stopOnce   sync.Once
	stopMgr    context.CancelFunc
	mgrDone    chan error
	mgrStopErr error
}

// fixtureConfig is what the tests vary around the common setup.
type fixtureConfig struct {
	namespaces []string
	objects    []client.Object
	tweaks     []func(*Options)
	adminTweak []func(*rest.Config, *Options)
	state      []func(*rest.Config) clusterstate.Option
}

type fixtureOption func(*fixtureConfig)

// withNamespaces creates namespaces besides charter's before charter starts.
func withNamespaces(names ...string) fixtureOption {
	return func(c *fixtureConfig) { c.namespaces = append(c.namespaces, names...) }
}

// withObjects creates objects, in order, after the namespaces and before
// charter starts: no charter webhook stands in their way.
func withObjects(objs ...client.Object) fixtureOption {
	return func(c *fixtureConfig) { c.objects = append(c.objects, objs...) }
}

// withOptions changes the admission Options passed to Setup.
func withOptions(tweak func(*Options)) fixtureOption {
	return func(c *fixtureConfig) { c.tweaks = append(c.tweaks, tweak) }
}

// withAdminOptions changes the admission Options passed to Setup, given
// the control plane's administrator config (for clients the options
// hold).
func withAdminOptions(tweak func(admin *rest.Config, o *Options)) fixtureOption {
	return func(c *fixtureConfig) { c.adminTweak = append(c.adminTweak, tweak) }
}

// withStateOption builds charter's clusterstate with the option opt
// returns for the control plane's administrator config.
func withStateOption(opt func(admin *rest.Config) clusterstate.Option) fixtureOption {
	return func(c *fixtureConfig) { c.state = append(c.state, opt) }
}

// startAdmission starts a control plane with charter's CRDs, creates the
// namespaces and objects asked for, runs admission.Setup's manager and
// returns once the policy validating webhook configuration exists. It
// skips under -short or without bin/kube-apiserver. Teardown is
// registered with t.Cleanup; the control plane's logs are kept when t
// failed.
func startAdmission(t *testing.T, opts ...fixtureOption) *fixture {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	var cfg fixtureConfig
	for _, o := range opts {
		o(&cfg)
	}
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "kube-apiserver")); err != nil {
		t.Skipf("control plane binaries not built (make controlplane): %v", err)
	}

	f := &fixture{ctx: t.Context(), scheme: scheme(t)}
	f.cp, err = controlplane.Start(f.ctx, controlplane.WithCRDs(filepath.Join(root, "config", "crd", "bases")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			f.cp.KeepLogs()
			t.Logf("control plane logs kept in %s", f.cp.LogDir())
		}
		_ = f.cp.Stop()
	})
	if f.client, err = client.New(f.cp.RESTConfig(), client.Options{Scheme: f.scheme}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range append([]string{charterNamespace}, cfg.namespaces...) {
		if err := f.client.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatalf("creating namespace %s: %v", ns, err)
		}
	}
	for _, obj := range cfg.objects {
		if err := f.client.Create(f.ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, objectName(obj), err)
		}
	}

	mgr, err := ctrl.NewManager(f.cp.RESTConfig(), ctrl.Options{
		Scheme:  f.scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Setup reads its certificate Secret from charter's namespace only.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{charterNamespace: {}}},
		}},
		Logger: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(freePort(t))
	f.metrics = prometheus.NewRegistry()
	rec, err := metrics.New(f.metrics, "test")
	if err != nil {
		t.Fatal(err)
	}
	stateOpts := make([]clusterstate.Option, 0, len(cfg.state))
	for _, opt := range cfg.state {
		stateOpts = append(stateOpts, opt(f.cp.RESTConfig()))
	}
	state, err := clusterstate.New(mgr, testr.New(t), stateOpts...)
	if err != nil {
		t.Fatal(err)
	}
	f.options = Options{
		State:        state,
		Metrics:      rec,
		Addr:         "127.0.0.1:" + port,
		URL:          "https://127.0.0.1:" + port,
		Namespace:    charterNamespace,
		ConfigResync: time.Second,
		Log:          testr.New(t),
	}
	for _, tweak := range cfg.tweaks {
		tweak(&f.options)
	}
	for _, tweak := range cfg.adminTweak {
		tweak(f.cp.RESTConfig(), &f.options)
	}
	if _, err := Setup(mgr, f.options); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stopMgr := context.WithCancel(f.ctx)
	f.stopMgr, f.mgrDone = stopMgr, make(chan error, 1)
	go func() { f.mgrDone <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		if err := f.stopManager(); err != nil {
			t.Logf("manager: %v", err)
		}
	})

	// The policy webhook is in place before any policy can be written.
	eventually(t, "policy validating webhook", 30*time.Second, func() error {
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		return f.client.Get(f.ctx, client.ObjectKey{Name: config.PolicyValidatingName}, &v)
	})
	return f
}

// stopManager stops charter and returns what the manager returned. It
// may be called more than once: later calls return the first answer.
func (f *fixture) stopManager() error {
	f.stopOnce.Do(func() {
		f.stopMgr()
		f.mgrStopErr = <-f.mgrDone
	})
	return f.mgrStopErr
}

// impersonate returns a client that acts as user, an authenticated member
// of groups.
func (f *fixture) impersonate(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(f.cp.RESTConfig())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, err := client.New(cfg, client.Options{Scheme: f.scheme})
	if err != nil {
		t.Fatalf("client impersonating %s: %v", user, err)
	}
	return c
}

// objectName is namespace/name, or name for a cluster-scoped object.
func objectName(obj client.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kyvernov1.AddToScheme, kyvernov2.AddToScheme, policiesv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func eventually(t *testing.T, what string, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: still failing after %v: %v", what, timeout, err)
}

// installReady creates the policies of manifests (YAML documents split by
// "---", each decoded strictly into its kind's Go type) and waits until
// each reports Ready. It returns them as created.
func (f *fixture) installReady(t *testing.T, manifests string) []client.Object {
	t.Helper()
	var policies []client.Object
	for _, doc := range strings.Split(manifests, "\n---\n") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatal(err)
		}
		o, err := f.scheme.New(tm.GroupVersionKind())
		if err != nil {
			t.Fatalf("policy document of kind %s: %v", tm.Kind, err)
		}
		obj := o.(client.Object)
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatal(err)
		}
		policies = append(policies, obj)
		eventually(t, "policy "+obj.GetName()+" created", 30*time.Second, func() error {
			return f.client.Create(f.ctx, obj.DeepCopyObject().(client.Object))
		})
	}
	for _, p := range policies {
		eventually(t, "policy "+p.GetName()+" Ready", 30*time.Second, func() error {
			got := p.DeepCopyObject().(client.Object)
			if err := f.client.Get(f.ctx, client.ObjectKeyFromObject(p), got); err != nil {
				return err
			}
			if !got.(kyvernov1.PolicyInterface).IsReady() {
				return errNotYet("status " + statusOf(got.(kyvernov1.PolicyInterface)))
			}
			return nil
		})
	}
	return policies
}

// statusOf lists a policy's conditions, for a message.
func statusOf(p kyvernov1.PolicyInterface) string {
	var conditions []metav1.Condition
	switch p := p.(type) {
	case kyvernov1.StatusHolder:
		conditions = p.GetStatus().Conditions
	case policiesv1.StatusHolder:
		conditions = p.GetStatus().ConditionStatus.Conditions
	}
	var out []string
	for _, c := range conditions {
		out = append(out, c.Type+"="+string(c.Status)+" ("+c.Message+")")
	}
	return strings.Join(out, ", ")
}

// deniedBy returns a check for eventually: nil once create is denied by
// webhook with message in its error.
func deniedBy(webhook, message string, create func() error) func() error {
	return func() error {
		err := create()
		if err == nil {
			return errNotYet("admitted")
		}
		if !strings.Contains(err.Error(), `admission webhook "`+webhook+`" denied the request`) || !strings.Contains(err.Error(), message) {
			return err
		}
		return nil
	}
}

type errNotYet string

func (e errNotYet) Error() string { return string(e) }

// policyFile reads a ClusterPolicy from testdata/policies.
func policyFile(t *testing.T, name string) *kyvernov1.ClusterPolicy {
	t.Helper()
	path := filepath.Join("testdata", "policies", name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &p
}

func pod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
}
