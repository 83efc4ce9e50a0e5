#!/usr/bin/env bash
# Prepares this machine for vioconform: Debian packages, and a running libvirt daemon.
# Idempotent: a second run only checks. Called by tox (scripts/tox-prepare.sh) before the suite or the tests run.
#
#   scripts/setup-host.sh                  the suite's packages + libvirt daemons (tox -e suite)
#   scripts/setup-host.sh --tests          also what only the project's tests need (tox -e test)
#   scripts/setup-host.sh --tests --vcsim  also govmomi's vcsim (for the vSphere backend's tests)
#
# VIOCONFORM_SKIP_HOST_SETUP=1 skips all of it (a machine set up by hand, or one without apt);
# VIOCONFORM_SKIP_LIBVIRTD=1 skips only starting the libvirt daemons.
set -euo pipefail

log() { printf 'vioconform setup: %s\n' "$*" >&2; }

tests=0
vcsim=0
for arg in "$@"; do
  case $arg in
    --tests) tests=1 ;;
    --vcsim) vcsim=1 ;;
    *) log "unknown argument '$arg' (known: --tests, --vcsim)"; exit 2 ;;
  esac
done

if [ -n "${VIOCONFORM_SKIP_HOST_SETUP:-}" ]; then
  log "VIOCONFORM_SKIP_HOST_SETUP is set: no packages installed, no daemon started"
  exit 0
fi

# What the suite runs on (tox -e suite). The embedded guest image is built from Debian packages
# (images/build.py: the kernel package, busybox, dropbear, dmsetup, programs of e2fsprogs and
# util-linux, packed with cpio and zstd) and the static fio pushed into every guest from Debian's fio
# source package (images/fio_static.py: dpkg-dev unpacks it, build-essential compiles it,
# libaio-dev and zlib1g-dev give the static libraries it links in); Debian's own fio binary is not
# used. libvirt-python builds from source in tox's environment: libvirt-dev, pkg-config, gcc and the
# Python headers.
SUITE_PACKAGES=(
  qemu-system-x86 qemu-utils ovmf
  libvirt-daemon-system libvirt-clients libvirt-dev pkg-config gcc python3-dev
  # qemu+ssh:// hosts: libvirt's ssh transport and the suite's host-key checks
  openssh-client
  busybox-static dropbear-bin dmsetup e2fsprogs util-linux cpio zstd
  build-essential dpkg-dev libaio-dev zlib1g-dev
)
# What only the project's tests need (tox -e test).
TEST_PACKAGES=(
  # A remote libvirt host is tested through a private sshd on loopback (bench/sshserver.py); the
  # system sshd is not started (nor configured) by the suite.
  openssh-server
  # The cloud-init test image (bench/testimage.py): debootstrap, GRUB for BIOS and UEFI,
  # the EFI system partition's FAT tools, ext4.
  debootstrap grub-pc-bin grub-efi-amd64-bin mtools dosfstools e2fsprogs
  # The results store's PostgreSQL path is tested against a private server from Debian's binaries
  # (tests/pgserver.py); the package's own cluster is never started.
  postgresql
  # The report and trend pages are checked in a real headless browser (tests/e2e/test_pages_browser.py);
  # the charts' text is set in DejaVu Sans.
  chromium fonts-dejavu-core
  # file(1) tells the static fio is static (tests/e2e/test_fio_push.py)
  file
  # virt-xml-validate's xmllint checks the domain XML of the disk settings against libvirt's schema
  # (tests/unit/test_disk_settings_xml.py)
  libxml2-utils
)
PACKAGES=("${SUITE_PACKAGES[@]}")
if [ "$tests" = 1 ]; then PACKAGES+=("${TEST_PACKAGES[@]}"); fi

if ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null; then
  log "this machine has no apt (not Debian): install QEMU (qemu-system-x86_64, qemu-img, OVMF), libvirt with its development files, pkg-config, gcc and the Python headers by hand, start libvirtd, and run again with VIOCONFORM_SKIP_HOST_SETUP=1 and an image of your own with fio in it (--image): the embedded guest is built from Debian packages"
  exit 2
fi

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
# A socket file alone proves nothing: a machine restored from a snapshot keeps
# /run/libvirt/*-sock and /run/*.pid of daemons that are no longer running
# (every connection to them is refused). So ask the live process.
daemon_alive() {  # $1 = daemon name. A killed, unreaped daemon is a zombie: not alive.
  pgrep -x -r R,S,D,I "$1" >/dev/null 2>&1
}
start_daemon() {  # $1 = daemon name, $2 = its socket
  if daemon_alive "$1" && [ -S "$2" ]; then
    return
  fi
  need_root "$1"
  if [ -e "$2" ]; then
    log "$1 is not running; removing its stale socket $2"
    rm -f "$2" "${2%-sock}-admin-sock"
  fi
  [ "$1" = libvirtd ] && rm -f /run/libvirt/libvirt-sock-ro
  log "starting $1"
  "$1" -d
  for _ in $(seq 1 50); do
    [ -S "$2" ] && return
    sleep 0.2
  done
  log "$1 did not create $2"
  exit 1
}
if [ -n "${VIOCONFORM_SKIP_LIBVIRTD:-}" ]; then
  :
elif [ -d /run/systemd/system ]; then
  # A systemd host: its units (and socket activation) own the daemons.
  virsh -q -c qemu:///system uri >/dev/null 2>&1 || { need_root libvirtd; systemctl start virtlogd.socket libvirtd; }
else
  start_daemon virtlogd /run/libvirt/virtlogd-sock
  virsh -q -c qemu:///system uri >/dev/null 2>&1 || start_daemon libvirtd /run/libvirt/libvirt-sock
  # The socket appears before the daemon answers on it; wait until it does.
  for _ in $(seq 1 50); do
    virsh -q -c qemu:///system uri >/dev/null 2>&1 && break
    sleep 0.2
  done
  virsh -q -c qemu:///system uri >/dev/null 2>&1 \
    || { log "libvirtd is running but qemu:///system does not answer: $(virsh -c qemu:///system uri 2>&1 | tail -1)"; exit 1; }
fi

if [ "$vcsim" = 1 ]; then
  "$(dirname "$0")/setup-vcsim.sh"
fi
