package reportsserver

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiServiceResource is apiregistration.k8s.io/v1 APIService.
var apiServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// Registration says where kube-apiserver finds a reports server.
type Registration struct {
	// Namespace and Service name the Service the APIServices point at.
	Namespace, Service string
	// ExternalName, when set, makes the Service an ExternalName Service
	// for that host (localhost for a server beside a local control plane,
	// which has no cluster network); else the Service must exist.
	ExternalName string
	// Port is the server's port.
	Port int
	// CABundle is the CA of the server's serving certificate, which must
	// name <Service>.<Namespace>.svc.
	CABundle []byte
}

// GroupVersions are the group versions the server serves, one APIService
// each.
func GroupVersions() ([]schema.GroupVersion, error) {
	resources, err := loadResources()
	if err != nil {
		return nil, err
	}
	var out []schema.GroupVersion
	seen := map[schema.GroupVersion]bool{}
	for _, r := range resources {
		if gv := r.gvr.GroupVersion(); !seen[gv] {
			seen[gv] = true
			out = append(out, gv)
		}
	}
	return out, nil
}

// Register creates or updates the Service (when ExternalName is set) and
// the APIServices that route the report APIs to the server, then waits
// until kube-apiserver reports them available or ctx ends.
func Register(ctx context.Context, cfg *rest.Config, reg Registration) error {
	gvs, err := GroupVersions()
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if reg.ExternalName != "" {
		if err := ensureService(ctx, kube, reg); err != nil {
			return err
		}
	}
	for _, gv := range gvs {
		if err := ensureAPIService(ctx, dyn, gv, reg); err != nil {
			return err
		}
	}
	return WaitAvailable(ctx, cfg, gvs)
}

func ensureService(ctx context.Context, kube kubernetes.Interface, reg Registration) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: reg.Namespace}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", reg.Namespace, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: reg.Service, Namespace: reg.Namespace},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: reg.ExternalName,
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(reg.Port)}},
		},
	}
	services := kube.CoreV1().Services(reg.Namespace)
	current, err := services.Get(ctx, reg.Service, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = services.Create(ctx, svc, metav1.CreateOptions{})
	case err == nil:
		current.Spec = svc.Spec
		_, err = services.Update(ctx, current, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing service %s/%s: %w", reg.Namespace, reg.Service, err)
	}
	return nil
}

func ensureAPIService(ctx context.Context, dyn dynamic.Interface, gv schema.GroupVersion, reg Registration) error {
	name := gv.Version + "." + gv.Group
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": name, "labels": map[string]any{"app.kubernetes.io/name": "charter-reports-server"}},
		"spec": map[string]any{
			"group":                gv.Group,
			"version":              gv.Version,
			"groupPriorityMinimum": int64(1000),
			"versionPriority":      int64(15),
			"service": map[string]any{
				"namespace": reg.Namespace,
				"name":      reg.Service,
				"port":      int64(reg.Port),
			},
		},
	}}
	// caBundle is bytes: base64 in JSON.
	if err := unstructured.SetNestedField(obj.Object, base64.StdEncoding.EncodeToString(reg.CABundle), "spec", "caBundle"); err != nil {
		return err
	}
	apiServices := dyn.Resource(apiServiceResource)
	current, err := apiServices.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = apiServices.Create(ctx, obj, metav1.CreateOptions{})
	case err == nil:
		obj.SetResourceVersion(current.GetResourceVersion())
		_, err = apiServices.Update(ctx, obj, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing APIService %s: %w", name, err)
	}
	return nil
}

// WaitAvailable waits until the APIServices of gvs are Available and
// kube-apiserver answers their discovery: the condition is set before the
// aggregator routes requests (until then they get 404 or 503).
func WaitAvailable(ctx context.Context, cfg *rest.Config, gvs []schema.GroupVersion) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	for _, gv := range gvs {
		name := gv.Version + "." + gv.Group
		var last string
		err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			obj, err := dyn.Resource(apiServiceResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
			for _, c := range conditions {
				m, _ := c.(map[string]any)
				if m["type"] == "Available" {
					last = fmt.Sprintf("%v: %v", m["reason"], m["message"])
					return m["status"] == "True", nil
				}
			}
			last = "no Available condition yet"
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("APIService %s not available: %s: %w", name, last, err)
		}
		err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(context.Context) (bool, error) {
			_, err := disco.ServerResourcesForGroupVersion(gv.String())
			if err != nil {
				last = err.Error()
			}
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("kube-apiserver does not route %s: %s: %w", gv, last, err)
		}
	}
	return nil
}
