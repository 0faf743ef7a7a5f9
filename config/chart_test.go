package config

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/charter-dev/charter/internal/helmchart"
	"github.com/charter-dev/charter/internal/reportsserver"
)

// chartDir is charter's Helm chart, from this folder.
const chartDir = "../charts/charter"

// helmLabels are the labels the chart adds to what config/ declares.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version"}

// webhooksCleanupReviewed is what the chart's post-delete hook
// (templates/webhooks-cleanup.yaml) may do: `charter serve
// --cleanup-webhooks` deletes charter's webhook configurations with a
// deletecollection by label.
var webhooksCleanupReviewed = map[string][]grant{
	"charter-webhooks-cleanup": {
		{cluster, "admissionregistration.k8s.io", "mutatingwebhookconfigurations,validatingwebhookconfigurations", "deletecollection", "uninstall removes charter's webhook configurations"},
	},
}

func renderChart(t *testing.T, namespace string, values map[string]any) *helmchart.Rendered {
	t.Helper()
	r, err := helmchart.Render(chartDir, helmchart.Options{Namespace: namespace, Values: values})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// key names an object as kubectl does.
func key(u *unstructured.Unstructured) string {
	k := u.GetKind() + " " + u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		k = u.GetKind() + " " + ns + "/" + u.GetName()
	}
	return k
}

// plain is u's object as encoding/json reads it, so that two renderings
// compare whatever number types their YAML decoders chose.
func plain(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestChartRendersConfigDefault: with its default values, the chart
// installs exactly what `kustomize build config/default` applies, but the
// Namespace (helm install --create-namespace makes it) and Helm's own
// labels, so the two install paths cannot drift apart.
func TestChartRendersConfigDefault(t *testing.T) {
	chart := renderChart(t, "charter", nil)
	want := map[string]map[string]any{}
	for _, u := range kustomizeBuild(t, "default") {
		if u.GetKind() == "Namespace" {
			continue
		}
		want[key(u)] = plain(t, u)
	}
	got := map[string]map[string]any{}
	for _, u := range append(slices.Clone(chart.CRDs), chart.Objects...) {
		u = u.DeepCopy()
		if l := u.GetLabels(); l != nil {
			for _, k := range helmLabels {
				if _, ok := l[k]; !ok && u.GetKind() != "CustomResourceDefinition" {
					t.Errorf("%s: no label %s", key(u), k)
				}
				delete(l, k)
			}
			if len(l) == 0 {
				l = nil
			}
			u.SetLabels(l)
		}
		if _, dup := got[key(u)]; dup {
			t.Errorf("the chart renders %s twice", key(u))
		}
		got[key(u)] = plain(t, u)
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		w, inKustomize := want[k]
		g, inChart := got[k]
		switch {
		case !inChart:
			t.Errorf("%s: in config/default, not in the chart", k)
		case !inKustomize:
			t.Errorf("%s: in the chart, not in config/default", k)
		default:
			if d := cmp.Diff(w, g); d != "" {
				t.Errorf("%s differs (-config/default +chart):\n%s", k, d)
			}
		}
	}
}

// strictDecoder decodes into Kubernetes' typed objects and charter's
// CRDs' definitions, refusing unknown and duplicate fields: a field the
// API server would drop or refuse fails here.
var strictDecoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}()

// decodeStrict decodes u into its typed object.
func decodeStrict(u *unstructured.Unstructured) (runtime.Object, error) {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	obj, _, err := strictDecoder.Decode(b, nil, nil)
	return obj, err
}

