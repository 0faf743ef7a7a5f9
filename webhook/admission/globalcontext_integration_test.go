package admission

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/loaders"
)

// registriesPolicy denies Pods whose image's registry is not among the
// registries a GlobalContextEntry's projection lists.
const registriesPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: allowed-registries
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: known-registry
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: registries
      globalReference: {name: registries.hosts}
    - name: count
      globalReference: {name: registries, jmesPath: "length(@)"}
    validate:
      message: "{{ request.object.spec.containers[0].image }} is not from one of the {{ count }} allowed registries"
      deny:
        conditions:
          all:
          - key: "{{ split(request.object.spec.containers[0].image, '/')[0] }}"
            operator: AnyNotIn
            value: "{{ registries }}"
`

// registriesFromConfigMaps caches the ConfigMaps of namespace platform;
// each one's data.host is an allowed registry.
const registriesFromConfigMaps = `apiVersion: kyverno.io/v2alpha1
kind: GlobalContextEntry
metadata:
  name: registries
spec:
  kubernetesResource: {version: v1, resource: configmaps, namespace: platform}
  projections:
  - {name: hosts, jmesPath: "[?data.host].data.host"}
`

func registryHost(name, host string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "platform"}, Data: map[string]string{"host": host}}
}

func podWithImage(name, ns, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
	}
}

// createUnstructured creates the object of a YAML document.
func (f *fixture) createUnstructured(t *testing.T, doc string) {
	t.Helper()
	var u unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Create(f.ctx, &u); err != nil {
		t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// verdict dry-runs the creation of a Pod with image and returns nil when
// admitted, else the denial.
func (f *fixture) verdict(ns, image string) error {
	return f.client.Create(f.ctx, podWithImage("p", ns, image), client.DryRunAll)
}

// deniedWith waits until creating a Pod of image is denied by charter
// with a message holding want.
func (f *fixture) deniedWith(t *testing.T, ns, image, want string) {
	t.Helper()
	eventually(t, image+" denied", 30*time.Second, func() error {
		err := f.verdict(ns, image)
		if err == nil {
			return errNotYet("admitted")
		}
		if !strings.Contains(err.Error(), `denied the request`) || !strings.Contains(err.Error(), want) {
			return err
		}
		return nil
	})
}

// TestGlobalContextResourceOnRealAPIServer: a kubernetesResource
// GlobalContextEntry feeds a ClusterPolicy's globalReference (whole data
// and a projection) at admission from its informer, a change of the
// watched objects changes the verdict with no policy change, and a
// ValidatingPolicy reads the same entry with globalContext.Get.
func TestGlobalContextResourceOnRealAPIServer(t *testing.T) {
	f := startAdmission(t, withNamespaces("platform", "shop"), withObjects(registryHost("ghcr", "ghcr.io"), &corev1.ConfigMap{
		// A ConfigMap without data.host: counted, not projected.
		ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "platform"}, Data: map[string]string{"note": "x"},
	}), withOptions(func(o *Options) { o.Events.Disabled = true }))
	f.createUnstructured(t, registriesFromConfigMaps)
	f.installReady(t, registriesPolicy)

	eventually(t, "ghcr.io admitted", 30*time.Second, func() error { return f.verdict("shop", "ghcr.io/team/app:1") })
	f.deniedWith(t, "shop", "docker.io/library/nginx:1", "docker.io/library/nginx:1 is not from one of the 2 allowed registries")

	// Policy admission refuses an invalid entry, naming the field.
	var bad unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(strings.Replace(strings.Replace(registriesFromConfigMaps, "name: registries", "name: bad", 1),
		`"[?data.host].data.host"`, `"[?data.host"`, 1)), &bad.Object); err != nil {
		t.Fatal(err)
	}
	err := f.client.Create(f.ctx, &bad)
	if want := `admission webhook "validate-policy.charter.svc" denied the request: GlobalContextEntry "bad": spec.projections[0].jmesPath: "[?data.host": `; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("creating an invalid entry: %v, want %q", err, want)
	}

	if err := f.client.Create(f.ctx, registryHost("dockerhub", "docker.io")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "docker.io admitted once its ConfigMap exists", 30*time.Second, func() error {
		return f.verdict("shop", "docker.io/library/nginx:1")
	})
	if err := f.client.Delete(f.ctx, registryHost("dockerhub", "docker.io")); err != nil {
		t.Fatal(err)
	}
	f.deniedWith(t, "shop", "docker.io/library/nginx:1", "is not from one of the 2 allowed registries")

	// A ValidatingPolicy reads the entry and a projection with
	// globalContext.Get; an unknown entry is null, and so is a projection
	// of it.
	if err := f.client.Delete(f.ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": "allowed-registries"}}}); err != nil {
		t.Fatal(err)
	}
	f.installReady(t, `apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata:
  name: cel-registries
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  variables:
  - name: hosts
    expression: globalContext.Get("registries", "hosts")
  validations:
  - expression: "variables.hosts.exists(h, object.spec.containers[0].image.startsWith(h + '/'))"
    messageExpression: "'registry not among ' + string(size(globalContext.Get('registries'))) + ' entries'"
  - expression: "dyn(globalContext.Get('no-such-entry')) == null"
    message: an unknown entry is null
  - expression: "dyn(globalContext.get('no-such-entry', 'count')) == null"
    message: an unknown entry's projection is null
