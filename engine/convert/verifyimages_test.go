package convert

import (
	"slices"
	"strings"
	"testing"

	"github.com/gobwas/glob"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/wildcard"
)

// TestImageReferencesMatchAsKyvernoDoes: a verifyImages reference becomes
// globs over the image as written that select the images Kyverno selects
// by matching the reference against the image normalised
// (registry/path:tag, or registry/path@digest without the tag), and the
// pinned form (image@digest) an ImageValidatingPolicy's admission gives
// each of them; beyond those, a reference that names no digest may only
// also select an image written with a digest, which Kyverno lets through
// unverified. A reference for which no such globs exist is refused with
// its reason.
func TestImageReferencesMatchAsKyvernoDoes(t *testing.T) {
	const digest = "sha256:4bf7c8b16a9b3d0e36a9c0ac3b9a2a5ac12b7fba8c1a4b7e8e9b4a0b51d1c3f2"
	images := []struct{ written, normalised string }{
		{"ghcr.io/example/app:1.0", "ghcr.io/example/app:1.0"},
		{"ghcr.io/example/app:v1", "ghcr.io/example/app:v1"},
		{"ghcr.io/example/app:latest", "ghcr.io/example/app:latest"},
		{"ghcr.io/example/app", "ghcr.io/example/app:latest"},
		{"ghcr.io/example/app:1.0@" + digest, "ghcr.io/example/app@" + digest},
		{"ghcr.io/example/app@" + digest, "ghcr.io/example/app@" + digest},
		{"ghcr.io/example/apple:2", "ghcr.io/example/apple:2"},
		{"ghcr.io/example/team/app:1.0", "ghcr.io/example/team/app:1.0"},
		{"ghcr.io/other/app:1.0", "ghcr.io/other/app:1.0"},
		{"localhost:5000/app:dev", "localhost:5000/app:dev"},
		{"nginx:1.27", "docker.io/nginx:1.27"},
	}
	cases := []struct {
		ref     string
		refused string
	}{
		{ref: "*"},
		{ref: "ghcr.io/example/*"},
		{ref: "ghcr.io/example/*:*"},
		{ref: "ghcr.io/example/app*"},
		{ref: "ghcr.io/*/app*"},
		{ref: "localhost:5000/*"},
		{ref: "localhost:5000/app:*"},
		{ref: "ghcr.io/example/app:*"},
		{ref: "ghcr.io/example/app:v?"},
		{ref: "ghcr.io/example/app:1.0"},
		{ref: "ghcr.io/example/app:latest"},
		{ref: "ghcr.io/example/app@" + digest},
		{ref: "docker.io/*", refused: "Docker Hub"},
		{ref: "nginx*", refused: "names no registry"},
		{ref: "ghcr.io/example/app?", refused: "names no tag or digest"},
		{ref: "ghcr.io/example/app", refused: "names no tag or digest"},
		{ref: "ghcr.io/example/*/app:1.0", refused: "wildcard in the repository"},
		{ref: "ghcr.io/example/app:1.0@" + digest, refused: "matches no image"},
		{ref: "*.io/example/*", refused: "wildcard registry"},
		{ref: "ghcr.io/example/[ab]pp*", refused: "glob character"},
	}
	for _, c := range cases {
		t.Run(c.ref, func(t *testing.T) {
			refs, err := imageReferences([]string{c.ref})
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("want refused (%s), got %v, %v", c.refused, refs, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			selects := func(img string) bool {
				return slices.ContainsFunc(refs, func(r policiesv1.MatchImageReference) bool { return glob.MustCompile(r.Glob).Match(img) })
			}
			for _, img := range images {
				want := wildcard.Match(c.ref, img.normalised)
				got := selects(img.written)
				stricter := !want && got && strings.Contains(img.written, "@") && !strings.Contains(c.ref, "@")
				if got != want && !stricter {
					t.Errorf("%s: globs %v select it: %v, Kyverno: %v", img.written, refs, got, want)
				}
				if pinned := img.written + "@" + digest; want && !strings.Contains(img.written, "@") && !selects(pinned) {
					t.Errorf("%s: globs %v miss its pinned form %s", img.written, refs, pinned)
				}
			}
		})
	}
}