// knobsOn turns on every knob the chart has, for the tests that check
// what it renders with them.
var knobsOn = map[string]any{
	"image":            map[string]any{"repository": "registry.example/charter", "tag": "v1.2.3", "pullPolicy": "Always"},
	"imagePullSecrets": []any{map[string]any{"name": "pull"}},
	"config":           map[string]any{"excludedNamespaces": []any{"monitoring", "istio-system"}},
	"features": map[string]any{"policyExceptions": map[string]any{"namespace": "platform,security"}, "namespacedPolicies": map[string]any{"serviceAccount": "tenant-policies"},
		"celHTTP":   map[string]any{"blocklist": []any{"169.254.169.254", "10.0.0.0/8"}, "allowlist": []any{"https://verdicts.example/"}, "allowInNamespacedPolicies": true},
		"promotion": map[string]any{"downgrade": "deny"},
		"reports":   map[string]any{"api": "both", "managedBy": "kyverno"},
		"egress":    map[string]any{"allow": []any{"10.0.0.5:5000", "192.168.0.0/16"}, "maxResponseBytes": 1048576}},
	"admissionController": map[string]any{
		"replicas":            5,
		"podDisruptionBudget": map[string]any{"minAvailable": 2, "maxUnavailable": nil},
		"nodeSelector":        map[string]any{"node-role.kubernetes.io/infra": ""},
		"tolerations":         []any{map[string]any{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}},
		"priorityClassName":   "system-cluster-critical",
		"podAnnotations":      map[string]any{"example.com/a": "b"},
		"container":           map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "1", "memory": "1Gi"}, "limits": map[string]any{"memory": "2Gi"}}},
		"extraArgs":           []any{"--request-timeout=5s"},
		"service":             map[string]any{"port": 8443},
		"metricsService":      map[string]any{"port": 9000, "type": "NodePort"},
		"serviceMonitor":      map[string]any{"enabled": true, "additionalLabels": map[string]any{"release": "prom"}, "namespace": "monitoring", "interval": "10s"},
	},
	"reportsController":    map[string]any{"replicas": 1, "serviceMonitor": map[string]any{"enabled": true}, "affinity": map[string]any{"nodeAffinity": map[string]any{}}},
	"backgroundController": map[string]any{"antiAffinity": map[string]any{"enabled": false}},
	"cleanupController":    map[string]any{"metricsService": map[string]any{"create": false}},
	"gitsyncController": map[string]any{"defaultServiceAccount": "policy-deployer", "noCrossNamespaceRefs": true, "cacheSizeLimit": "5Gi", "receiverService": map[string]any{"port": 8080},
		"maxRepositorySize": 104857600, "maxFiles": 0, "minInterval": "1m", "allowFileURLs": true},
	"webhooksCleanup": map[string]any{"enabled": true},
}

// TestInstallsAreSchemaValid decodes every object both install paths
// create, the chart's with its defaults and with every knob on, strictly
// into its Kubernetes type, and checks the ServiceMonitors (no Go type
// here) against the Services they select.
func TestInstallsAreSchemaValid(t *testing.T) {
	sets := map[string][]*unstructured.Unstructured{"config/default": kustomizeBuild(t, "default")}
	for name, values := range map[string]map[string]any{"chart defaults": nil, "chart, every knob on": knobsOn} {
		r := renderChart(t, "charter", values)
		sets[name] = append(append(slices.Clone(r.CRDs), r.Objects...), r.Hooks...)
	}
	for name, objs := range sets {
		t.Run(name, func(t *testing.T) {
			if len(objs) == 0 {
				t.Fatal("nothing rendered")
			}
			for _, u := range objs {
				if u.GetKind() == "ServiceMonitor" {
					checkServiceMonitor(t, u, objs)
					continue
				}
				if _, err := decodeStrict(u); err != nil {
					t.Errorf("%s: %v", key(u), err)
				}
			}
			checkWiring(t, objs)
		})
	}
}

// decodeSpecStrict decodes the spec of an object of a kind with no Go
// type here into spec, refusing unknown fields.
func decodeSpecStrict(u *unstructured.Unstructured, spec any) error {
	b, err := json.Marshal(u.Object["spec"])
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(spec)
}

