package build

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
)

// TestRemotePathsAreRefused: every field through which kustomize would
// fetch a URL or clone a Git repository is refused before the build, naming
// the file and the field, and the server behind the URL sees no request.
// Without the check, kustomize's file loader GETs the http ones (the
// ConfigMap then holds the server's answer).
func TestRemotePathsAreRefused(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fetched}\n"))
	}))
	defer srv.Close()
	url := srv.URL + "/latest/meta-data/token"

	local := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: local}\n"
	tests := []struct {
		name  string
		files map[string]string
		file  string
		field string
	}{
		{
			name:  "configMapGenerator file",
			files: map[string]string{"env/kustomization.yaml": "configMapGenerator:\n- name: c\n  files: [creds=" + url + "]\n"},
			file:  "env/kustomization.yaml", field: "configMapGenerator[0].files[0]",
		},
		{
			name:  "secretGenerator envs",
			files: map[string]string{"env/kustomization.yaml": "secretGenerator:\n- name: s\n  envs: [" + url + "]\n"},
			file:  "env/kustomization.yaml", field: "secretGenerator[0].envs[0]",
		},
		{
			name:  "http resource",
			files: map[string]string{"env/kustomization.yaml": "resources: [cm.yaml, " + url + "]\n", "env/cm.yaml": local},
			file:  "env/kustomization.yaml", field: "resources[1]",
		},
		{
			name:  "git resource",
			files: map[string]string{"env/kustomization.yaml": "resources: ['github.com/example/policies//base?ref=main']\n"},
			file:  "env/kustomization.yaml", field: "resources[0]",
		},
		{
			name:  "scp git component",
			files: map[string]string{"env/kustomization.yaml": "components: [git@example.com:org/repo.git]\n"},
			file:  "env/kustomization.yaml", field: "components[0]",
		},
		{
			name:  "patch path",
			files: map[string]string{"env/kustomization.yaml": "resources: [cm.yaml]\npatches:\n- path: " + url + "\n", "env/cm.yaml": local},
			file:  "env/kustomization.yaml", field: "patches[0].path",
		},
		{
			name: "in a base the overlay reaches",
			files: map[string]string{
				"env/kustomization.yaml":  "resources: [../base]\n",
				"base/kustomization.yaml": "configMapGenerator:\n- name: c\n  files: [" + url + "]\n",
			},
			file: "base/kustomization.yaml", field: "configMapGenerator[0].files[0]",
		},
		{
			name: "transformer configuration file",
			files: map[string]string{
				"env/kustomization.yaml": "resources: [cm.yaml]\ntransformers: [patch.yaml]\n",
				"env/cm.yaml":            local,
				"env/patch.yaml":         "apiVersion: builtin\nkind: PatchTransformer\nmetadata: {name: p}\npath: " + url + "\n",
			},
			file: "env/patch.yaml", field: "document 1.path",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			root := t.TempDir()
			for name, content := range tt.files {
				p := filepath.Join(root, filepath.FromSlash(name))
				g.Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
				g.Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
			}
			objs, err := Build(context.Background(), root, "env")
			var remote *RemoteError
			g.Expect(err).To(BeAssignableToTypeOf(&Error{}))
			g.Expect(errors.As(err, &remote)).To(BeTrue(), "%v (objects %v)", err, objs)
			g.Expect(remote.File).To(Equal(tt.file))
			g.Expect(remote.Field).To(Equal(tt.field))
			g.Expect(err.Error()).To(ContainSubstring("is remote"))
			g.Expect(requests.Load()).To(BeZero(), "the build fetched %s", url)
		})
	}
}

// TestLocalLookalikesBuild: values that only look like URLs, in fields
// that are no paths, still build.
func TestLocalLookalikesBuild(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(root, "env"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(root, "env", "kustomization.yaml"), []byte(
		"resources: [cm.yaml]\ncommonAnnotations: {docs: 'https://example.com/policies'}\n"+
			"configMapGenerator:\n- name: links\n  literals: [home=https://example.com]\n"), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(root, "env", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: local}\n"), 0o644)).To(Succeed())
	objs, err := Build(context.Background(), root, "env")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(2))
}

// TestBuildEndsWithItsContext: a build whose context has ended returns
// the context's error, naming the folder.
func TestBuildEndsWithItsContext(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Build(ctx, "testdata/repo", "env/dev")
	g.Expect(err).To(MatchError(context.Canceled))
}
