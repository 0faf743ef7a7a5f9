#!/usr/bin/env bash
# Builds, from Go modules only, every binary of the offline kind node image
# into $OUT (default ~/.cache/charter/kindnode/<k8s version>/bin): the
# Kubernetes commands pinned by hack/kindnode/tools, CoreDNS, the CNI plugins
# and the pause process. A binary already there is not built again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
K8S_VERSION=${K8S_VERSION:-$("$here/k8s-version")}
[[ -n $K8S_VERSION ]] || exit 1
# CoreDNS and etcd at the versions kubeadm deploys (kubeadm config images list).
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.2}
CNI_PLUGINS_VERSION=${CNI_PLUGINS_VERSION:-v1.9.0}
OUT=${OUT:-${CHARTER_CACHE:-$HOME/.cache/charter}/kindnode/$K8S_VERSION/bin}
mkdir -p "$OUT"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
ver=k8s.io/component-base/version
cgv=k8s.io/client-go/pkg/version
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for p in $ver $cgv; do
	ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=$date"
done

build() { # build NAME PACKAGE [dir]
	local name=$1 pkg=$2 dir=${3:-$here/tools}
	if [[ -x $OUT/$name ]]; then echo "have $OUT/$name"; return; fi
	echo "$(date -u +%T) building $name ($pkg)"
	(cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$OUT/$name.tmp" "$pkg")
	mv "$OUT/$name.tmp" "$OUT/$name"
}

for cmd in kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
	build "$cmd" "k8s.io/kubernetes/cmd/$cmd"
done
build etcd go.etcd.io/etcd/server/v3 "$here/etcd"
build pause ./pause "$here"

# CoreDNS and the CNI plugins build from their own modules (go install
# keeps their go.mod); GOBIN cannot rename, so each goes through a folder.
install() { # install NAME MODULE-PATH@VERSION
	local name=$1 pkg=$2 tmp
	if [[ -x $OUT/$name ]]; then echo "have $OUT/$name"; return; fi
	echo "$(date -u +%T) installing $name ($pkg)"
	tmp=$(mktemp -d)
	GOBIN=$tmp go install -trimpath -ldflags "-s -w" "$pkg"
	mv "$tmp/$(basename "${pkg%@*}")" "$OUT/$name"
	rmdir "$tmp"
}
install coredns "github.com/coredns/coredns@$COREDNS_VERSION"
for plugin in main/bridge main/loopback ipam/host-local meta/portmap; do
	install "cni-${plugin#*/}" "github.com/containernetworking/plugins/plugins/$plugin@$CNI_PLUGINS_VERSION"
done
echo "$(date -u +%T) all binaries in $OUT"
