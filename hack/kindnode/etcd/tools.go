//go:build tools

// Package tools pins the etcd server of the offline kind node image at the
// version kubeadm deploys for the Kubernetes release of hack/kindnode/tools
// (its DefaultEtcdVersion), so that the image's tag names what it holds.
package tools

import _ "go.etcd.io/etcd/server/v3"
