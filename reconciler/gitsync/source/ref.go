package source

import (
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-git/v5/plumbing"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// Ref is the normalised ref of a PolicyRepository: exactly one of Commit,
// SemVer, Tag and Branch decides what is fetched, in that order of
// precedence. Branch may accompany Commit, which then must be on it.
type Ref struct {
	Branch string
	Tag    string
	SemVer string
	Commit string
}

// RefFrom normalises the API's ref, keeping only what precedence lets
// through: commit > semver > tag > branch.
func RefFrom(r *gitopsv1alpha1.GitRef) Ref {
	if r == nil {
		return Ref{}
	}
	switch {
	case r.Commit != "":
		return Ref{Commit: r.Commit, Branch: r.Branch}
	case r.SemVer != "":
		return Ref{SemVer: r.SemVer}
	case r.Tag != "":
		return Ref{Tag: r.Tag}
	default:
		return Ref{Branch: r.Branch}
	}
}

// String describes the ref for messages.
func (r Ref) String() string {
	switch {
	case r.Commit != "" && r.Branch != "":
		return fmt.Sprintf("commit %s on branch %q", r.Commit, r.Branch)
	case r.Commit != "":
		return "commit " + r.Commit
	case r.SemVer != "":
		return fmt.Sprintf("semver %q", r.SemVer)
	case r.Tag != "":
		return fmt.Sprintf("tag %q", r.Tag)
	case r.Branch != "":
		return fmt.Sprintf("branch %q", r.Branch)
	default:
		return "the default branch"
	}
}

// Revision is a resolved ref: the name it was reached through (branch or
// tag, empty for a bare commit) and the commit.
type Revision struct {
	// Name is the branch or tag name, e.g. "main" or "v1.2.0".
	Name string
	// Reference is the full Git reference to clone, e.g. refs/heads/main;
	// empty for a bare commit.
	Reference plumbing.ReferenceName
	// Commit is the full commit hash.
	Commit string
	// pinned is true when Commit came from spec.ref.commit rather than
	// from the tip of Reference.
	pinned bool
}

// String formats the revision as Flux does: "<name>@sha1:<hash>", or
// "sha1:<hash>" without a name.
func (r Revision) String() string {
	if r.Name == "" {
		return "sha1:" + r.Commit
	}
	return r.Name + "@sha1:" + r.Commit
}

// resolve finds the ref among the remote's advertised references.
func resolve(ref Ref, refs []*plumbing.Reference) (Revision, error) {
	hashes := make(map[plumbing.ReferenceName]string, len(refs))
	var head *plumbing.Reference
	for _, r := range refs {
		switch r.Type() {
		case plumbing.HashReference:
			hashes[r.Name()] = r.Hash().String()
		case plumbing.SymbolicReference:
			if r.Name() == plumbing.HEAD {
				head = r
			}
		}
	}
	// An annotated tag is advertised twice: the tag object, and peeled
	// ("^{}") the commit it points at, which is what is checked out.
	commitOf := func(name plumbing.ReferenceName) (string, bool) {
		if h, ok := hashes[plumbing.ReferenceName(string(name)+"^{}")]; ok {
			return h, true
		}
		h, ok := hashes[name]
		return h, ok
	}

	switch {
	case ref.Commit != "":
		rev := Revision{Commit: ref.Commit, pinned: true}
		if ref.Branch != "" {
			rev.Name = ref.Branch
			rev.Reference = plumbing.NewBranchReferenceName(ref.Branch)
			if _, ok := hashes[rev.Reference]; !ok {
				return Revision{}, fmt.Errorf("branch %q not found", ref.Branch)
			}
		}
		return rev, nil
	case ref.SemVer != "":
		return resolveSemVer(ref.SemVer, hashes, commitOf)
	case ref.Tag != "":
		name := plumbing.NewTagReferenceName(ref.Tag)
		h, ok := commitOf(name)
		if !ok {
			return Revision{}, fmt.Errorf("tag %q not found", ref.Tag)
		}
		return Revision{Name: ref.Tag, Reference: name, Commit: h}, nil
	case ref.Branch != "":
		name := plumbing.NewBranchReferenceName(ref.Branch)
		h, ok := hashes[name]
		if !ok {
			return Revision{}, fmt.Errorf("branch %q not found", ref.Branch)
		}
		return Revision{Name: ref.Branch, Reference: name, Commit: h}, nil
	default:
		return resolveDefaultBranch(head, hashes)
	}
}

func resolveDefaultBranch(head *plumbing.Reference, hashes map[plumbing.ReferenceName]string) (Revision, error) {
	if head != nil && head.Target().IsBranch() {
		if h, ok := hashes[head.Target()]; ok {
			return Revision{Name: head.Target().Short(), Reference: head.Target(), Commit: h}, nil
		}
	}
	// Servers that do not advertise HEAD's target: pick the branch HEAD's
	// commit is on, preferring main and master.
	headHash, ok := hashes[plumbing.HEAD]
	if !ok {
		return Revision{}, fmt.Errorf("the remote advertises no HEAD; set spec.ref")
	}
	var candidates []string
	for name, h := range hashes {
		if name.IsBranch() && h == headHash {
			candidates = append(candidates, name.Short())
		}
	}
	sort.Slice(candidates, func(i, j int) bool {
		return branchRank(candidates[i]) < branchRank(candidates[j]) ||
			branchRank(candidates[i]) == branchRank(candidates[j]) && candidates[i] < candidates[j]
	})
	if len(candidates) == 0 {
		return Revision{}, fmt.Errorf("no branch points at the remote's HEAD; set spec.ref.branch")
	}
	return Revision{Name: candidates[0], Reference: plumbing.NewBranchReferenceName(candidates[0]), Commit: headHash}, nil
}

func branchRank(name string) int {
	switch name {
	case "main":
		return 0
	case "master":
		return 1
	}
	return 2
}

func resolveSemVer(constraint string, hashes map[plumbing.ReferenceName]string, commitOf func(plumbing.ReferenceName) (string, bool)) (Revision, error) {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return Revision{}, fmt.Errorf("semver %q: %w", constraint, err)
	}
	var best *semver.Version
	var bestTag plumbing.ReferenceName
	for name := range hashes {
		if !name.IsTag() || strings.HasSuffix(string(name), "^{}") {
			continue
		}
		v, err := semver.NewVersion(name.Short())
		if err != nil || !c.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) || v.Equal(best) && name.Short() < bestTag.Short() {
			best, bestTag = v, name
		}
	}
	if best == nil {
		return Revision{}, fmt.Errorf("no tag matches semver %q", constraint)
	}
	h, _ := commitOf(bestTag)
	return Revision{Name: bestTag.Short(), Reference: bestTag, Commit: h}, nil
}
