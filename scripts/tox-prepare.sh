#!/usr/bin/env bash
# What tox runs before the suite or the tests (tox.ini's commands_pre), in tox's environment:
# the host's set-up (scripts/setup-host.sh), then the Python packages.
#
#   scripts/tox-prepare.sh suite [PYTEST ARGS...]   the suite's Debian packages (tox -e suite, tox -e suite-setup)
#   scripts/tox-prepare.sh test  [PYTEST ARGS...]   also the tests' packages and vcsim (tox -e test)
#
# PYTEST ARGS are tox's {posargs}: when they ask only for pytest's help or version
# (tox -e suite -- --help; ./vioconform --help runs tox -e suite-setup -- --help), nothing is
# installed on the host and no daemon is started; only the Python packages the help needs (all
# but libvirt-python, which builds against libvirt-dev).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
which_set=${1:?"usage: $0 suite|test [pytest args...]"}
shift

help=0
for arg in "$@"; do
  case $arg in
    --) break ;;
    -h|--help|-V|--version) help=1 ;;
  esac
done

# pip install -r FILE..., skipped when this environment already took files of the same content:
# pip's own "already satisfied" check costs several seconds on every ./vioconform. The stamp, in the
# environment tox made (VIRTUAL_ENV), holds the files' sha256 and the interpreter's version; any change
# reinstalls. Outside a virtual environment there is no stamp: pip always runs. --no-compile: pip would
# byte-compile every module of every package (about 9 of the 20 s of CPU of a fresh environment's
# install), most of which no process imports; each process compiles what it imports, into
# PYTHONPYCACHEPREFIX (tox.ini), once.
stamp_key() { (python -c 'import sys; print(sys.version)'; cat "$@") | sha256sum | cut -d' ' -f1; }
stamp_file() { [ -d "${VIRTUAL_ENV:-}" ] && echo "$VIRTUAL_ENV/.vioconform-requirements"; }
stamp_matches() {
  local stamp
  stamp=$(stamp_file) && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(stamp_key "$@")" ]
}
pip_install() {
  local stamp args=()
  stamp_matches "$@" && return 0
  for f in "$@"; do args+=(-r "$f"); done
  python -m pip install -q --no-compile "${args[@]}"
  if stamp=$(stamp_file); then stamp_key "$@" >"$stamp"; fi
}

if [ "$help" = 1 ]; then
  # Everything is there already when the suite's own set-up ran with these requirements.
  stamp_matches "$root/requirements.txt" && exit 0
  reqs=$(mktemp)
  trap 'rm -f "$reqs"' EXIT
  grep -v -i '^libvirt-python' "$root/requirements.txt" >"$reqs"
  python -m pip install -q --no-compile -r "$reqs"
  exit 0
fi

case $which_set in
  suite)
    bash "$here/setup-host.sh"
    pip_install "$root/requirements.txt" ;;
  test)
    bash "$here/setup-host.sh" --tests --vcsim
    pip_install "$root/requirements.txt" "$root/requirements-dev.txt" ;;
  *) echo "$0: the set is 'suite' or 'test', not '$which_set'" >&2; exit 2 ;;
esac
