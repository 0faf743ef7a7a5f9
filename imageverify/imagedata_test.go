package imageverify_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/imagetest"
)

// pushLabelled pushes an image whose config carries the label team=<team>
// to <host>/<repo>:<tag> and returns its digest.
func pushLabelled(t *testing.T, reg *imagetest.Registry, repo, tag, team string) string {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, v1.Config{Labels: map[string]string{"team": team}}); err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(reg.Host + "/" + repo + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// pushIndex pushes an index holding a linux/arm64 image and a linux/amd64
// image labelled team=<team>.
func pushIndex(t *testing.T, reg *imagetest.Registry, repo, tag, team string) {
	t.Helper()
	amd, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	if amd, err = mutate.Config(amd, v1.Config{Labels: map[string]string{"team": team}}); err != nil {
		t.Fatal(err)
	}
	arm, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	ref, err := name.NewTag(reg.Host + "/" + repo + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
}

func labelOf(t *testing.T, data map[string]any, field string) any {
	t.Helper()
	cfg, _ := data[field].(map[string]any)
	inner, _ := cfg["config"].(map[string]any)
	labels, _ := inner["Labels"].(map[string]any)
	return labels["team"]
}

// TestImageData: the registry's data of an image, named as the policy
// wrote it, cached by digest (a tag costs one HEAD, a digest nothing, a
// moved tag the new image's data).
func TestImageData(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	digest := pushLabelled(t, reg, "app", "v1", "shop")
	pushIndex(t, reg, "multi", "v1", "platform")
	ct := &countingTransport{}
	v := imageverify.New(imageverify.Options{Transport: ct, Cache: imageverify.NewCache(10, time.Hour, nil)})
	ctx := context.Background()

	image := reg.Host + "/app:v1"
	data, err := v.ImageData(ctx, image, loader.ImageCredentials{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"image": image, "resolvedImage": reg.Host + "/app@" + digest, "registry": reg.Host, "repository": "app",
		"identifier": "v1", "tag": "v1", "digest": digest, "imageIndex": nil}
	for k, w := range want {
		if data[k] != w {
			t.Errorf("%s = %v, want %v", k, data[k], w)
		}
	}
	if labelOf(t, data, "config") != "shop" || labelOf(t, data, "configData") != "shop" {
		t.Errorf("config %v, configData %v: want the label team=shop in both", data["config"], data["configData"])
	}
	if m, _ := data["manifest"].(map[string]any); m["config"] == nil {
		t.Errorf("manifest %v, want an image manifest", data["manifest"])
	}
	ct.reset()

	// The answer is a copy: a caller changing it changes no later answer.
	data["config"].(map[string]any)["config"] = "changed"
	again, err := v.ImageData(ctx, image, loader.ImageCredentials{})
	if err != nil || labelOf(t, again, "config") != "shop" {
		t.Fatalf("second answer %v, %v", again["config"], err)
	}
	if got := withoutPings(ct.reset()); len(got) != 1 || got[0] != "HEAD /v2/app/manifests/v1" {
		t.Errorf("a cached tag made requests %v, want one HEAD of its manifest", got)
	}
	if d, err := v.ImageData(ctx, reg.Host+"/app@"+digest, loader.ImageCredentials{}); err != nil || d["identifier"] != digest || d["tag"] != "" {
		t.Errorf("by digest: identifier %v, tag %v, %v", d["identifier"], d["tag"], err)
	}
	if got := ct.reset(); len(got) != 0 {
		t.Errorf("a cached digest made requests %v", got)
	}

	pushLabelled(t, reg, "app", "v1", "moved")
	if d, err := v.ImageData(ctx, image, loader.ImageCredentials{}); err != nil || labelOf(t, d, "config") != "moved" {
		t.Errorf("after the tag moved: label %v, %v; want the new image's", labelOf(t, d, "config"), err)
	}

	idx, err := v.ImageData(ctx, reg.Host+"/multi:v1", loader.ImageCredentials{})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := idx["imageIndex"].(map[string]any); len(fmt.Sprint(m["manifests"])) == 0 || labelOf(t, idx, "config") != "platform" {
		t.Errorf("index: imageIndex %v, config label %v; want the index and the linux/amd64 image's config", idx["imageIndex"], labelOf(t, idx, "config"))
	}

	if _, err := v.ImageData(ctx, reg.Host+"/app:nope", loader.ImageCredentials{}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing tag: %v, want not found", err)
	}
	if _, err := v.ImageData(ctx, "UPPER/case:x", loader.ImageCredentials{}); err == nil || !strings.Contains(err.Error(), `invalid image reference "UPPER/case:x"`) {
		t.Errorf("bad reference: %v", err)
	}
}

// withoutPings leaves out the registry's API version checks.
func withoutPings(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p != "GET /v2/" {
			out = append(out, p)
		}
	}
	return out
}

// secretsAsked records the pull secrets a verifier reads.
type secretsAsked struct {
	mu    sync.Mutex
	asked []string
}

func (s *secretsAsked) Secret(_ context.Context, namespace, name string) (*corev1.Secret, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, namespace+"/"+name)
	return &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths": {}}`)}}, nil
}

// TestImageDataInPolicies: image.GetMetadata (ValidatingPolicy),
// getImageData (ImageValidatingPolicy) and imageRegistry context entries
// (ClusterPolicy) read the registry through the verifier, with the
// credentials of the entry or policy.
func TestImageDataInPolicies(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	pushLabelled(t, reg, "app", "shop", "shop")
	pushLabelled(t, reg, "app", "other", "other")
	secrets := &secretsAsked{}
	v := imageverify.New(imageverify.Options{Egress: imagetest.LoopbackEgress(), Secrets: secrets, Cache: imageverify.NewCache(10, time.Hour, nil)})

	var vpol policiesv1.ValidatingPolicy
	mustYAML(t, `apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: team-images}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}
  validations:
  - expression: "object.spec.containers.all(c, image.GetMetadata(c.image).config.config.Labels.team == object.metadata.namespace)"
    message: an image of another team
`, &vpol)
	var ivpol policiesv1.ImageValidatingPolicy
	mustYAML(t, fmt.Sprintf(`apiVersion: policies.kyverno.io/v1
kind: ImageValidatingPolicy
metadata: {name: team-images-iv}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}
  matchImageReferences: [{glob: %q}]
  validationConfigurations: {verifyDigest: false, mutateDigest: false, required: false}
  credentials: {secrets: [ivpol-cred]}
  attestors:
  - name: a
    cosign: {key: {data: "unused"}, ctlog: {insecureIgnoreTlog: true, insecureIgnoreSCT: true}}
  validations:
  - expression: "images.containers.all(i, getImageData(i).config.config.Labels.team == object.metadata.namespace)"
    message: an image of another team
`, reg.Host+"/*"), &ivpol)
	cpol := policyDoc(t, `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: team-images-cp}
spec:
  validationFailureAction: Enforce
  rules:
  - name: team
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: imageData
      imageRegistry:
        reference: "{{ request.object.spec.containers[0].image }}"
        imageRegistryCredentials: {secrets: [cp-cred]}
    validate:
      message: an image of another team
      deny:
        conditions:
          any:
          - {key: "{{ imageData.configData.config.Labels.team }}", operator: NotEquals, value: "{{ request.object.metadata.namespace }}"}
`)
	for _, p := range []kyvernov1.PolicyInterface{&vpol, &ivpol, cpol} {
		set, err := engine.Compile([]kyvernov1.PolicyInterface{p})
		if err != nil {
			t.Fatalf("%s: %v", p.GetName(), err)
		}
		for _, tc := range []struct {
			image  string
			status engine.RuleStatus
		}{{reg.Host + "/app:shop", engine.StatusPass}, {reg.Host + "/app:other", engine.StatusFail}} {
			obj := pod(tc.image)
			obj["metadata"].(map[string]any)["namespace"] = "shop"
			resp := set.Validate(context.Background(), &engine.Request{Operation: kyvernov1.Create, Object: obj},
				engine.WithLoaders(loader.Loaders{Images: v, ImageVerifier: v}))
			if rr := onlyRule(t, resp.Policies); rr.Status != tc.status {
				t.Errorf("%s, %s: %s %q, want %s", p.GetName(), tc.image, rr.Status, rr.Message, tc.status)
			}
		}
	}
	// Each entry's or policy's own secrets, in the resource's namespace.
	got := strings.Join(secrets.asked, " ")
	for _, want := range []string{"shop/ivpol-cred", "shop/cp-cred"} {
		if !strings.Contains(got, want) {
			t.Errorf("secrets read %q, want %s among them", got, want)
		}
	}
}

func mustYAML(t *testing.T, doc string, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
}
