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
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/imagetest"
)

// TestBackgroundRescanVerifiesImagesAgain: a Pod whose image passed
// verification turns to fail on the next full rescan once the image's
// signature is gone, although the verification cache (an hour here)
// still holds the pass and neither the Pod nor the policy changed.
func TestBackgroundRescanVerifiesImagesAgain(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	key := imagetest.NewKey(t)
	img := reg.Push(t, "app", "v1")
	reg.Sign(t, img, key.Signer, imagetest.SignOptions{})

	e := startEnv(t)
	e.images = imageverify.New(imageverify.Options{Cache: imageverify.NewCache(100, time.Hour, nil)})
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "images"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := e.cs.CoreV1().Pods("images").Create(e.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: img.DigestRef}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := e.startController(Options{PolicyDebounce: 100 * time.Millisecond})

	keyJSON, _ := json.Marshal(key.PublicPEM)
	policy := fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: signed-images}
spec:
  background: true
  rules:
  - name: verify
    match: {any: [{resources: {kinds: [Pod]}}]}
    verifyImages:
    - imageReferences: ["%s/*"]
      failureAction: Audit
      mutateDigest: false
      attestors:
      - entries:
        - keys:
            publicKeys: %s
            rekor: {url: "http://127.0.0.1:1", ignoreTlog: true}
`, reg.Host, keyJSON)
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(policy), &u.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(kyvernov1.GroupVersion.WithResource("clusterpolicies")).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantResults("the signed image's result", "images", string(pod.UID), "signed-images/verify=pass")

	reg.Unsign(t, img)
	if err := c.FullRescan(e.ctx); err != nil {
		t.Fatal(err)
	}
	rep := e.wantResults("the result once the signature is gone", "images", string(pod.UID), "signed-images/verify=fail")
	results, _, _ := unstructured.NestedSlice(rep.Object, "results")
	if msg, _ := results[0].(map[string]any)["message"].(string); msg == "" || !strings.Contains(msg, "no signatures found") {
		t.Errorf("message %q, want the reason", msg)
	}
}
