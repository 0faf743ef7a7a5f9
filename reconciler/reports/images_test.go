package reports

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
	"github.com/charter-dev/charter/internal/imagetest"
)

// TestBackgroundRescanVerifiesImagesAgain: an object whose image passed
// verification turns to fail on the next full rescan once the image's
// signature is gone, although the verification cache (an hour here)
// still holds the pass and neither the object nor the policy changed:
// a Pod's container (standard extractors; cosign, and a type Notary entry
// whose Notary signature is then tampered with) and a Tekton Task's step
// (a custom imageExtractor of a CRD kind).
func TestBackgroundRescanVerifiesImagesAgain(t *testing.T) {
	tasks := schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "tasks"}
	for _, tc := range []struct {
		name string
		// rule is the rule's name, match and imageExtractors.
		rule string
		// create makes the object running image and returns it.
		create func(e *env, image string) *unstructured.Unstructured
		// notary signs with a Notary signature and verifies with a
		// type Notary entry (verify-images.md §3.5), not cosign.
		notary bool
	}{{
		name: "Pod",
		rule: "  - name: verify\n    match: {any: [{resources: {kinds: [Pod]}}]}\n",
		create: func(e *env, image string) *unstructured.Unstructured {
			return e.createObject(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, map[string]any{
				"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "app"},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": image}}},
			})
		},
	}, {
		name:   "Pod, type Notary",
		rule:   "  - name: verify\n    match: {any: [{resources: {kinds: [Pod]}}]}\n",
		notary: true,
		create: func(e *env, image string) *unstructured.Unstructured {
			return e.createObject(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, map[string]any{
				"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "app"},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": image}}},
			})
		},
	}, {
		name: "Task step found by a custom extractor",
		rule: "  - name: verify\n    match: {any: [{resources: {kinds: [Task]}}]}\n    imageExtractors:\n      Task:\n      - {path: /spec/steps/*/image, key: name, name: steps}\n",
		create: func(e *env, image string) *unstructured.Unstructured {
			controlplanetest.InstallCRD(e.ctx, e.t, e.cfg, tasks, "Task")
			return e.createObject(tasks, map[string]any{
				"apiVersion": "tekton.dev/v1", "kind": "Task", "metadata": map[string]any{"name": "build"},
				"spec": map[string]any{"steps": []any{
					map[string]any{"name": "script-only", "script": "echo hi"},
					map[string]any{"name": "compile", "image": image},
				}},
			})
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			reg := imagetest.NewRegistry(t)
			img := reg.Push(t, "app", "v1")
			// entry is the verifyImages entry's type and attestors;
			// spoil leaves img without a signature that verifies, and
			// reason is what the failure then says.
			var entry, reason string
			var spoil func()
			if tc.notary {
				ca := imagetest.NewCA(t, "notary CA")
				reg.NotarySign(t, img.DigestRef, ca.NotarySigner(t, "release"))
				certJSON, _ := json.Marshal(ca.RootPEM)
				entry = fmt.Sprintf("      type: Notary\n      attestors:\n      - entries:\n        - certificates:\n            cert: %s\n", certJSON)
				spoil, reason = func() { reg.NotaryTamper(t, img.DigestRef) }, ".attestors[0].entries[0].certificates: failed to verify image"
			} else {
				key := imagetest.NewKey(t)
				reg.Sign(t, img, key.Signer, imagetest.SignOptions{})
				keyJSON, _ := json.Marshal(key.PublicPEM)
				entry = fmt.Sprintf("      attestors:\n      - entries:\n        - keys:\n            publicKeys: %s\n            rekor: {url: \"http://127.0.0.1:1\", ignoreTlog: true}\n", keyJSON)
				spoil, reason = func() { reg.Unsign(t, img) }, "no signatures found"
			}

			e := startEnv(t)
			e.images = imageverify.New(imageverify.Options{Egress: reg.Egress(), Cache: imageverify.NewCache(100, time.Hour, nil)})
			if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "images"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			obj := tc.create(e, img.DigestRef)
			c, _ := e.startController(Options{})

			policy := fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: signed-images}
spec:
  background: true
  rules:
%s    verifyImages:
    - imageReferences: ["%s/*"]
      failureAction: Audit
      mutateDigest: false
%s`, tc.rule, reg.Host, entry)
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(policy), &u.Object); err != nil {
				t.Fatal(err)
			}
			if _, err := e.dyn.Resource(kyvernov1.GroupVersion.WithResource("clusterpolicies")).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			e.wantResults("the signed image's result", "images", string(obj.GetUID()), "signed-images/verify=pass")

			spoil()
			if err := c.FullRescan(e.ctx); err != nil {
				t.Fatal(err)
			}
			rep := e.wantResults("the result once the signature is gone", "images", string(obj.GetUID()), "signed-images/verify=fail")
			results, _, _ := unstructured.NestedSlice(rep.Object, "results")
			if msg, _ := results[0].(map[string]any)["message"].(string); !strings.Contains(msg, img.DigestRef) || !strings.Contains(msg, reason) {
				t.Errorf("message %q, want the image and the reason (%q)", msg, reason)
			}
		})
	}
}

// createObject creates obj in namespace images.
func (e *env) createObject(gvr schema.GroupVersionResource, obj map[string]any) *unstructured.Unstructured {
	e.t.Helper()
	out, err := e.dyn.Resource(gvr).Namespace("images").Create(e.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// TestBackgroundScanImageValidatingPolicy: an ImageValidatingPolicy's
// background scan verifies the images of Pods that already run, with a
// cosign or a notary attestor: a signed image passes and an unsigned one
// fails, under the policy's name and Kyverno's source; once the signature
// is gone (cosign) or no longer verifies (notary, tampered with), the
// next full rescan verifies again and fails the Pod.
func TestBackgroundScanImageValidatingPolicy(t *testing.T) {
	t.Run("cosign", func(t *testing.T) {
		reg := imagetest.NewRegistry(t)
		key := imagetest.NewKey(t)
		signed := reg.Push(t, "app", "signed")
		reg.Sign(t, signed, key.Signer, imagetest.SignOptions{})
		keyJSON, _ := json.Marshal(key.PublicPEM)
		attestor := fmt.Sprintf("cosign:\n      key: {data: %s}\n      ctlog: {insecureIgnoreTlog: true, insecureIgnoreSCT: true}", keyJSON)
		backgroundImageScan(t, reg, signed, attestor, func() { reg.Unsign(t, signed) })
	})
	t.Run("notary", func(t *testing.T) {
		reg := imagetest.NewRegistry(t)
		ca := imagetest.NewCA(t, "notary CA")
		signed := reg.Push(t, "app", "signed")
		reg.NotarySign(t, signed.DigestRef, ca.NotarySigner(t, "release"))
		caJSON, _ := json.Marshal(ca.RootPEM)
		backgroundImageScan(t, reg, signed, fmt.Sprintf("notary: {certs: {value: %s}}", caJSON), func() { reg.NotaryTamper(t, signed.DigestRef) })
	})
}

// backgroundImageScan runs TestBackgroundScanImageValidatingPolicy for
// one attestor (YAML under its name): signed verifies, an unsigned image
// of reg does not, nor signed once spoil has run.
func backgroundImageScan(t *testing.T, reg *imagetest.Registry, signed imagetest.Image, attestor string, spoil func()) {
	t.Helper()
	unsigned := reg.Push(t, "app", "unsigned")
	e := startEnv(t)
	e.images = imageverify.New(imageverify.Options{Egress: reg.Egress(), Cache: imageverify.NewCache(100, time.Hour, nil)})
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "images"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := map[string]*corev1.Pod{}
	for name, image := range map[string]string{"signed": signed.DigestRef, "unsigned": unsigned.DigestRef} {
		pod, err := e.cs.CoreV1().Pods("images").Create(e.ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods[name] = pod
	}
	c, _ := e.startController(Options{})

	policy := fmt.Sprintf(`apiVersion: policies.kyverno.io/v1
kind: ImageValidatingPolicy
metadata: {name: signed-images}
spec:
  validationActions: [Audit]
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  matchImageReferences: [{glob: "%s/*"}]
  attestors:
  - name: release
    %s
  validations:
  - expression: "images.containers.all(i, verifyImageSignatures(i, [attestors.release]) > 0)"
    message: image is not signed by the release key
`, reg.Host, attestor)
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(policy), &u.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(policiesv1.GroupVersion.WithResource("imagevalidatingpolicies")).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rep := e.wantResults("the signed image's result", "images", string(pods["signed"].UID), "signed-images/signed-images=pass")
	results, _, _ := unstructured.NestedSlice(rep.Object, "results")
	if src, _ := results[0].(map[string]any)["source"].(string); src != "KyvernoImageValidatingPolicy" {
		t.Errorf("source %q, want KyvernoImageValidatingPolicy", src)
	}
	e.wantResults("the unsigned image's result", "images", string(pods["unsigned"].UID), "signed-images/signed-images=fail")

	spoil()
	if err := c.FullRescan(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.wantResults("the result once the signature is gone", "images", string(pods["signed"].UID), "signed-images/signed-images=fail")
}
