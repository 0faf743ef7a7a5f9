package source

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// VerificationError says why a commit's signature was refused.
type VerificationError struct {
	Commit string
	Reason string
}

func (e *VerificationError) Error() string {
	return fmt.Sprintf("commit %s: %s", e.Commit, e.Reason)
}

// VerifyHead checks that the commit checked out in dir carries an OpenPGP
// signature made by one of the armored public keys in keyRings (the values
// of the verification Secret). It returns the signer's key ID.
func VerifyHead(dir, commit string, keyRings map[string][]byte) (string, error) {
	if len(keyRings) == 0 {
		return "", &VerificationError{Commit: commit, Reason: "the verification secret holds no public keys"}
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return "", err
	}
	c, err := repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return "", fmt.Errorf("commit %s: %w", commit, err)
	}
	if strings.TrimSpace(c.PGPSignature) == "" {
		return "", &VerificationError{Commit: commit, Reason: "the commit is not signed"}
	}
	names := slices.Sorted(maps.Keys(keyRings))
	var errs []error
	for _, name := range names {
		entity, err := c.Verify(string(keyRings[name]))
		if err == nil {
			return entity.PrimaryKey.KeyIdString(), nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
	}
	return "", &VerificationError{Commit: commit, Reason: "no key in the verification secret signed it (" + strings.ReplaceAll(errors.Join(errs...).Error(), "\n", "; ") + ")"}
}
