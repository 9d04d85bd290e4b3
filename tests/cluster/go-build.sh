# Sourced by the build scripts beside it: where their cache is, the Go toolchain they need, and
# a build directory that leaves nothing behind when a build fails.

# The root of the cache every build script keeps its versions in.
ifo_cache_root="${IFO_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ifo}"

# ifo_need_go WHAT: exits with the remedy when there is no Go toolchain to build WHAT with.
ifo_need_go() {
  command -v go >/dev/null 2>&1 && return 0
  echo "error: the Go toolchain (go 1.26 or newer) is needed to build $1 from the Go module" >&2
  echo "       proxy; install it from https://go.dev/dl or your distribution's golang package." >&2
  exit 1
}

# ifo_build_dir OUT: creates OUT and, inside it, a temporary directory named by `tmp`, removed
# when the script exits (a build moves what it made from there into OUT when it succeeds).
ifo_build_dir() {
  mkdir -p "$1"
  tmp="$(mktemp -d "$1/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
}

# ifo_build_lock NAME: holds the lock NAME in the cache until the script exits, so that a build
# started while another one of the same binaries runs (tests/run.sh builds them in the background
# while the tests' own calls may ask for them) waits for it and then finds them in the cache.
ifo_build_lock() {
  mkdir -p "$ifo_cache_root"
  exec {ifo_lock_fd}>"$ifo_cache_root/.$1.lock"
  if ! flock -n "$ifo_lock_fd"; then
    echo "waiting for another build of $1 to finish" >&2
    flock "$ifo_lock_fd"
  fi
}
