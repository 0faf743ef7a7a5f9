package oci

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// DefaultTag is the tag an oci:// repository without a ref follows, as
// Flux's OCIRepository.
const DefaultTag = "latest"

// Ref is the normalised ref of an oci:// repository: exactly one of
// Digest, SemVer and Tag, in that order of precedence.
type Ref struct {
	Tag    string
	SemVer string
	Digest string
}

// RefFrom normalises the API's ref: digest > semver > tag, and the tag
// "latest" when none is given.
func RefFrom(r *gitopsv1alpha1.GitRef) Ref {
	switch {
	case r == nil:
		return Ref{Tag: DefaultTag}
	case r.Digest != "":
		return Ref{Digest: r.Digest}
	case r.SemVer != "":
		return Ref{SemVer: r.SemVer}
	case r.Tag != "":
		return Ref{Tag: r.Tag}
	}
	return Ref{Tag: DefaultTag}
}

// String describes the ref for messages.
func (r Ref) String() string {
	switch {
	case r.Digest != "":
		return "digest " + r.Digest
	case r.SemVer != "":
		return fmt.Sprintf("semver %q", r.SemVer)
	}
	return fmt.Sprintf("tag %q", r.Tag)
}

// Revision is a resolved ref: the tag it was reached through (empty for a
// pinned digest) and the manifest digest.
type Revision struct {
	Tag string
	// Digest is "sha256:<hex>".
	Digest string
}

// String formats the revision as Flux does: "<tag>@sha256:<hex>", or
// "sha256:<hex>" without a tag.
func (r Revision) String() string {
	if r.Tag == "" {
		return r.Digest
	}
	return r.Tag + "@" + r.Digest
}

// ID names the revision in the cache: the digest's hex.
func (r Revision) ID() string {
	_, hex, _ := strings.Cut(r.Digest, ":")
	return hex
}

// highestMatching returns the highest tag that parses as a semantic
// version in constraint; among equal versions ("v1.0.0", "1.0.0") the
// lexically first.
func highestMatching(constraint string, tags []string) (string, error) {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return "", fmt.Errorf("semver %q: %w", constraint, err)
	}
	var best *semver.Version
	var bestTag string
	for _, t := range tags {
		v, err := semver.NewVersion(t)
		if err != nil || !c.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) || v.Equal(best) && t < bestTag {
			best, bestTag = v, t
		}
	}
	if best == nil {
		return "", fmt.Errorf("no tag matches semver %q", constraint)
	}
	return bestTag, nil
}
