package admission

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/imagetest"
)

// taskPolicy verifies the steps[*].image of Tekton Tasks (a custom
// extractor) against the key %[2]s for the images of registry %[1]s, in
// Enforce with the defaults mutateDigest, verifyDigest and required.
const taskPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: signed-tasks}
spec:
  rules:
  - name: steps
    match: {any: [{resources: {kinds: [tekton.dev/v1/Task], namespaces: [ci]}}]}
    imageExtractors:
      Task:
      - {path: /spec/steps/*/image, key: name, name: steps}
    verifyImages:
    - imageReferences: ["%[1]s/*"]
      failureAction: Enforce
      attestors:
      - entries:
        - keys:
            publicKeys: %[2]s
            rekor: {url: "http://127.0.0.1:1", ignoreTlog: true}
            ctlog: {ignoreSCT: true}
`

// TestImageExtractorsOnRealAPIServer: a verifyImages rule with a custom
// extractor for a CRD kind (Tekton's Task) is Ready, admits a Task whose
// steps are signed with each step pinned to the digest verified (a digest
// patch built from the extractor's path), and denies a Task with an
// unsigned step in Kyverno's words.
func TestImageExtractorsOnRealAPIServer(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	key := imagetest.NewKey(t)
	signed := reg.Push(t, "app", "signed")
	reg.Sign(t, signed, key.Signer, imagetest.SignOptions{})
	unsigned := reg.Push(t, "app", "unsigned")
	verifier := imageverify.New(imageverify.Options{Cache: imageverify.NewCache(100, time.Hour, nil)})
	f := startAdmission(t, withNamespaces("ci"), withOptions(func(o *Options) {
		o.State.Loaders.ImageVerifier = verifier
	}))
	ctx := f.ctx
	cl := crdClient(t, f)
	installTaskCRD(t, f, cl)
	pem, _ := json.Marshal(key.PublicPEM)
	f.installReady(t, fmt.Sprintf(taskPolicy, reg.Host, pem))

	task := func(name string, images ...string) *unstructured.Unstructured {
		var steps []any
		for i, img := range images {
			steps = append(steps, map[string]any{"name": fmt.Sprintf("step-%d", i), "image": img})
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "tekton.dev/v1", "kind": "Task",
			"metadata": map[string]any{"name": name, "namespace": "ci"},
			"spec":     map[string]any{"steps": steps},
		}}
		return u
	}

	t.Run("an unsigned step is denied", func(t *testing.T) {
		// Once the policy's webhook rules for Tasks are registered.
		eventually(t, "Task with an unsigned step denied", 30*time.Second, func() error {
			u := task("unsigned", signed.Ref, unsigned.Ref)
			err := cl.Create(ctx, u)
			if err == nil {
				_ = cl.Delete(ctx, u)
				return errNotYet("Task with an unsigned step admitted")
			}
			want := "failed to verify image " + unsigned.Ref + ": .attestors[0].entries[0].keys: no signatures found"
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "signed-tasks") {
				return fmt.Errorf("got %v, want a denial by signed-tasks containing %q", err, want)
			}
			return nil
		})
	})

	t.Run("signed steps named by tag are pinned to the digest verified", func(t *testing.T) {
		u := task("signed", signed.Ref, signed.Ref)
		if err := cl.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "steps")
		for i, s := range steps {
			if got, want := s.(map[string]any)["image"], signed.Ref+"@"+signed.Digest; got != want {
				t.Errorf("stored step %d image %v, want %s", i, got, want)
			}
		}
	})

	t.Run("other namespaces are not matched", func(t *testing.T) {
		u := task("elsewhere", unsigned.Ref)
		u.SetNamespace("default")
		if err := cl.Create(ctx, u); err != nil {
			t.Fatalf("a Task outside the policy's namespaces was denied: %v", err)
		}
	})
}

// crdClient is a client of the fixture's control plane that also knows
// CustomResourceDefinitions.
func crdClient(t *testing.T, f *fixture) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := client.New(f.cp.RESTConfig(), client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// installTaskCRD installs a minimal tekton.dev/v1 Task CRD and waits
// until Tasks can be listed.
func installTaskCRD(t *testing.T, f *fixture, cl client.Client) {
	t.Helper()
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "tasks.tekton.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "tekton.dev", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "tasks", Singular: "task", Kind: "Task", ListKind: "TaskList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
	if err := cl.Create(f.ctx, crd); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Tasks served", 30*time.Second, func() error {
		var list unstructured.UnstructuredList
		list.SetAPIVersion("tekton.dev/v1")
		list.SetKind("TaskList")
		return cl.List(f.ctx, &list, client.InNamespace("ci"))
	})
}
