package dpol

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/internal/testcases"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// selectCase is one file of testdata/select: a DeletingPolicy or
// NamespacedDeletingPolicy, what the run around it holds (exceptions,
// namespace labels, the objects resource.* reads) and, per object, what
// the policy decides.
type selectCase struct {
	Policy map[string]any `json:"policy"`
	// Exceptions are policies.kyverno.io PolicyExceptions; they act in
	// their own namespace unless exceptionsAnyNamespace.
	Exceptions             []map[string]any `json:"exceptions"`
	ExceptionsAnyNamespace bool             `json:"exceptionsAnyNamespace"`
	// NamespaceLabels are the labels of each namespace.
	NamespaceLabels map[string]map[string]string `json:"namespaceLabels"`
	// Cluster holds the objects resource.Get and resource.List read.
	Cluster []map[string]any `json:"cluster"`
	Objects []struct {
		Name string `json:"name"`
		// Want is delete, keep or error.
		Want string `json:"want"`
		// Error is part of the error, when want is error.
		Error string `json:"error"`
		// Resource is the object's resource (of its apiVersion's group
		// and version), e.g. configmaps.
		Resource string         `json:"resource"`
		Object   map[string]any `json:"object"`
	} `json:"objects"`
}

// faultCase is one file of testdata/faults: a policy spec and the faults
// its compile gives (each a part of one fault's text).
type faultCase struct {
	Spec map[string]any `json:"spec"`
	Want []string       `json:"want"`
}

// decode reads raw into out as its JSON form, strictly.
func decode(t *testing.T, raw any, out any) {
	t.Helper()
	data, err := yaml.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, out); err != nil {
		t.Fatal(err)
	}
}

func decodePolicy(t *testing.T, raw map[string]any) policiesv1.DeletingPolicyLike {
	t.Helper()
	var p policiesv1.DeletingPolicyLike
	switch raw["kind"] {
	case policiesv1.DeletingPolicyKind:
		p = &policiesv1.DeletingPolicy{}
	case policiesv1.NamespacedDeletingPolicyKind:
		p = &policiesv1.NamespacedDeletingPolicy{}
	default:
		t.Fatalf("policy kind %v: want DeletingPolicy or NamespacedDeletingPolicy", raw["kind"])
	}
	decode(t, raw, p)
	return p
}

// TestSelects decides on objects as the cleanup controller asks a run of
// the policy: the policy's namespace binds its CEL libraries (a
// NamespacedDeletingPolicy's reads stay in it), the object's namespace is
// the one its exceptions act in.
func TestSelects(t *testing.T) {
	testcases.Each(t, "select", func(t *testing.T, tc *selectCase) {
		src := decodePolicy(t, tc.Policy)
		key := src.GetName()
		if src.IsNamespaced() {
			key = src.GetNamespace() + "/" + key
		}
		f := &fault.Collector{Kind: src.GetKind(), Name: key}
		dp := Compile(src.GetDeletingPolicySpec(), f)
		if len(f.Errs) > 0 {
			t.Fatalf("compile: %v", f.Errs)
		}
		scope := celruntime.ExceptionOwnNamespace
		if tc.ExceptionsAnyNamespace {
			scope = celruntime.ExceptionAnyNamespace
		}
		own := celruntime.Owner{Source: src}
		for i, raw := range tc.Exceptions {
			ex := &policiesv1.PolicyException{}
			decode(t, raw, ex)
			compiled, faults := celruntime.CompileException(ex, scope)
			if len(faults) > 0 {
				t.Fatalf("exceptions[%d]: %v", i, faults)
			}
			own.Exceptions = append(own.Exceptions, compiled)
		}
		opts := &review.Options{Loaders: loader.Loaders{Resources: cluster(tc.Cluster)}}
		libNamespace := ""
		if src.IsNamespaced() {
			libNamespace = src.GetNamespace()
		}
		for _, o := range tc.Objects {
			meta, _ := o.Object["metadata"].(map[string]any)
			ns, _ := meta["namespace"].(string)
			apiVersion, _ := o.Object["apiVersion"].(string)
			gv, err := schema.ParseGroupVersion(apiVersion)
			if err != nil {
				t.Fatalf("%s: %v", o.Name, err)
			}
			req := &review.Request{Operation: kyvernov1.Create, Object: o.Object, Resource: gv.WithResource(o.Resource)}
			if ns != "" {
				req.NamespaceLabels = tc.NamespaceLabels[ns]
				if req.NamespaceLabels == nil {
					req.NamespaceLabels = map[string]string{}
				}
			}
			got, err := dp.Selects(review.NewView(context.Background(), req, opts), libNamespace, ns, key, own)
			verdict := testcases.Deletion(got, err)
			if verdict != o.Want {
				t.Errorf("%s: %s (err %v), want %s", o.Name, verdict, err, o.Want)
			} else if o.Error != "" && !strings.Contains(err.Error(), o.Error) {
				t.Errorf("%s: error %q lacks %q", o.Name, err, o.Error)
			}
		}
	})
}

