#!/usr/bin/env bash
# Makes the Debian root filesystem of the offline kind node image with
# debootstrap, from Debian's package archive only, as a tarball in $OUT
# (default ~/.cache/charter/kindnode/rootfs-<suite>.tar). Kept when present.
set -euo pipefail
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
OUT=${OUT:-${CHARTER_CACHE:-$HOME/.cache/charter}/kindnode/rootfs-$SUITE.tar}
if [[ -s $OUT ]]; then echo "have $OUT"; exit 0; fi
mkdir -p "$(dirname "$OUT")"

# What a Kubernetes node needs: an init (systemd), a container runtime
# (containerd and runc), the networking tools kubelet, kube-proxy and the
# CNI plugins call (iptables, ip, conntrack, socat, ethtool), mount helpers
# and CA certificates.
packages=(
	systemd systemd-sysv dbus libseccomp2
	containerd runc
	iptables nftables ebtables iproute2 conntrack socat ethtool kmod
	ca-certificates mount util-linux procps e2fsprogs
)
root=$(mktemp -d /var/tmp/kindnode-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "$(date -u +%T) debootstrap $SUITE into $root"
debootstrap --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" "$SUITE" "$root" "$MIRROR"
# Package caches and lists are not needed in the image.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
tar --numeric-owner -C "$root" -cf "$OUT.tmp" .
mv "$OUT.tmp" "$OUT"
echo "$(date -u +%T) wrote $OUT ($(du -h "$OUT" | cut -f1))"
