#!/usr/bin/env bash
# Builds charter's offline kind node image, IMAGE (default
# charter/kind-node:<Kubernetes version>), with no registry: the Debian root
# filesystem from rootfs.sh, the binaries from binaries.sh, the
# control-plane images kubeadm runs built FROM scratch here and preloaded
# into the node's containerd. Kept when IMAGE exists (FORCE=1 rebuilds).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
K8S_VERSION=$("$here/k8s-version")
[[ -n $K8S_VERSION ]] || exit 1
IMAGE=${1:-charter/kind-node:$K8S_VERSION}
SUITE=${SUITE:-bookworm}
CACHE=${CHARTER_CACHE:-$HOME/.cache/charter}/kindnode
BIN=$CACHE/$K8S_VERSION/bin
BASE=charter/kind-node-base:$SUITE
export DOCKER_BUILDKIT=0 # the classic builder pulls nothing for FROM scratch or a local image

if [[ -z ${FORCE:-} ]] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
	echo "have $IMAGE (FORCE=1 rebuilds it)"
	exit 0
fi
started=$SECONDS
OUT=$BIN "$here/binaries.sh"
OUT=$CACHE/rootfs-$SUITE.tar SUITE=$SUITE "$here/rootfs.sh"
if [[ -n ${FORCE:-} ]] || ! docker image inspect "$BASE" >/dev/null 2>&1; then
	docker import --change 'ENV container=docker' "$CACHE/rootfs-$SUITE.tar" "$BASE"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"; docker rm -f "charter-kind-node-build-$$" >/dev/null 2>&1 || true' EXIT

# The images kubeadm deploys, named as `kubeadm config images list` names
# them, so that nothing is pulled.
images=()
while read -r ref; do
	name=${ref##*/}; name=${name%%:*}
	ctx=$work/images/$name
	mkdir -p "$ctx"
	case $name in
	kube-apiserver | kube-controller-manager | kube-scheduler | etcd)
		cp "$BIN/$name" "$ctx/"
		printf 'FROM scratch\nENV PATH=/usr/local/bin\nCOPY %s /usr/local/bin/%s\n' "$name" "$name" >"$ctx/Dockerfile"
		;;
	coredns | pause)
		cp "$BIN/$name" "$ctx/"
		printf 'FROM scratch\nCOPY %s /%s\nENTRYPOINT ["/%s"]\n' "$name" "$name" "$name" >"$ctx/Dockerfile"
		;;
	kube-proxy) # programs iptables: it needs the node's iptables and libraries
		cp "$BIN/$name" "$ctx/"
		printf 'FROM %s\nCOPY kube-proxy /usr/local/bin/kube-proxy\n' "$BASE" >"$ctx/Dockerfile"
		;;
	*)
		echo "kubeadm wants $ref, which this script does not build" >&2
		exit 1
		;;
	esac
	docker build -q -t "$ref" "$ctx" >/dev/null
	echo "built $ref"
	images+=("$ref")
done < <("$BIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION")
docker save -o "$work/images.tar" "${images[@]}"

# The node without its images.
ctx=$work/node
mkdir -p "$ctx/bin" "$ctx/cni"
cp -r "$here/node/files" "$here/node/Dockerfile" "$ctx/"
cp "$BIN/kubelet" "$BIN/kubeadm" "$BIN/kubectl" "$ctx/bin/"
for plugin in "$BIN"/cni-*; do cp "$plugin" "$ctx/cni/${plugin##*/cni-}"; done
echo "$K8S_VERSION" >"$ctx/files/kind/version"
docker build -t "$IMAGE-noimages" --build-arg "BASE=$BASE" "$ctx"

# Preload: import the images into the node's containerd content store
# (unpacked on first use), then commit the node with them.
build=charter-kind-node-build-$$
docker run --name "$build" --privileged -v "$work/images.tar:/images.tar:ro" \
	--entrypoint /bin/bash "$IMAGE-noimages" -c '
set -e
containerd >/dev/null 2>&1 &
for _ in $(seq 60); do ctr version >/dev/null 2>&1 && break; sleep 1; done
ctr --namespace=k8s.io images import --no-unpack --digests /images.tar
ctr --namespace=k8s.io images ls -q
kill %1; wait || true'
docker commit \
	--change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' --change 'CMD []' \
	"$build" "$IMAGE" >/dev/null
docker rm "$build" >/dev/null
docker rmi "$IMAGE-noimages" >/dev/null
echo "built $IMAGE in $((SECONDS - started))s"