// checkServiceMonitor: the ServiceMonitor selects, in the namespaces it
// names, exactly one Service with the port it scrapes.
func checkServiceMonitor(t *testing.T, sm *unstructured.Unstructured, objs []*unstructured.Unstructured) {
	t.Helper()
	var spec struct {
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port, Interval, ScrapeTimeout string
		} `json:"endpoints"`
	}
	if err := decodeSpecStrict(sm, &spec); err != nil {
		t.Errorf("%s: %v", key(sm), err)
		return
	}
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Errorf("%s: apiVersion %s", key(sm), sm.GetAPIVersion())
	}
	sel, err := metav1.LabelSelectorAsSelector(&spec.Selector)
	if err != nil || sel.Empty() {
		t.Errorf("%s: selector %v: %v", key(sm), spec.Selector, err)
		return
	}
	var matched []string
	for _, u := range objs {
		if u.GetKind() != "Service" || !slices.Contains(spec.NamespaceSelector.MatchNames, u.GetNamespace()) || !sel.Matches(labels.Set(u.GetLabels())) {
			continue
		}
		var svc corev1.Service
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &svc); err != nil {
			t.Fatal(err)
		}
		for _, e := range spec.Endpoints {
			if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == e.Port }) {
				t.Errorf("%s scrapes port %q, which %s has not", key(sm), e.Port, key(u))
			}
		}
		matched = append(matched, key(u))
	}
	if len(matched) != 1 || len(spec.Endpoints) == 0 {
		t.Errorf("%s selects Services %v with endpoints %v: want one Service", key(sm), matched, spec.Endpoints)
	}
}

// checkWiring checks what only shows once installed: each Service and
// the PodDisruptionBudget select some Deployment's Pods, on ports their
// container has; the admission Deployment names the webhook Service
// charter registers, on its port; each Deployment probes /healthz and
// /readyz on the port charter serves them at, and elects on a Lease no
// other Deployment uses.
func checkWiring(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var deployments []*appsv1.Deployment
	services := map[string]*corev1.Service{}
	var pdbs []*policyv1.PodDisruptionBudget
	for _, u := range objs {
		obj, err := decodeStrict(u)
		if err != nil {
			continue // reported by the caller
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			deployments = append(deployments, o)
		case *corev1.Service:
			services[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			pdbs = append(pdbs, o)
		}
	}
	if len(deployments) != 5 {
		t.Errorf("%d Deployments, want one per controller (5)", len(deployments))
	}
	selects := func(sel labels.Selector) []*appsv1.Deployment {
		var out []*appsv1.Deployment
		for _, d := range deployments {
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				out = append(out, d)
			}
		}
		return out
	}
	for _, svc := range services {
		targets := selects(labels.SelectorFromSet(svc.Spec.Selector))
		if len(targets) != 1 {
			t.Errorf("Service %s selects %d Deployments' Pods, want 1", svc.Name, len(targets))
			continue
		}
		for _, p := range svc.Spec.Ports {
			if !slices.ContainsFunc(targets[0].Spec.Template.Spec.Containers[0].Ports, func(c corev1.ContainerPort) bool { return c.Name == p.TargetPort.StrVal }) {
				t.Errorf("Service %s targets port %q, which Deployment %s's container has not", svc.Name, p.TargetPort.String(), targets[0].Name)
			}
		}
	}
	for _, pdb := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if got := selects(sel); len(got) != 1 || got[0].Name != "charter-admission" {
			t.Errorf("PodDisruptionBudget %s selects %d Deployments, want charter-admission", pdb.Name, len(got))
		}
	}
	leases := map[string]string{}
	for _, d := range deployments {
		c := d.Spec.Template.Spec.Containers[0]
		flags := map[string]string{}
		for _, a := range c.Args {
			if k, v, ok := strings.Cut(a, "="); ok {
				flags[k] = v
			}
		}
		lease := flags["--leader-election-id"]
		if lease == "" || leases[lease] != "" {
			t.Errorf("Deployment %s elects on Lease %q, which %q uses too: want one Lease per controller", d.Name, lease, leases[lease])
		}
		leases[lease] = d.Name
		for path, probe := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.StrVal != "health" {
				t.Errorf("Deployment %s: no %s probe on the health port", d.Name, path)
			}
		}
		if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "health" && p.ContainerPort == 8081 }) {
			t.Errorf("Deployment %s: health port is not 8081, where serve --health-addr listens", d.Name)
		}
		if flags["--controllers"] != "admission" {
			continue
		}
		if *d.Spec.Replicas < 3 && d.Spec.Template.Spec.Affinity == nil {
			t.Errorf("Deployment %s: %d replicas and no anti-affinity", d.Name, *d.Spec.Replicas)
		}
		if l := c.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds < 1 {
			t.Errorf("Deployment %s: no preStop sleep: a terminating replica would stop serving before it leaves the Service's endpoints", d.Name)
		}
		if _, ok := flags["--webhook-url"]; ok {
			t.Errorf("Deployment %s registers its webhooks by URL, not through the Service", d.Name)
		}
		svc, ok := services[flags["--service"]]
		if !ok {
			t.Errorf("Deployment %s: --service=%q names no Service of the install", d.Name, flags["--service"])
			continue
		}
		if port := fmt.Sprint(svc.Spec.Ports[0].Port); port != flags["--service-port"] {
			t.Errorf("Deployment %s: --service-port=%s, Service %s listens on %s", d.Name, flags["--service-port"], svc.Name, port)
		}
	}
}

