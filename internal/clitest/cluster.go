package clitest

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/charter-dev/charter/engine/loader"
)

// fakeCluster stands in for the API server of a suite: it serves the
// suite's clusterResources to configMap context entries and to apiCall
// entries (GET of Kubernetes API paths), and answers apiCall entries from
// the suite's apiCallResponses first.
type fakeCluster struct {
	objects   []*unstructured.Unstructured
	responses []APICallResponse
	global    map[string]any
}

var (
	_ loader.ConfigMapLoader = (*fakeCluster)(nil)
	_ loader.APICaller       = (*fakeCluster)(nil)
	_ loader.GlobalContext   = (*fakeCluster)(nil)
)

// ConfigMap returns a ConfigMap from the cluster resources.
func (c *fakeCluster) ConfigMap(_ context.Context, namespace, name string) (map[string]any, error) {
	for _, o := range c.objects {
		if o.GetKind() == "ConfigMap" && o.GetAPIVersion() == "v1" && o.GetNamespace() == namespace && o.GetName() == name {
			return o.Object, nil
		}
	}
	return nil, fmt.Errorf("configmaps %q not found in namespace %q (no such cluster resource in the test)", name, namespace)
}

// Call answers an apiCall: a matching apiCallResponses entry, else a GET of
// an object or a list from the cluster resources.
func (c *fakeCluster) Call(_ context.Context, call loader.APICall) (any, error) {
	method := call.Method
	if method == "" {
		method = "GET"
	}
	for _, r := range c.responses {
		if r.Method != "" && !strings.EqualFold(r.Method, method) {
			continue
		}
		if (r.URLPath != "" && r.URLPath == call.URLPath) || (r.URL != "" && r.URL == call.URL) {
			if call.Library {
				// The CEL http library: Kyverno's mock shape, any status.
				status := r.Response.StatusCode
				if status == 0 {
					status = 200
				}
				return map[string]any{"body": r.Response.Body, "statusCode": status}, nil
			}
			if r.Response.StatusCode >= 300 {
				return nil, fmt.Errorf("apiCall %s%s: HTTP %d", call.URL, call.URLPath, r.Response.StatusCode)
			}
			return r.Response.Body, nil
		}
	}
	if call.URLPath == "" {
		return nil, fmt.Errorf("apiCall to service %s: no apiCallResponses entry for it in the test", call.URL)
	}
	if method != "GET" {
		return nil, fmt.Errorf("apiCall %s %s: only GET is served from cluster resources", method, call.URLPath)
	}
	return c.get(call.URLPath)
}

// GlobalContextEntry returns a globalContextEntries mock by name, or one
// of its projections by "<entry>.<projection>", as the cluster does.
func (c *fakeCluster) GlobalContextEntry(_ context.Context, name string) (any, error) {
	if v, ok := c.global[name]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("%w: %q is not mocked in the test's globalContextEntries", loader.ErrGlobalContextEntryNotFound, name)
}

// get serves /api/v1/... and /apis/group/version/... paths: a list of a
// resource (all namespaces or one) or one named object.
func (c *fakeCluster) get(urlPath string) (any, error) {
	path, _, _ := strings.Cut(urlPath, "?")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var apiVersion string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		apiVersion, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		apiVersion, parts = parts[1]+"/"+parts[2], parts[3:]
	default:
		return nil, fmt.Errorf("apiCall %s: not a Kubernetes API path", urlPath)
	}
	namespace := ""
	if len(parts) >= 3 && parts[0] == "namespaces" {
		namespace, parts = parts[1], parts[2:]
	}
	var resource, name string
	switch len(parts) {
	case 1:
		resource = parts[0]
	case 2:
		resource, name = parts[0], parts[1]
	default:
		return nil, fmt.Errorf("apiCall %s: unsupported path (subresources are not served)", urlPath)
	}
	var items []any
	for _, o := range c.objects {
		if o.GetAPIVersion() != apiVersion || plural(o.GetKind()) != resource {
			continue
		}
		if namespace != "" && o.GetNamespace() != namespace {
			continue
		}
		if name != "" {
			if o.GetName() == name {
				return o.Object, nil
			}
			continue
		}
		items = append(items, o.Object)
	}
	if name != "" {
		return nil, fmt.Errorf("apiCall %s: %s %q not found in the test's cluster resources", urlPath, resource, name)
	}
	if items == nil {
		items = []any{}
	}
	return map[string]any{"apiVersion": apiVersion, "kind": "List", "metadata": map[string]any{}, "items": items}, nil
}

// plural is the resource name of a kind, by the rules the built-in APIs
// follow.
func plural(kind string) string {
	k := strings.ToLower(kind)
	switch {
	case k == "endpoints":
		return k
	case strings.HasSuffix(k, "s"), strings.HasSuffix(k, "x"), strings.HasSuffix(k, "ch"), strings.HasSuffix(k, "sh"):
		return k + "es"
	case strings.HasSuffix(k, "y") && len(k) > 1 && !strings.ContainsRune("aeiou", rune(k[len(k)-2])):
		return k[:len(k)-1] + "ies"
	}
	return k + "s"
}
