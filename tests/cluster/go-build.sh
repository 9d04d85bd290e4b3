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
