package clitest

import (
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
)

// ReadValuesFile reads a values file (kind Values, or Value) for `charter
// apply --values-file`, checked as `charter test` checks one.
func ReadValuesFile(path string) (*ValuesSpec, error) {
	v, err := decodeValuesFile(path)
	if err != nil {
		return nil, err
	}
	return v.(*ValuesSpec), nil
}

// ReadUserInfoFile reads a `kind: UserInfo` file for `charter apply
// --userinfo`.
func ReadUserInfoFile(path string) (*UserInfo, error) {
	v, err := decodeUserInfoFile(path)
	if err != nil {
		return nil, err
	}
	return v.(*UserInfo), nil
}

// NewValues answers the engine's Values hook from values specs, later specs
// winning, as a suite's values do.
func NewValues(specs ...*ValuesSpec) engine.Values { return newSuiteValues(specs...) }

// NewNamespaceLabels serves the namespace labels that values specs give
// (their namespaceSelector and namespaces lists).
func NewNamespaceLabels(specs ...*ValuesSpec) loader.NamespaceLabelsLoader {
	return newNamespaceLabels(specs...)
}