// TestChartRBACHoldsOnlyReviewedPermissions: what the chart grants, in
// whatever namespace it is installed, is the reviewed list's, and its
// uninstall hook may only delete webhook configurations.
func TestChartRBACHoldsOnlyReviewedPermissions(t *testing.T) {
	for _, ns := range []string{"charter", "policy-system"} {
		t.Run(ns, func(t *testing.T) {
			r := renderChart(t, ns, nil)
			checkReviewed(t, collect(t, r.Objects), ns, reviewed)
			checkReviewed(t, collect(t, r.Hooks), ns, webhooksCleanupReviewed)
		})
	}
}

// TestChartKnobs: each value reaches what it configures.
func TestChartKnobs(t *testing.T) {
	r := renderChart(t, "charter", knobsOn)
	byKey := map[string]*unstructured.Unstructured{}
	for _, u := range append(slices.Clone(r.Objects), r.Hooks...) {
		byKey[key(u)] = u
	}
	deployment := func(name string) *appsv1.Deployment {
		t.Helper()
		u, ok := byKey["Deployment charter/charter-"+name]
		if !ok {
			t.Fatalf("no Deployment charter-%s", name)
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
			t.Fatal(err)
		}
		return &d
	}
	admission := deployment("admission")
	pod := admission.Spec.Template.Spec
	c := pod.Containers[0]
	for _, check := range []struct {
		what      string
		got, want any
	}{
		{"replicas", *admission.Spec.Replicas, int32(5)},
		{"image", c.Image, "registry.example/charter:v1.2.3"},
		{"pull policy", c.ImagePullPolicy, corev1.PullAlways},
		{"pull secrets", pod.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "pull"}}},
		{"nodeSelector", pod.NodeSelector, map[string]string{"node-role.kubernetes.io/infra": ""}},
		{"tolerations", len(pod.Tolerations), 1},
		{"priorityClassName", pod.PriorityClassName, "system-cluster-critical"},
		{"podAnnotations", admission.Spec.Template.Annotations, map[string]string{"example.com/a": "b"}},
		{"memory limit", c.Resources.Limits.Memory().String(), "2Gi"},
		{"args", c.Args, []string{"serve", "--controllers=admission", "--leader-election-id=charter-admission", "--service=charter-svc", "--service-port=8443", "--drain-delay=10s",
			"--webhook-excluded-namespaces=monitoring,istio-system", "--promotion-downgrade=deny", "--exception-namespaces=platform,security",
			"--cel-http-blocklist=169.254.169.254,10.0.0.0/8", "--cel-http-allowlist=https://verdicts.example/", "--allow-http-in-namespaced-policies",
			"--egress-allow=10.0.0.5:5000,192.168.0.0/16", "--egress-max-response-bytes=1048576", "--namespaced-policy-service-account=tenant-policies", "--reports-api=both", "--reports-managed-by=kyverno", "--request-timeout=5s"}},
		{"reports replicas", *deployment("reports").Spec.Replicas, int32(1)},
		{"reports affinity replaces anti-affinity", deployment("reports").Spec.Template.Spec.Affinity.PodAntiAffinity == nil, true},
		{"background anti-affinity off", deployment("background").Spec.Template.Spec.Affinity == nil, true},
		{"cleanup exceptions", deployment("cleanup").Spec.Template.Spec.Containers[0].Args[3], "--exception-namespaces=platform,security"},
		{"cleanup namespaced-policy ServiceAccount", slices.Contains(deployment("cleanup").Spec.Template.Spec.Containers[0].Args, "--namespaced-policy-service-account=tenant-policies"), true},
		{"background namespaced-policy ServiceAccount", slices.Contains(deployment("background").Spec.Template.Spec.Containers[0].Args, "--namespaced-policy-service-account=tenant-policies"), true},
		{"admission namespaced-policy ServiceAccount (loop protection)", slices.Contains(c.Args, "--namespaced-policy-service-account=tenant-policies"), true},
		{"reports CEL http", deployment("reports").Spec.Template.Spec.Containers[0].Args[4:],
			[]string{"--cel-http-blocklist=169.254.169.254,10.0.0.0/8", "--cel-http-allowlist=https://verdicts.example/", "--allow-http-in-namespaced-policies",
				"--egress-allow=10.0.0.5:5000,192.168.0.0/16", "--egress-max-response-bytes=1048576", "--namespaced-policy-service-account=tenant-policies", "--reports-api=both", "--reports-managed-by=kyverno"}},
		{"background reports API", slices.Contains(deployment("background").Spec.Template.Spec.Containers[0].Args, "--reports-api=both"), true},
		{"background reports managed-by", slices.Contains(deployment("background").Spec.Template.Spec.Containers[0].Args, "--reports-managed-by=kyverno"), true},
		{"no reports API for cleanup", slices.ContainsFunc(deployment("cleanup").Spec.Template.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--reports-api") }), false},
		{"gitsync args", deployment("gitsync").Spec.Template.Spec.Containers[0].Args[3:], []string{
			"--cel-http-blocklist=169.254.169.254,10.0.0.0/8", "--cel-http-allowlist=https://verdicts.example/", "--allow-http-in-namespaced-policies",
			"--egress-allow=10.0.0.5:5000,192.168.0.0/16", "--egress-max-response-bytes=1048576", "--gitsync-cache-dir=/var/cache/charter", "--receiver-addr=:9292",
			"--default-service-account=policy-deployer", "--no-cross-namespace-refs",
			"--gitsync-max-repository-size=104857600", "--gitsync-max-files=0", "--gitsync-min-interval=1m", "--gitsync-allow-file-urls"}},
		{"background impersonates only the namespaced-policy ServiceAccount", impersonated(byKey["ClusterRole charter-background-impersonate"]), []any{"tenant-policies"}},
		{"cleanup impersonates only the namespaced-policy ServiceAccount", impersonated(byKey["ClusterRole charter-cleanup-impersonate"]), []any{"tenant-policies"}},
		{"admission impersonates only the namespaced-policy ServiceAccount", impersonated(byKey["ClusterRole charter-admission-impersonate"]), []any{"tenant-policies"}},
		{"reports impersonates only the namespaced-policy ServiceAccount", impersonated(byKey["ClusterRole charter-reports-impersonate"]), []any{"tenant-policies"}},
		{"gitsync cache size", deployment("gitsync").Spec.Template.Spec.Volumes[0].EmptyDir.SizeLimit.String(), "5Gi"},
		{"hook image", byKey["Job charter/charter-webhooks-cleanup"] != nil, true},
		{"no cleanup metrics Service", byKey["Service charter/charter-cleanup-metrics"] == nil, true},
		{"admission ServiceMonitor namespace", byKey["ServiceMonitor monitoring/charter-admission"] != nil, true},
		{"reports ServiceMonitor", byKey["ServiceMonitor charter/charter-reports"] != nil, true},
		{"no background ServiceMonitor", byKey["ServiceMonitor charter/charter-background"] == nil, true},
		{"PDB minAvailable", fmt.Sprint(byKey["PodDisruptionBudget charter/charter-admission"].Object["spec"].(map[string]any)["minAvailable"]), "2"},
		{"metrics Service type", byKey["Service charter/charter-admission-metrics"].Object["spec"].(map[string]any)["type"], "NodePort"},
	} {
		if d := cmp.Diff(check.want, check.got); d != "" {
			t.Errorf("%s (-want +got):\n%s", check.what, d)
		}
	}
	sm := byKey["ServiceMonitor monitoring/charter-admission"]
	if got := sm.GetLabels()["release"]; got != "prom" {
		t.Errorf("ServiceMonitor additionalLabels: release=%q", got)
	}

	// An empty blocklist blocks nothing, which charter's default (null:
	// no flag) does not mean; every controller gets it (gitsync's check
	// and image verification pass the egress guard too).
	open := renderChart(t, "charter", map[string]any{"features": map[string]any{"celHTTP": map[string]any{"blocklist": []any{}}}})
	for _, u := range open.Objects {
		if u.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		if !slices.Contains(args, "--cel-http-blocklist=") {
			t.Errorf("%s: blocklist [] renders args %q; want --cel-http-blocklist= among them", u.GetName(), args)
		}
	}

	off := renderChart(t, "charter", map[string]any{
		"webhooksCleanup":     map[string]any{"enabled": false},
		"admissionController": map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}},
	})
	if len(off.Hooks) != 0 {
		t.Errorf("webhooksCleanup.enabled=false still renders %d hook objects", len(off.Hooks))
	}
	for _, u := range off.Objects {
		if u.GetKind() == "PodDisruptionBudget" {
			t.Errorf("podDisruptionBudget.enabled=false still renders %s", key(u))
		}
	}
}

