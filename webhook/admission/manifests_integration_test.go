package admission

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/internal/manifesttest"
)

// TestValidateManifestsOnRealAPIServer: an Enforce validate.manifests
// policy admits a ConfigMap signed with its key, and denies one changed
// after signing and an unsigned one, with the reason.
func TestValidateManifestsOnRealAPIServer(t *testing.T) {
	f := startAdmission(t)
	ctx, cl := f.ctx, f.client
	key := manifesttest.NewKey(t)
	pem, _ := json.Marshal(key.PublicPEM)
	var p kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: signed-configmaps}
spec:
  validationFailureAction: Enforce
  rules:
  - name: signed
    match: {any: [{resources: {kinds: [ConfigMap], selector: {matchLabels: {signed: "yes"}}}}]}
    validate:
      manifests:
        attestors:
        - entries:
          - keys: {publicKeys: `+string(pem)+`}
`), &p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "policy created", 30*time.Second, func() error { return cl.Create(ctx, p.DeepCopy()) })

	configMap := func(name, value string, annotations map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"signed": "yes"}, Annotations: annotations},
			Data:       map[string]string{"mode": value},
		}
	}
	signed := func(name string) map[string]string {
		b, err := yaml.Marshal(configMap(name, "safe", nil))
		if err != nil {
			t.Fatal(err)
		}
		return manifesttest.Annotations(t, key, "", b)
	}
	// The policy is served once an unsigned ConfigMap is refused.
	eventually(t, "policy served", 30*time.Second, func() error {
		err := cl.Create(ctx, configMap("unsigned", "safe", nil))
		if err == nil {
			_ = cl.Delete(ctx, configMap("unsigned", "safe", nil))
			return errNotYet("unsigned ConfigMap admitted")
		}
		if !strings.Contains(err.Error(), "the resource is not signed") {
			t.Fatalf("unsigned ConfigMap: %v", err)
		}
		return nil
	})
	if err := cl.Create(ctx, configMap("good", "safe", signed("good"))); err != nil {
		t.Fatalf("a ConfigMap signed with the policy's key was denied: %v", err)
	}
	err := cl.Create(ctx, configMap("tampered", "unsafe", signed("tampered")))
	if err == nil || !strings.Contains(err.Error(), "the resource differs from its signed manifest at data.mode") {
		t.Fatalf("a ConfigMap changed after signing: %v", err)
	}
}
