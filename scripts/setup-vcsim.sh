#!/usr/bin/env bash
# Installs the vCenter simulators the vSphere backend's tests run against:
#   - govmomi's stock vcsim (go install github.com/vmware/govmomi/vcsim@v0.46.3);
#   - vioconform-vcsim, built from tools/vcsim/: the same simulator with a
#     test-controlled virtualDisk perf source and a VscsiStats service.
# Idempotent: a binary already built from the same sources is kept.
# Binaries go to ${XDG_CACHE_HOME:-~/.cache}/vioconform/bin (override: VIOCONFORM_BIN_DIR).
#
# Go: govmomi v0.46.3 needs Go >= 1.22. When `go` is missing this installs Debian's
# golang-go; on Debian 12 (bookworm) that is Go 1.19, too old for govmomi v0.46.3,
# and the script stops with what to do (a Go >= 1.22 from bookworm-backports,
# e.g. golang-1.22-go, whose binary is /usr/lib/go-1.22/bin/go).
set -euo pipefail

GOVMOMI_VERSION=v0.46.3
GO_MIN_MINOR=22
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin_dir=${VIOCONFORM_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vioconform/bin}
mkdir -p "$bin_dir"

find_go() {
    for g in "${GO:-}" "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go-1.2*/bin/go; do
        [ -n "$g" ] && [ -x "$g" ] && { echo "$g"; return 0; }
    done
    return 1
}

go_bin=$(find_go || true)
if [ -z "$go_bin" ]; then
    echo "setup-vcsim: no Go toolchain found; installing Debian's golang-go" >&2
    if [ "$(id -u)" = 0 ]; then apt_get=(apt-get); else apt_get=(sudo apt-get); fi
    "${apt_get[@]}" update -qq
    DEBIAN_FRONTEND=noninteractive "${apt_get[@]}" install -y -qq golang-go
    go_bin=$(find_go)
fi
go_version=$("$go_bin" env GOVERSION)   # e.g. go1.22.5
minor=$(echo "$go_version" | sed -E 's/^go1\.([0-9]+).*/\1/')
if [ "$minor" -lt "$GO_MIN_MINOR" ]; then
    echo "setup-vcsim: $go_bin is $go_version, but govmomi $GOVMOMI_VERSION needs go1.$GO_MIN_MINOR or newer." >&2
    echo "  Debian 12's golang-go is 1.19. Install a newer Go (bookworm-backports: apt-get install -t bookworm-backports golang-1.22-go)" >&2
    echo "  and rerun with GO=/usr/lib/go-1.22/bin/go $0" >&2
    exit 1
fi

# -buildvcs=false: the module sits in a git work tree that may belong to another user.
export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
export GOBIN="$bin_dir"

# Stock vcsim: reinstall only when the recorded version differs.
stamp="$bin_dir/.vcsim-version"
if [ -x "$bin_dir/vcsim" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$GOVMOMI_VERSION" ]; then
    echo "setup-vcsim: vcsim $GOVMOMI_VERSION already installed"
else
    echo "setup-vcsim: go install github.com/vmware/govmomi/vcsim@$GOVMOMI_VERSION ($go_version)"
    "$go_bin" install "github.com/vmware/govmomi/vcsim@$GOVMOMI_VERSION"
    echo "$GOVMOMI_VERSION" > "$stamp"
fi

# The project's simulator: rebuild when its sources changed (hash of the Go files and go.sum).
src="$repo/tools/vcsim"
hash=$(cat "$src"/*.go "$src/go.mod" "$src/go.sum" | sha256sum | cut -d' ' -f1)
stamp="$bin_dir/.vioconform-vcsim-hash"
if [ -x "$bin_dir/vioconform-vcsim" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$hash" ]; then
    echo "setup-vcsim: vioconform-vcsim is up to date"
else
    echo "setup-vcsim: building tools/vcsim ($go_version)"
    # -mod=readonly: the committed go.sum pins every module; a mismatch is an error, not an update.
    (cd "$src" && "$go_bin" build -mod=readonly -trimpath -o "$bin_dir/vioconform-vcsim.new" . )
    mv "$bin_dir/vioconform-vcsim.new" "$bin_dir/vioconform-vcsim"
    echo "$hash" > "$stamp"
fi

echo "setup-vcsim: binaries in $bin_dir:"
echo "  $bin_dir/vcsim"
echo "  $bin_dir/vioconform-vcsim"