// impersonated is the resourceNames of the impersonate rule of a
// rendered ClusterRole; nil when there is none.
func impersonated(u *unstructured.Unstructured) []any {
	if u == nil {
		return nil
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "rules")
	for _, r := range rules {
		rule := r.(map[string]any)
		if verbs, _ := rule["verbs"].([]any); slices.Contains(verbs, any("impersonate")) {
			names, _ := rule["resourceNames"].([]any)
			return names
		}
	}
	return nil
}

// TestChartRefusesContradictoryValues: values that cannot both hold fail
// the install, naming the values, instead of rendering one of them.
func TestChartRefusesContradictoryValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"PDB minAvailable and maxUnavailable", map[string]any{"admissionController": map[string]any{"podDisruptionBudget": map[string]any{"minAvailable": 1, "maxUnavailable": 1}}},
			"admissionController.podDisruptionBudget: set minAvailable or maxUnavailable, not both"},
		{"reports server without PostgreSQL", map[string]any{"reportsServer": map[string]any{"enabled": true}},
			"reportsServer.enabled needs the PostgreSQL connection string"},
		{"reports server with two connection strings", map[string]any{"reportsServer": map[string]any{"enabled": true, "dsn": "postgres://db", "dsnSecretRef": map[string]any{"name": "pg"}}},
			"reportsServer: set dsn or dsnSecretRef.name, not both"},
		{"ServiceMonitor without metrics Service", map[string]any{"reportsController": map[string]any{"metricsService": map[string]any{"create": false}, "serviceMonitor": map[string]any{"enabled": true}}},
			"reportsController.serviceMonitor.enabled needs reportsController.metricsService.create"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helmchart.Render(chartDir, helmchart.Options{Values: tc.values})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestChartRefusesBadValues: values.schema.json refuses a misspelt key or
// a value of the wrong type, naming it, instead of ignoring it.
func TestChartRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"misspelt controller", map[string]any{"admissionControler": map[string]any{"replicas": 3}}, "admissionControler"},
		{"misspelt knob", map[string]any{"reportsController": map[string]any{"replica": 3}}, "replica"},
		{"replicas not a number", map[string]any{"admissionController": map[string]any{"replicas": "three"}}, "admissionController"},
		{"bad pull policy", map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, "pullPolicy"},
		{"gitsync minimum interval not a duration", map[string]any{"gitsyncController": map[string]any{"minInterval": "10 seconds"}}, "minInterval"},
		{"reports server's retention not a duration", map[string]any{"reportsServer": map[string]any{"eventRetention": "a while"}}, "eventRetention"},
		{"negative gitsync file limit", map[string]any{"gitsyncController": map[string]any{"maxFiles": -1}}, "maxFiles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helmchart.Render(chartDir, helmchart.Options{Values: tc.values})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// reportsServerValues turn charter reports-server on, its PostgreSQL
// connection string in the user's Secret pg, key url.
var reportsServerValues = map[string]any{"reportsServer": map[string]any{
	"enabled": true, "dsnSecretRef": map[string]any{"name": "pg", "key": "url"},
	"replicas": 2, "eventRetention": "30m", "extraArgs": []any{"--v=2"},
}}

// reportsServerReviewed is what charter reports-server's ServiceAccount
// may do: delegate each request's authentication and authorisation to
// kube-apiserver, as any aggregated API server, through Kubernetes' own
// roles (bootstrapRoles).
var reportsServerReviewed = map[string][]grant{
	"charter-reports-server": {
		{cluster, "authentication.k8s.io", "tokenreviews", "create", "delegated authentication of bearer tokens (system:auth-delegator)"},
		{cluster, "authorization.k8s.io", "subjectaccessreviews", "create", "delegated authorisation of each request (system:auth-delegator)"},
		{"kube-system", "", "configmaps{extension-apiserver-authentication}", "get,list,watch", "the front proxy's client CA and headers (extension-apiserver-authentication-reader)"},
	},
}

// bootstrapRoles adds the roles kube-apiserver's bootstrap policy makes,
// which the chart binds charter reports-server to, with their rules.
func bootstrapRoles(r *rendered) {
	r.clusterRoles["system:auth-delegator"] = &rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}}
	r.roles["kube-system/extension-apiserver-authentication-reader"] = &rbacv1.Role{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"extension-apiserver-authentication"}, Verbs: []string{"get", "list", "watch"}},
	}}
}

