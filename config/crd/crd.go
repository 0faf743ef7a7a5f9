// Package crd embeds the CustomResourceDefinitions of the report APIs, so
// that `charter reports-server` serves them with the schema, printer
// columns and short names the CRDs give kube-apiserver.
package crd

import "embed"

// Reports holds bases/wgpolicyk8s.io_*.yaml and bases/openreports.io_*.yaml.
//
//go:embed bases/wgpolicyk8s.io_*.yaml bases/openreports.io_*.yaml
var Reports embed.FS