`)
	eventually(t, "ghcr.io admitted by the ValidatingPolicy", 30*time.Second, func() error { return f.verdict("shop", "ghcr.io/team/app:1") })
	f.deniedWith(t, "shop", "docker.io/library/nginx:1", "Policy cel-registries failed: registry not among 2 entries")
}

// TestGlobalContextAPICallOnRealAPIServer: an apiCall GlobalContextEntry
// calls its service (here an httptest server on loopback, so the test
// opens the blocklist as CEL http tests do), its projection feeds the
// policy, and a new answer is read after the refresh interval.
func TestGlobalContextAPICallOnRealAPIServer(t *testing.T) {
	var hosts atomic.Value
	hosts.Store([]string{"ghcr.io"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"registries": hosts.Load()})
	}))
	defer srv.Close()
	f := startAdmission(t, withNamespaces("shop"), withOptions(func(o *Options) { o.Events.Disabled = true }),
		withStateOption(func(*rest.Config) clusterstate.Option {
			return clusterstate.WithHTTPLimits(loaders.HTTPLimits{Blocklist: []string{}})
		}))
	f.createUnstructured(t, `apiVersion: kyverno.io/v2alpha1
kind: GlobalContextEntry
metadata:
  name: registries
spec:
  apiCall:
    service: {url: "`+srv.URL+`/registries"}
    refreshInterval: 1s
  projections:
  - {name: hosts, jmesPath: registries}
`)
	f.installReady(t, strings.Replace(registriesPolicy, `jmesPath: "length(@)"`, `jmesPath: "length(registries)"`, 1))

	eventually(t, "ghcr.io admitted", 30*time.Second, func() error { return f.verdict("shop", "ghcr.io/team/app:1") })
	f.deniedWith(t, "shop", "quay.io/team/app:1", "quay.io/team/app:1 is not from one of the 1 allowed registries")
	hosts.Store([]string{"ghcr.io", "quay.io"})
	eventually(t, "quay.io admitted after the refresh", 30*time.Second, func() error { return f.verdict("shop", "quay.io/team/app:1") })
}

// TestGlobalContextFailsClosedOnRealAPIServer: an entry charter cannot
// load never reads as empty data: a resource charter may not list denies
// under Enforce, naming the verb, resource and namespace.
func TestGlobalContextFailsClosedOnRealAPIServer(t *testing.T) {
	// charter reads global context entries as a user who may read
	// GlobalContextEntries (as charter's roles grant) but no ConfigMaps.
	const user = "charter-restricted"
	readEntries := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "read-global-context-entries"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"kyverno.io"}, Resources: []string{"globalcontextentries"}, Verbs: []string{"list", "watch"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "read-global-context-entries"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: readEntries.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	f := startAdmission(t, withNamespaces("platform", "shop"), withObjects(registryHost("ghcr", "ghcr.io"), readEntries, binding),
		withOptions(func(o *Options) { o.Events.Disabled = true }),
		withStateOption(func(admin *rest.Config) clusterstate.Option {
			cfg := rest.CopyConfig(admin)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
			return clusterstate.WithGlobalContextConfig(cfg)
		}))
	f.createUnstructured(t, registriesFromConfigMaps)
	f.installReady(t, registriesPolicy)
	// Allowed by the data, yet denied: the data cannot be read.
	f.deniedWith(t, "shop", "ghcr.io/team/app:1", `global context entry "registries" is not ready (Forbidden): `+
		`charter may not list configmaps of API group "" (core) in namespace platform`)
}

// TestGlobalContextBlocklistOnRealAPIServer: a GlobalContextEntry's
// apiCall service URL is bound by --cel-http-blocklist (default: loopback
// and metadata endpoints), so the policy reading it denies.
func TestGlobalContextBlocklistOnRealAPIServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"registries": ["ghcr.io"]}`))
	}))
	defer srv.Close()
	f := startAdmission(t, withNamespaces("shop"), withOptions(func(o *Options) { o.Events.Disabled = true }))
	f.createUnstructured(t, `apiVersion: kyverno.io/v2alpha1
kind: GlobalContextEntry
metadata:
  name: registries
spec:
  apiCall:
    service: {url: "`+srv.URL+`"}
    retryLimit: 1
  projections:
  - {name: hosts, jmesPath: registries}
`)
	f.installReady(t, registriesPolicy)
	f.deniedWith(t, "shop", "ghcr.io/team/app:1", "is blocked (--cel-http-blocklist")
}
