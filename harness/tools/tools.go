//go:build tools

// Package tools pins the control plane commands that `make controlplane`
// builds into bin/: the etcd server, kube-apiserver and kube-controller-manager.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
