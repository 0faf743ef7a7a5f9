package imageverify

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
)

// recordingSecrets serves empty docker-config Secrets and records which
// were read.
type recordingSecrets struct{ read []string }

func (r *recordingSecrets) Secret(_ context.Context, namespace, name string) (*corev1.Secret, error) {
	r.read = append(r.read, namespace+"/"+name)
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}, nil
}

// TestKeychainSecretScope: a namespaced policy's registry secrets are read
// from its own namespace only; another namespace's is refused before it
// is read. A cluster-wide policy may name any.
func TestKeychainSecretScope(t *testing.T) {
	for _, tc := range []struct {
		name    string
		scope   string
		secrets []string
		read    string
		err     string
	}{
		{name: "namespaced, own by name", scope: "team-a", secrets: []string{"regcred"}, read: "team-a/regcred"},
		{name: "namespaced, own by namespace/name", scope: "team-a", secrets: []string{"team-a/regcred"}, read: "team-a/regcred"},
		{name: "namespaced, another namespace's", scope: "team-a", secrets: []string{"regcred", "team-b/regcred"},
			err: `failed to fetch secrets: a namespaced policy can only use registry secrets of its own namespace "team-a", not team-b/regcred`},
		{name: "cluster-wide, any namespace's", secrets: []string{"team-b/regcred"}, read: "team-b/regcred"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secrets := &recordingSecrets{}
			v := New(Options{Secrets: secrets})
			_, err := v.keychain(context.Background(), loader.ImageCredentials{Namespace: "team-a", Scope: tc.scope,
				Registry: &kyvernov1.ImageRegistryCredentials{Secrets: tc.secrets}})
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %s", err, tc.err)
				}
				if len(secrets.read) != 0 {
					t.Errorf("read %v before refusing", secrets.read)
				}
				return
			}
			if err != nil || strings.Join(secrets.read, ",") != tc.read {
				t.Errorf("read %v, %v; want %s", secrets.read, err, tc.read)
			}
		})
	}
}
