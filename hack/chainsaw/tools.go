//go:build tools

// Package tools pins chainsaw, Kyverno's end-to-end test runner, which
// `make conformance-cluster` builds into bin/chainsaw. Its own module
// keeps chainsaw's dependencies out of charter's.
//
// chainsaw v0.2.12 (the newest the module proxy serves) does not build on
// Go 1.26: the testing deps it hands to testing.MainStart lack
// ModulePath. The Makefile builds it with `go build -overlay` adding
// overlay/testdeps_modulepath.go.txt to its pkg/runner/internal package.
package tools

import (
	_ "github.com/kyverno/chainsaw"
)
