package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/cosign"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/imagetest"
	"github.com/charter-dev/charter/reconciler/gitsync/source/oci"
)

func runCharter(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// TestPushSignAndTestAnArtifact: charter push writes a Flux artifact with
// the OCI annotations and prints its digest; --sign --key signs that
// digest with a cosign key (encrypted, password from COSIGN_PASSWORD), so
// cosign verification with the public key accepts it; charter test
// oci://… runs the artifact's suites as against the folder.
func TestPushSignAndTestAnArtifact(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	keys, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte("pw"), nil })
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "cosign.key")
	if err := os.WriteFile(keyFile, keys.PrivateBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COSIGN_PASSWORD", "pw")
	folder := filepath.Join("..", "..", "policies", "best-practices", "require-labels")
	url := "oci://" + reg.Host + "/team/policies:v1.0.0"

	out, errOut, err := runCharter(t, "push", url, "--path", folder, "--insecure",
		"--source", "https://git.example.com/policies", "--revision", "main@sha1:0123", "--sign", "--key", keyFile)
	if err != nil {
		t.Fatalf("push: %v\n%s", err, errOut)
	}
	pushed := strings.TrimSpace(out)
	if !strings.HasPrefix(pushed, "oci://"+reg.Host+"/team/policies:v1.0.0@sha256:") {
		t.Fatalf("push printed %q, want the tag and digest", pushed)
	}
	digest := pushed[strings.LastIndex(pushed, "@")+1:]

	ref, _ := name.ParseReference(reg.Host + "/team/policies@" + digest)
	desc, err := remote.Get(ref)
	if err != nil {
		t.Fatal(err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != oci.ConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != oci.ContentMediaType {
		t.Errorf("manifest is not in Flux's format: config %s, layers %v", m.Config.MediaType, m.Layers)
	}
	for k, want := range map[string]string{oci.AnnotationSource: "https://git.example.com/policies", oci.AnnotationRevision: "main@sha1:0123"} {
		if m.Annotations[k] != want {
			t.Errorf("annotation %s = %q, want %q", k, m.Annotations[k], want)
		}
	}
	if m.Annotations[oci.AnnotationCreated] == "" {
		t.Errorf("annotation %s missing", oci.AnnotationCreated)
	}

	v := imageverify.New(imageverify.Options{Egress: imagetest.LoopbackEgress()})
	check := func(pub string) error {
		_, err := v.VerifySignatures(context.Background(), loader.ImageCheck{
			Image: reg.Host + "/team/policies@" + digest,
			Attestor: kyvernov1.Attestor{Keys: &kyvernov1.StaticKeyAttestor{PublicKeys: pub,
				Rekor: &kyvernov1.Rekor{IgnoreTlog: true}, CTLog: &kyvernov1.CTLog{IgnoreSCT: true}}},
		})
		return err
	}
	if err := check(string(keys.PublicBytes)); err != nil {
		t.Errorf("the pushed digest's signature does not verify with the public key: %v", err)
	}
	if err := check(imagetest.NewKey(t).PublicPEM); err == nil {
		t.Error("the signature verified with another key")
	}

	out, errOut, err = runCharter(t, "test", url, "--insecure", "--remove-color")
	if err != nil || !strings.Contains(out, "0 failed") {
		t.Fatalf("charter test %s: %v\n%s%s", url, err, out, errOut)
	}
	folderOut, _, err := runCharter(t, "test", folder, "--remove-color")
	if err != nil {
		t.Fatal(err)
	}
	summary := func(s string) string { return s[strings.LastIndex(s, "Summary"):] }
	if summary(out) != summary(folderOut) {
		t.Errorf("the artifact's run %q differs from the folder's %q", summary(out), summary(folderOut))
	}

	// A wrong password pushes nothing.
	t.Setenv("COSIGN_PASSWORD", "wrong")
	if _, _, err := runCharter(t, "push", "oci://"+reg.Host+"/team/policies:v2", "--path", folder, "--insecure", "--sign", "--key", keyFile); err == nil {
		t.Error("push with a wrong key password succeeded")
	}
	if _, err := remote.Head(mustTag(t, reg.Host+"/team/policies:v2")); err == nil {
		t.Error("the tag was pushed although the key could not be read")
	}
}

func mustTag(t *testing.T, s string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(s)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}
