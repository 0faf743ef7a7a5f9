package admission

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/webhook/config"
)

const charterNamespace = "charter"

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kyvernov1.AddToScheme, kyvernov2.AddToScheme} {
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

func policyFrom(t *testing.T, manifest string) *kyvernov1.ClusterPolicy {
	var p kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(manifest), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func pod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
}

// TestAdmissionOnRealAPIServer runs the admission controller out of
// cluster against a real kube-apiserver with URL webhooks.
func TestAdmissionOnRealAPIServer(t *testing.T) {
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.WithCRDs(filepath.Join(root, "config", "crd", "bases")))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			cp.KeepLogs()
			t.Logf("control plane logs kept in %s", cp.LogDir())
		}
		_ = cp.Stop()
	}()

	sch := scheme(t)
	cl, err := client.New(cp.RESTConfig(), client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: charterNamespace}}); err != nil {
		t.Fatal(err)
	}

	mgr, err := ctrl.NewManager(cp.RESTConfig(), ctrl.Options{
		Scheme:  sch,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{charterNamespace: {}}},
		}},
		Logger: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	if _, err := Setup(mgr, Options{
		Addr:         "127.0.0.1:" + strconv.Itoa(port),
		URL:          "https://127.0.0.1:" + strconv.Itoa(port),
		Namespace:    charterNamespace,
		ConfigResync: time.Second,
		Log:          testr.New(t),
	}); err != nil {
		t.Fatal(err)
	}
	mgrDone := make(chan error, 1)
	mgrCtx, stopMgr := context.WithCancel(ctx)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	defer func() { stopMgr(); <-mgrDone }()

	// The policy webhook is in place before any policy can be written.
	eventually(t, "policy validating webhook", 30*time.Second, func() error {
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		return cl.Get(ctx, client.ObjectKey{Name: config.PolicyValidatingName}, &v)
	})

	t.Run("an invalid policy is refused with its field path", func(t *testing.T) {
		bad := policyFrom(t, `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: bad-anchor}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {spec: {containers: [{"~(x)": "y"}]}}}
`)
		// The API server may call the webhook before its certificate is
		// served; retry until the answer is the webhook's.
		eventually(t, "policy refused", 30*time.Second, func() error {
			err := cl.Create(ctx, bad.DeepCopy())
			if err == nil {
				_ = cl.Delete(ctx, bad.DeepCopy())
				t.Fatal("invalid policy was admitted")
			}
			if !strings.Contains(err.Error(), `admission webhook "validate-policy.charter.svc" denied the request`) ||
				!strings.Contains(err.Error(), "spec.rules[0].validate.pattern.spec.containers[0]") {
				return err
			}
			return nil
		})
	})

	enforce := policyFrom(t, `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-labels}
spec:
  validationFailureAction: Enforce
  rules:
  - name: check-for-labels
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "label 'app.kubernetes.io/name' is required"
      pattern: {metadata: {labels: {app.kubernetes.io/name: "?*"}}}
`)
	if err := cl.Create(ctx, enforce); err != nil {
		t.Fatal(err)
	}
	eventually(t, "resource webhook for pods", 30*time.Second, func() error {
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		if err := cl.Get(ctx, client.ObjectKey{Name: config.ResourceValidatingName}, &v); err != nil {
			return err
		}
		for _, w := range v.Webhooks {
			for _, r := range w.Rules {
				for _, res := range r.Resources {
					if w.Name == config.ValidateWebhookFail && res == "pods" {
						return nil
					}
				}
			}
		}
		return errNotYet("no pods rule in " + config.ValidateWebhookFail)
	})

	t.Run("Enforce blocks a bad Pod with the policy's message", func(t *testing.T) {
		eventually(t, "bad Pod refused", 30*time.Second, func() error {
			err := cl.Create(ctx, pod("bad", nil))
			if err == nil {
				_ = cl.Delete(ctx, pod("bad", nil))
				return errNotYet("bad Pod admitted (policy not in the cache yet?)")
			}
			want := `admission webhook "validate.charter.svc-fail" denied the request: ` +
				"\n\nresource Pod/default/bad was blocked due to the following policies \n\nrequire-labels:\n" +
				"  check-for-labels: 'validation error: label ''app.kubernetes.io/name'' is required. rule check-for-labels failed at path /metadata/labels/'"
			if !strings.Contains(err.Error(), want) {
				return err
			}
			return nil
		})
	})

	t.Run("a good Pod is admitted", func(t *testing.T) {
		if err := cl.Create(ctx, pod("good", map[string]string{"app.kubernetes.io/name": "web"})); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("kube-system is left alone", func(t *testing.T) {
		p := pod("system", nil)
		p.Namespace = "kube-system"
		if err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a deleted configuration comes back", func(t *testing.T) {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: config.ResourceValidatingName}}
		if err := cl.Delete(ctx, v); err != nil {
			t.Fatal(err)
		}
		eventually(t, "configuration recreated", 30*time.Second, func() error {
			return cl.Get(ctx, client.ObjectKey{Name: config.ResourceValidatingName}, v)
		})
	})

	t.Run("cleanup removes every configuration", func(t *testing.T) {
		stopMgr()
		if err := <-mgrDone; err != nil {
			t.Errorf("manager: %v", err)
		}
		mgrDone <- nil
		if err := config.Cleanup(ctx, cl); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{config.ResourceValidatingName, config.PolicyValidatingName} {
			err := cl.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("%s after cleanup: %v", name, err)
			}
		}
		// With charter gone and its webhooks removed, Pods are admitted.
		if err := cl.Create(ctx, pod("after", nil)); err != nil {
			t.Errorf("Pod after cleanup: %v", err)
		}
	})
}

type errNotYet string

func (e errNotYet) Error() string { return string(e) }
