package engine

import (
	"testing"

	"github.com/charter-dev/charter/engine/internal/testcases"
)

// eachCase runs run as a subtest, named after the file, for every
// testdata/<dir>/*.yaml file decoded strictly into a T (testcases.Each).
func eachCase[T any](t *testing.T, dir string, run func(t *testing.T, tc *T)) {
	t.Helper()
	testcases.Each(t, dir, run)
}
