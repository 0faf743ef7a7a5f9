package admission

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
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

var taskGVR = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "tasks"}

// TestImageExtractorsOnRealAPIServer: a verifyImages rule with a custom
// extractor for a CRD kind (Tekton's Task) is Ready, admits a Task whose
// steps are signed with each step pinned to the digest verified (a digest
// patch built from the extractor's path), and denies a Task with an
// unsigned step in Kyverno's words.
func TestImageExtractorsOnRealAPIServer(t *testing.T) {
	key := imagetest.NewKey(t)
	reg, signed, unsigned := imagetest.NewSignedRegistry(t, "app", key)
	verifier := imageverify.New(imageverify.Options{Egress: reg.Egress(), Cache: imageverify.NewCache(100, time.Hour, nil)})
	f := startAdmission(t, withNamespaces("ci"), withOptions(func(o *Options) {
		o.State.Loaders.ImageVerifier = verifier
	}))
	ctx := f.ctx
	controlplanetest.InstallCRD(ctx, t, f.cp.RESTConfig(), taskGVR, "Task")
	cl := f.client
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