// TestCompileFaults: what Compile refuses, with the field path.
func TestCompileFaults(t *testing.T) {
	testcases.Each(t, "faults", func(t *testing.T, tc *faultCase) {
		var spec policiesv1.DeletingPolicySpec
		decode(t, tc.Spec, &spec)
		f := &fault.Collector{Kind: policiesv1.DeletingPolicyKind, Name: "p"}
		Compile(&spec, f)
		if len(f.Errs) != len(tc.Want) {
			t.Fatalf("got %d faults, want %d:\n%v", len(f.Errs), len(tc.Want), f.Errs)
		}
		for _, w := range tc.Want {
			if !strings.Contains(f.Errs.Error(), w) {
				t.Errorf("faults lack %q:\n%v", w, f.Errs)
			}
		}
	})
}

// TestResources: the resources a run lists, one per group, version and
// resource a rule names, wildcards of group and version kept.
func TestResources(t *testing.T) {
	var spec policiesv1.DeletingPolicySpec
	decode(t, map[string]any{"matchConstraints": map[string]any{"resourceRules": []any{
		map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"configmaps", "secrets"}},
		map[string]any{"apiGroups": []any{"apps", "batch"}, "apiVersions": []any{"*"}, "resources": []any{"jobs"}},
	}}}, &spec)
	f := &fault.Collector{}
	dp := Compile(&spec, f)
	if len(f.Errs) > 0 {
		t.Fatal(f.Errs)
	}
	var got []string
	for _, r := range dp.Resources() {
		got = append(got, r.Group+"/"+r.Version+"/"+r.Resource)
	}
	want := "[/v1/configmaps /v1/secrets apps/*/jobs batch/*/jobs]"
	if fmt.Sprint(got) != want {
		t.Errorf("Resources = %v, want %s", got, want)
	}
}

// cluster serves resource.Get and resource.List from a list of objects
// (apiVersion and kind name the resource by the usual plural).
type cluster []map[string]any

func (c cluster) Resource(_ context.Context, apiVersion, resource, namespace, name string) (map[string]any, error) {
	for _, o := range c.match(apiVersion, resource, namespace) {
		if meta, _ := o["metadata"].(map[string]any); meta["name"] == name {
			return o, nil
		}
	}
	return nil, fmt.Errorf("%s %s %s/%s not found", apiVersion, resource, namespace, name)
}

func (c cluster) Resources(_ context.Context, apiVersion, resource, namespace string) ([]map[string]any, error) {
	return c.match(apiVersion, resource, namespace), nil
}

func (c cluster) match(apiVersion, resource, namespace string) []map[string]any {
	var out []map[string]any
	for _, o := range c {
		meta, _ := o["metadata"].(map[string]any)
		kind, _ := o["kind"].(string)
		if o["apiVersion"] == apiVersion && strings.ToLower(kind)+"s" == resource && (namespace == "" || meta["namespace"] == namespace) {
			out = append(out, o)
		}
	}
	return out
}
