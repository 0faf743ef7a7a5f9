package cliapply

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/egress"
	"github.com/charter-dev/charter/internal/imagetest"
)

// TestRunImageExtractors runs `charter apply --registry <loopback>` over
// the imageextractors suite of `charter test` (one fixture for both
// commands): custom extractors find the images of Tekton Task steps and
// Argo-style Workflow templates, an unsigned step and a Workflow image
// named by tag fail, and the Enforce failures block.
func TestRunImageExtractors(t *testing.T) {
	dir := filepath.Join("..", "clitest", "testdata", "imageextractors")
	reg, _, _ := imagetest.NewSignedRegistry(t, "example/app", imagetest.LoadKeyFile(t, filepath.Join(dir, "test-signing.key")))

	out, err := Run(context.Background(), Options{
		PolicyPaths:   []string{filepath.Join(dir, "policy.yaml")},
		ResourcePaths: []string{filepath.Join(dir, "resources.yaml")},
		Loaders:       loader.Loaders{ImageVerifier: imageverify.New(imageverify.Options{Mirror: reg.Host, Egress: egress.Open()})},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range out.Verdicts {
		got = append(got, line(v))
	}
	// A Task answers in both phases (verification, then required); a
	// Workflow only in the validating one (verifyDigest).
	want := []string{
		"Task/ci/build-signed signed-pipelines/signed-task-steps Enforce pass",
		"Task/ci/build-signed signed-pipelines/signed-task-steps Enforce pass",
		"Task/ci/build-unsigned signed-pipelines/signed-task-steps Enforce fail",
		"Task/ci/build-unsigned signed-pipelines/signed-task-steps Enforce fail",
		"Workflow/ci/release-pinned signed-pipelines/pinned-workflow-images Enforce pass",
		"Workflow/ci/release-by-tag signed-pipelines/pinned-workflow-images Enforce fail",
	}
	if !slices.Equal(got, want) {
		t.Errorf("verdicts\n got %q\nwant %q", got, want)
	}
	if !out.Blocked {
		t.Error("Enforce failures did not block")
	}
}
