#!/usr/bin/env bash
# Builds charter's image IMAGE (default charter:dev) FROM scratch without a
# registry: a static binary built here, the machine's CA certificates and a
# non-root user (65532, "nonroot"). Usage: build.sh [IMAGE] [VERSION]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
IMAGE=${1:-charter:dev}
VERSION=${2:-dev}
CA=${CA_CERTIFICATES:-/etc/ssl/certs/ca-certificates.crt}
[[ -s $CA ]] || { echo "no CA certificates at $CA (install Debian's ca-certificates or set CA_CERTIFICATES)" >&2; exit 1; }

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
(cd "$root" && CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X github.com/charter-dev/charter/internal/version.Version=$VERSION" \
	-o "$ctx/charter" ./cmd/charter)
cp "$CA" "$ctx/ca-certificates.crt"
cp "$here/passwd" "$here/group" "$ctx/"
cp "$here/Dockerfile" "$ctx/Dockerfile"
mkdir -m 1777 "$ctx/tmp"
tar -C "$ctx" --numeric-owner --owner=0 --group=0 -cf "$ctx/tmp.tar" tmp
# The classic builder: BuildKit would fetch its Dockerfile frontend.
DOCKER_BUILDKIT=0 docker build --label "org.opencontainers.image.version=$VERSION" -t "$IMAGE" "$ctx"
