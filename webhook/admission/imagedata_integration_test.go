package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/imagetest"
)

// imageDataManifests read image data from the registry %[1]s at
// admission: a ValidatingPolicy through image.GetMetadata and a
// ClusterPolicy through an imageRegistry context entry, each admitting in
// its namespace only the image whose tag names digest %[2]s.
const imageDataManifests = `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: pinned-release}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: cel}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: "object.spec.containers.all(c, image.GetMetadata(c.image).digest == '%[2]s')"
    message: not the release image
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: pinned-release-cp}
spec:
  validationFailureAction: Enforce
  rules:
  - name: release
    match: {any: [{resources: {kinds: [Pod], namespaces: [cpol]}}]}
    context:
    - name: imageData
      imageRegistry: {reference: "{{ request.object.spec.containers[0].image }}"}
    validate:
      message: "not the release image: {{ imageData.resolvedImage }}"
      deny:
        conditions:
          any:
          - {key: "{{ imageData.digest }}", operator: NotEquals, value: "%[2]s"}
`

// TestImageDataOnRealAPIServer: policies that read image data from a
// registry are Ready in the cluster (an imageRegistry context entry is no
// longer refused there) and decide at admission on what the registry
// answers for the Pod's tag.
func TestImageDataOnRealAPIServer(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	release := reg.Push(t, "app", "release")
	other := reg.Push(t, "app", "other")
	images := imageverify.New(imageverify.Options{Egress: reg.Egress(), Cache: imageverify.NewCache(100, time.Hour, nil)})
	f := startAdmission(t, withNamespaces("cel", "cpol"), withOptions(func(o *Options) {
		o.State.Loaders.ImageVerifier, o.State.Loaders.Images = images, images
	}))
	ctx, cl := f.ctx, f.client
	f.installReady(t, fmt.Sprintf(imageDataManifests, reg.Host, release.Digest))
	podOf := func(name, ns, image string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}
	}
	for _, tc := range []struct{ ns, want string }{
		{"cel", "Policy pinned-release failed: not the release image"},
		{"cpol", "not the release image: " + reg.Host + "/app@" + other.Digest},
	} {
		t.Run(tc.ns, func(t *testing.T) {
			// Once the policy's webhook rules are registered.
			eventually(t, "other image denied", 30*time.Second, func() error {
				p := podOf("other", tc.ns, other.Ref)
				err := cl.Create(ctx, p)
				if err == nil {
					_ = cl.Delete(ctx, p)
					return errNotYet("the other image was admitted")
				}
				if !strings.Contains(err.Error(), tc.want) {
					return fmt.Errorf("got %v, want a denial containing %q", err, tc.want)
				}
				return nil
			})
			if err := cl.Create(ctx, podOf("release", tc.ns, release.Ref)); err != nil {
				t.Errorf("the release image was denied: %v", err)
			}
		})
	}
}