// TestChartReportsServerRBAC: with reportsServer.enabled, its
// ServiceAccount holds the reviewed delegation only, and the controllers
// what they held.
func TestChartReportsServerRBAC(t *testing.T) {
	want := maps.Clone(reviewed)
	maps.Copy(want, reportsServerReviewed)
	for _, ns := range []string{"charter", "policy-system"} {
		t.Run(ns, func(t *testing.T) {
			r := collect(t, renderChart(t, ns, reportsServerValues).Objects)
			bootstrapRoles(r)
			checkReviewed(t, r, ns, want)
		})
	}
}

// apiService is apiregistration.k8s.io/v1 APIService's spec, decoded
// strictly (no Go type of it here).
type apiService struct {
	Group                string `json:"group"`
	Version              string `json:"version"`
	GroupPriorityMinimum int    `json:"groupPriorityMinimum"`
	VersionPriority      int    `json:"versionPriority"`
	CABundle             []byte `json:"caBundle"`
	Service              struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		Port      int32  `json:"port"`
	} `json:"service"`
}

// TestChartReportsServer: reportsServer.enabled installs charter
// reports-server, wired as kube-apiserver needs it, and leaves the report
// CRDs out; off, the chart installs them.
func TestChartReportsServer(t *testing.T) {
	reportCRDs := func(r *helmchart.Rendered) []string {
		var names []string
		for _, u := range append(slices.Clone(r.CRDs), r.Objects...) {
			if u.GetKind() != "CustomResourceDefinition" {
				continue
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
				t.Fatal(err)
			}
			if reportsserver.ServesCRD(&crd) {
				names = append(names, crd.Name)
			}
		}
		sort.Strings(names)
		return names
	}
	if got, want := reportCRDs(renderChart(t, "charter", nil)), []string{"clusterpolicyreports.wgpolicyk8s.io", "clusterreports.openreports.io", "policyreports.wgpolicyk8s.io", "reports.openreports.io"}; !slices.Equal(got, want) {
		t.Errorf("report CRDs by default: %v, want %v", got, want)
	}

	const ns = "policy-system"
	r := renderChart(t, ns, reportsServerValues)
	if got := reportCRDs(r); len(got) != 0 {
		t.Errorf("reportsServer.enabled still installs the report CRDs %v", got)
	}
	byKey := map[string]*unstructured.Unstructured{}
	var apiServices []*unstructured.Unstructured
	for _, u := range r.Objects {
		byKey[key(u)] = u
		if u.GetKind() == "APIService" {
			apiServices = append(apiServices, u)
			continue
		}
		if _, err := decodeStrict(u); err != nil {
			t.Errorf("%s: %v", key(u), err)
		}
	}
	var d appsv1.Deployment
	var svc corev1.Service
	var tls corev1.Secret
	for obj, k := range map[any]string{&d: "Deployment " + ns + "/charter-reports-server", &svc: "Service " + ns + "/charter-reports-server", &tls: "Secret " + ns + "/charter-reports-server-tls"} {
		u, ok := byKey[k]
		if !ok {
			t.Fatalf("no %s", k)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			t.Fatal(err)
		}
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	for _, check := range []struct {
		what      string
		got, want any
	}{
		{"replicas", *d.Spec.Replicas, int32(2)},
		{"ServiceAccount", pod.ServiceAccountName, "charter-reports-server"},
		{"args", c.Args, []string{"reports-server", "--secure-port=8443", "--tls-cert-file=/etc/charter/tls/tls.crt", "--tls-private-key-file=/etc/charter/tls/tls.key", "--event-retention=30m", "--v=2"}},
		{"DSN from the user's Secret", c.Env, []corev1.EnvVar{{Name: reportsserver.DSNEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "pg"}, Key: "url"}}}}},
		{"serving certificate volume", pod.Volumes[0].Secret.SecretName, tls.Name},
		{"no chart-made DSN Secret", byKey["Secret "+ns+"/charter-reports-server-dsn"] == nil, true},
		{"Service selects the Pods", labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)), true},
		{"Service targets the container's port", slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == svc.Spec.Ports[0].TargetPort.StrVal }), true},
		{"auth-delegator binding", byKey["ClusterRoleBinding charter-reports-server-auth-delegator"] != nil, true},
		{"authentication reader binding in kube-system", byKey["RoleBinding kube-system/charter-reports-server-auth-reader"] != nil, true},
	} {
		if diff := cmp.Diff(check.want, check.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", check.what, diff)
		}
	}
	for _, probe := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Scheme != corev1.URISchemeHTTPS || probe.HTTPGet.Port.StrVal != "https" {
			t.Errorf("probe %+v: want HTTPS on the serving port", probe)
		}
	}

	// One APIService per group version the server serves, each routed to
	// the Service and trusting the CA that signed its certificate for the
	// Service's name, which is what kube-apiserver verifies.
	gvs, err := reportsserver.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := tlsLeaf(tls.Data["tls.crt"])
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range apiServices {
		names = append(names, u.GetName())
		var spec apiService
		if err := decodeSpecStrict(u, &spec); err != nil {
			t.Errorf("%s: %v", key(u), err)
			continue
		}
		if u.GetName() != spec.Version+"."+spec.Group || spec.Service.Name != svc.Name || spec.Service.Namespace != ns || spec.Service.Port != svc.Spec.Ports[0].Port {
			t.Errorf("%s: %+v does not route to Service %s/%s port %d", key(u), spec, ns, svc.Name, svc.Spec.Ports[0].Port)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(spec.CABundle) {
			t.Errorf("%s: caBundle holds no PEM certificate", key(u))
			continue
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "charter-reports-server." + ns + ".svc"}); err != nil {
			t.Errorf("%s: the serving certificate does not verify against its caBundle: %v", key(u), err)
		}
	}
	var want []string
	for _, gv := range gvs {
		want = append(want, gv.Version+"."+gv.Group)
	}
	sort.Strings(names)
	sort.Strings(want)
	if !slices.Equal(names, want) {
		t.Errorf("APIServices %v, want one per group version reports-server serves %v", names, want)
	}

	// A connection string in the values goes to a Secret of the chart's.
	inline := renderChart(t, ns, map[string]any{"reportsServer": map[string]any{"enabled": true, "dsn": "postgres://reports@db/reports"}})
	for _, u := range inline.Objects {
		switch key(u) {
		case "Secret " + ns + "/charter-reports-server-dsn":
			if got, _, _ := unstructured.NestedString(u.Object, "stringData", "dsn"); got != "postgres://reports@db/reports" {
				t.Errorf("the chart's DSN Secret holds %q", got)
			}
		case "Deployment " + ns + "/charter-reports-server":
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			env, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
			secret, _, _ := unstructured.NestedString(env[0].(map[string]any), "valueFrom", "secretKeyRef", "name")
			if secret != "charter-reports-server-dsn" {
				t.Errorf("with reportsServer.dsn the DSN comes from Secret %q", secret)
			}
		}
	}
}

// tlsLeaf parses the first certificate of a PEM bundle.
func tlsLeaf(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("no PEM block")
	}
	return x509.ParseCertificate(block.Bytes)
}
