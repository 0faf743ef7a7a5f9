#!/usr/bin/env bash
# Installs Debian's Docker (docker.io) and starts dockerd with the runtime
# runc-nosysresource as its default, so that --privileged containers (kind
# nodes) start on a machine whose capability bounding set lacks
# CAP_SYS_RESOURCE. Idempotent: run it again after a reboot to restart
# dockerd. Needs root and Debian's package archive.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RUNTIME=/usr/local/libexec/charter/runc-nosysresource
LOG=${DOCKERD_LOG:-/var/log/charter-dockerd.log}
# dockerd listens on its own socket, not the standard one, so that only
# what names it (make e2e-kind, make kind-node-image: DOCKER_HOST) uses it;
# e2e runs that choose kind whenever Docker answers keep the local provider.
SOCKET=${CHARTER_DOCKER_SOCKET:-/run/charter-docker/docker.sock}
export DOCKER_HOST=unix://$SOCKET

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v jq >/dev/null || need+=(jq)
command -v debootstrap >/dev/null || need+=(debootstrap)
if ((${#need[@]})); then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

install -D -m 0755 "$here/runc-nosysresource" "$RUNTIME"

# Does this machine need the runtime? CAP_SYS_RESOURCE is capability 24.
bnd=$(awk '/^CapBnd/{print $2}' /proc/self/status)
if (((0x$bnd >> 24) & 1)); then
	echo "CAP_SYS_RESOURCE is in the bounding set: runc-nosysresource is registered but not needed"
fi

mkdir -p /etc/docker
cat >/etc/docker/daemon.json <<JSON
{
  "runtimes": {"nosysresource": {"path": "$RUNTIME"}},
  "default-runtime": "nosysresource"
}
JSON

if docker info >/dev/null 2>&1; then
	if docker info --format '{{.DefaultRuntime}}' | grep -qx nosysresource; then
		echo "dockerd already runs with the nosysresource runtime"
		exit 0
	fi
	echo "dockerd at $DOCKER_HOST runs without the nosysresource runtime: stop it and run $0 again" >&2
	exit 1
fi
# No init system runs services here: start dockerd in the background.
mkdir -p "$(dirname "$SOCKET")"
nohup dockerd --host "$DOCKER_HOST" --pidfile /run/charter-docker/dockerd.pid >"$LOG" 2>&1 &
for _ in $(seq 60); do
	docker info >/dev/null 2>&1 && break
	sleep 1
done
docker info --format 'dockerd {{.ServerVersion}}: storage {{.Driver}}, cgroup {{.CgroupDriver}} v{{.CgroupVersion}}, default runtime {{.DefaultRuntime}}'
echo "DOCKER_HOST=$DOCKER_HOST"
