package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// writableResources is a resourceMap that also serves resource.Post (it
// answers a SubjectAccessReview allowed for user "admin" only, and records
// every other object created) and resource.ToGVR.
type writableResources struct {
	resourceMap
	created []string // "<resource> <namespace>"
}

func (w *writableResources) CreateResource(_ context.Context, _, apiVersion, resource, namespace string, obj map[string]any) (map[string]any, error) {
	w.created = append(w.created, resource+" "+namespace)
	if resource == "subjectaccessreviews" {
		spec, _ := obj["spec"].(map[string]any)
		obj["status"] = map[string]any{"allowed": spec["user"] == "admin"}
		return obj, nil
	}
	meta, _ := obj["metadata"].(map[string]any)
	meta["namespace"] = namespace
	return obj, nil
}

func (w *writableResources) ResourceFor(apiVersion, kind string) (schema.GroupVersionResource, error) {
	if apiVersion == "v1" && kind == "Pod" {
		return schema.GroupVersionResource{Version: "v1", Resource: "pods"}, nil
	}
	return schema.GroupVersionResource{}, errors.New("no such kind")
}

// TestResourcePostAndToGVR: resource.Post creates what a policy asks
// (a SubjectAccessReview whose answer the policy reads; a namespaced
// policy's object in its own namespace only), resource.ToGVR maps a kind
// for resource.Get and resource.List, and a loader that cannot write makes
// resource.Post an error, never a pass.
func TestResourcePostAndToGVR(t *testing.T) {
	policies, _ := readCELPolicies(t, "resourcewrite.yaml")
	set, err := Compile(policies)
	if err != nil {
		t.Fatal(err)
	}
	configMap := func(ns string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": ns}}
	}
	verdicts := func(l loader.Loaders, user string, ns string) map[string]review.RuleResponse {
		req := &review.Request{Operation: kyvernov1.Create, Object: configMap(ns), UserInfo: authenticationv1.UserInfo{Username: user}}
		resp := set.Validate(context.Background(), req, WithLoaders(l))
		out := map[string]review.RuleResponse{}
		for _, p := range resp.Policies {
			out[p.Policy.GetName()] = p.Rules[0]
		}
		return out
	}
	pods := resourceMap{pod("default", "web", nil, "nginx")}

	w := &writableResources{resourceMap: pods}
	got := verdicts(loader.Loaders{Resources: w}, "admin", "default")
	if r := got["may-delete-namespace"]; r.Status != review.StatusPass {
		t.Errorf("admin's SubjectAccessReview: %s %q, want pass", r.Status, r.Message)
	}
	if r := got["pod-by-gvr"]; r.Status != review.StatusPass {
		t.Errorf("resource.get by GVR of an existing Pod: %s %q, want pass", r.Status, r.Message)
	}
	if r := verdicts(loader.Loaders{Resources: w}, "someone", "default")["may-delete-namespace"]; r.Status != review.StatusFail || r.Message != "not allowed" {
		t.Errorf("someone's SubjectAccessReview: %s %q, want fail \"not allowed\"", r.Status, r.Message)
	}
	if r := verdicts(loader.Loaders{Resources: w}, "admin", "other")["pod-by-gvr"]; r.Status != review.StatusFail {
		t.Errorf("resource.get by GVR of a missing Pod: %s %q, want fail", r.Status, r.Message)
	}

	w = &writableResources{resourceMap: pods}
	got = verdicts(loader.Loaders{Resources: w}, "admin", "team-a")
	if r := got["posts-elsewhere"]; r.Status != review.StatusError || !strings.Contains(r.Message, `only in its own namespace "team-a"`) {
		t.Errorf("namespaced policy posting to another namespace: %s %q, want an error", r.Status, r.Message)
	}
	if r := got["posts-at-home"]; r.Status != review.StatusPass {
		t.Errorf("namespaced policy posting to its own namespace: %s %q, want pass", r.Status, r.Message)
	}
	for _, c := range w.created {
		if strings.HasPrefix(c, "configmaps ") && c != "configmaps team-a" {
			t.Errorf("created %q: a namespaced policy wrote outside its namespace", c)
		}
	}

	// The CLI's objects read but do not write.
	got = verdicts(loader.Loaders{Resources: pods}, "admin", "default")
	if r := got["may-delete-namespace"]; r.Status != review.StatusError || !strings.Contains(r.Message, "resource.Post is not available here") {
		t.Errorf("resource.Post without a writer: %s %q, want an error", r.Status, r.Message)
	}
	if r := got["pod-by-gvr"]; r.Status != review.StatusError || !strings.Contains(r.Message, "resource.ToGVR is not available here") {
		t.Errorf("resource.ToGVR without a mapper: %s %q, want an error", r.Status, r.Message)
	}
}
