#!/usr/bin/env bash
# Installs the vCenter simulators the vSphere backend's tests run against:
#   - govmomi's stock vcsim (go install github.com/vmware/govmomi/vcsim@v0.46.3);
#   - vioconform-vcsim, built from tests/vsphere/vcsim/: the same simulator with a
#     test-controlled virtualDisk perf source and a VscsiStats service.
# Idempotent: a binary already built from the same sources is kept.
# Binaries go to ${XDG_CACHE_HOME:-~/.cache}/vioconform/bin (override: VIOCONFORM_BIN_DIR).
#
# Go: govmomi v0.46.3 needs Go >= 1.22, found as $GO, `go` on PATH, /usr/local/go or Debian's
# /usr/lib/go-1.NN. Only a binary to (re)build asks for one. When there is none, Debian's newest
# golang-1.NN-go (NN >= 22: bookworm has them in bookworm-backports) is downloaded through a
# private apt state and unpacked into the cache (${XDG_CACHE_HOME:-~/.cache}/vioconform/go): the
# host's apt sources and packages stay as they are, and no root is needed.
set -euo pipefail

GOVMOMI_VERSION=v0.46.3
GO_MIN_MINOR=22
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/vioconform
bin_dir=${VIOCONFORM_BIN_DIR:-$cache/bin}
go_cache=$cache/go
mkdir -p "$bin_dir"

go_minor() {  # $1 = a go binary: its minor version (go1.22.12 -> 22), or nothing
    "$1" env GOVERSION 2>/dev/null | sed -nE 's/^go1\.([0-9]+).*/\1/p'
}

find_go() {  # the first Go >= 1.GO_MIN_MINOR; $GO alone when it is set
    local candidates
    if [ -n "${GO:-}" ]; then
        candidates=("$GO")
    else
        candidates=("$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go-1.*/bin/go "$go_cache"/usr/lib/go-1.*/bin/go)
    fi
    for g in "${candidates[@]}"; do
        [ -n "$g" ] && [ -x "$g" ] || continue
        minor=$(go_minor "$g")
        [ -n "$minor" ] && [ "$minor" -ge "$GO_MIN_MINOR" ] && { echo "$g"; return 0; }
    done
    return 1
}

debian_go() (  # download and unpack Debian's newest golang-1.NN-go (NN >= GO_MIN_MINOR) into $go_cache
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || exit 1
    . /etc/os-release
    apt_dir=$(mktemp -d)
    trap 'rm -rf "$apt_dir"' EXIT
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/parts" "$apt_dir/debs"
    cp /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources "$apt_dir/parts/" 2>/dev/null || true
    [ -f /etc/apt/sources.list ] && cp /etc/apt/sources.list "$apt_dir/parts/host.list"
    mirror=$(apt-cache policy | awk -v s="${VERSION_CODENAME:-}/main" '$3 == s && $2 ~ /^https?:/ {print $2; exit}')
    if [ -n "$mirror" ]; then
        printf 'Types: deb\nURIs: %s\nSuites: %s-backports\nComponents: main\nSigned-By: %s\n' "$mirror" \
            "$VERSION_CODENAME" /usr/share/keyrings/debian-archive-keyring.gpg >"$apt_dir/parts/vioconform-backports.sources"
    fi
    opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt_dir/parts"
                -o "Dir::State::Lists=$apt_dir/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
    [ "$(id -u)" = 0 ] && opts+=(-o APT::Sandbox::User=root)
    apt-get -q "${opts[@]}" update >/dev/null 2>&1 || true  # a source without the suite fails alone
    minor=$(apt-cache "${opts[@]}" pkgnames golang-1. 2>/dev/null | sed -nE 's/^golang-1\.([0-9]+)-go$/\1/p' | sort -n | tail -1)
    [ -n "$minor" ] && [ "$minor" -ge "$GO_MIN_MINOR" ] || exit 1
    echo "setup-vcsim: downloading Debian's golang-1.$minor-go into $go_cache" >&2
    (cd "$apt_dir/debs" && apt-get -q "${opts[@]}" download "golang-1.$minor-go" "golang-1.$minor-src" >/dev/null) || exit 1
    rm -rf "$go_cache.new" && mkdir -p "$go_cache.new"
    for deb in "$apt_dir"/debs/*.deb; do dpkg-deb -x "$deb" "$go_cache.new"; done
    rm -rf "$go_cache" && mv "$go_cache.new" "$go_cache"
)

go_bin=""
need_go() {  # sets go_bin and go_version, or stops with what to do
    [ -n "$go_bin" ] && return 0
    go_bin=$(find_go || { [ -z "${GO:-}" ] && debian_go && find_go; } || true)
    if [ -z "$go_bin" ] && [ -n "${GO:-}" ]; then
        echo "setup-vcsim: GO=$GO is not Go 1.$GO_MIN_MINOR or newer (govmomi $GOVMOMI_VERSION needs it): point GO at one" >&2
        exit 1
    elif [ -z "$go_bin" ]; then
        echo "setup-vcsim: no Go 1.$GO_MIN_MINOR or newer here and apt offers no golang-1.NN-go of it" \
             "(govmomi $GOVMOMI_VERSION needs it): install one and rerun with GO=/path/to/bin/go" >&2
        exit 1
    fi
    go_version=$("$go_bin" env GOVERSION)
}

# -buildvcs=false: the module sits in a git work tree that may belong to another user.
export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
export GOBIN="$bin_dir"

# Stock vcsim: reinstall only when the recorded version differs.
stamp="$bin_dir/.vcsim-version"
if [ -x "$bin_dir/vcsim" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$GOVMOMI_VERSION" ]; then
    echo "setup-vcsim: vcsim $GOVMOMI_VERSION already installed"
else
    need_go
    echo "setup-vcsim: go install github.com/vmware/govmomi/vcsim@$GOVMOMI_VERSION ($go_version)"
    "$go_bin" install "github.com/vmware/govmomi/vcsim@$GOVMOMI_VERSION"
    echo "$GOVMOMI_VERSION" > "$stamp"
fi

# The project's simulator: rebuild when its sources changed (hash of the Go files and go.sum).
src="$repo/tests/vsphere/vcsim"
hash=$(cat "$src"/*.go "$src/go.mod" "$src/go.sum" | sha256sum | cut -d' ' -f1)
stamp="$bin_dir/.vioconform-vcsim-hash"
if [ -x "$bin_dir/vioconform-vcsim" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$hash" ]; then
    echo "setup-vcsim: vioconform-vcsim is up to date"
else
    need_go
    echo "setup-vcsim: building tests/vsphere/vcsim ($go_version)"
    # -mod=readonly: the committed go.sum pins every module; a mismatch is an error, not an update.
    (cd "$src" && "$go_bin" build -mod=readonly -trimpath -o "$bin_dir/vioconform-vcsim.new" . )
    mv "$bin_dir/vioconform-vcsim.new" "$bin_dir/vioconform-vcsim"
    echo "$hash" > "$stamp"
fi

echo "setup-vcsim: binaries in $bin_dir:"
echo "  $bin_dir/vcsim"
echo "  $bin_dir/vioconform-vcsim"
