#!/usr/bin/env bash
# Prepares this machine for vioconform: Debian packages, and a running libvirt daemon.
# Idempotent: a second run only checks. Called by tox before the suite or the tests run.
#
#   scripts/setup-host.sh            packages + libvirt daemons
#   scripts/setup-host.sh --vcsim    also govmomi's vcsim (for the vSphere backend's tests)
set -euo pipefail

log() { printf 'vioconform setup: %s\n' "$*" >&2; }

# Packages the suite runs on. The guest image is built from the same packages
# (kernel, busybox, dropbear, fio), so nothing comes from anywhere but Debian.
PACKAGES=(
  qemu-system-x86 qemu-utils
  libvirt-daemon-system libvirt-clients libvirt-dev pkg-config gcc python3-dev
  busybox-static dropbear-bin fio cpio zstd
)

need_root() {
  if [ "$(id -u)" != 0 ]; then
    log "must run as root to install packages and start libvirtd (missing: $*)"
    exit 2
  fi
}

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  need_root "${missing[*]}"
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# /dev/kvm: without udev (containers, minimal VMs) it stays root-only 0600. libvirt then
# finds its cached QEMU capabilities invalid on every domain start ("KVM was enabled when
# probing, but it is not available now") and re-probes QEMU for ~45 s each time. Give it
# the owner Debian's udev rule gives it (root:kvm 0660). Whether KVM really boots a guest
# is decided later by a real boot, not by this.
if [ -c /dev/kvm ] && [ "$(stat -c %a /dev/kvm)" = 600 ] && getent group kvm >/dev/null; then
  need_root /dev/kvm
  log "giving /dev/kvm Debian's udev ownership (root:kvm 0660)"
  chgrp kvm /dev/kvm && chmod 660 /dev/kvm
fi

# libvirt: use a daemon that is already there; otherwise start the system one.
# These machines have no systemd, so start the daemons directly. The system
# daemon also needs virtlogd for the guests' console and QEMU logs.
if [ -z "${VIOCONFORM_SKIP_LIBVIRTD:-}" ]; then
  if [ ! -S /run/libvirt/virtlogd-sock ]; then
    need_root virtlogd
    log "starting virtlogd"
    virtlogd -d
  fi
  if [ ! -S /run/libvirt/libvirt-sock ]; then
    need_root libvirtd
    log "starting libvirtd"
    libvirtd -d
  fi
  for _ in $(seq 1 50); do
    [ -S /run/libvirt/libvirt-sock ] && break
    sleep 0.2
  done
  [ -S /run/libvirt/libvirt-sock ] || { log "libvirtd did not create /run/libvirt/libvirt-sock"; exit 1; }
fi

if [ "${1:-}" = "--vcsim" ]; then
  "$(dirname "$0")/setup-vcsim.sh"
fi
