#!/usr/bin/env bash
# Builds a Debian package of srunway for one Slurm release, as Slurm plugin packages are: the release is in the
# package's name (srunway-slurm22.05, or srunway-spank-slurm22.05 with --plugin-only), since Slurm loads only
# plugins built for its own major.minor. Installed under /usr; its postinst adds the plugin to the plugin stack of
# the running Slurm through a drop-in (scripts/plugstack-dropin.sh, shipped as /usr/share/srunway/), and its prerm
# takes it out. Depends on the shared libraries it links, by package.
#
# Usage: scripts/package-deb.sh [--slurm-include DIR] [--plugin-only] [--build-dir DIR] [--out DIR]
#   --slurm-include DIR   the Slurm headers to build against (default as scripts/install-site.sh finds them)
#   --plugin-only         only the SPANK plugin and its topology helper
#   --build-dir DIR       the meson build directory (default: build-deb in the source tree)
#   --out DIR             where the .deb goes (default: the current directory)
# Prints the .deb's path on its last line. Install with `dpkg -i FILE.deb`, remove with `dpkg -r PACKAGE`.
set -euo pipefail

readonly kSource=$(cd "$(dirname "$0")/.." && pwd)
slurm_include="" plugin_only=0 build_dir="$kSource/build-deb" out=$PWD

die() { echo "package-deb: $*" >&2; exit 1; }
usage() { echo "package-deb: $* (see --help)" >&2; exit 2; }  # a malformed command line
source "$kSource/scripts/site-lib.sh"

while (($#)); do
  case $1 in
    --slurm-include | --build-dir | --out)
      (($# >= 2)) || usage "$1 needs a value"
      case $1 in
        --slurm-include) slurm_include=$2 ;;
        --build-dir) build_dir=$2 ;;
        --out) out=$2 ;;
      esac
      shift 2 ;;
    --plugin-only) plugin_only=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) usage "unknown option '$1'" ;;
  esac
done
command -v dpkg-deb >/dev/null || die "no dpkg-deb on PATH: build the package on Debian or Ubuntu"
require_meson
use_cuda_toolkit auto  # srunway-train's CUDA kernels where there is an nvcc, on PATH or in the CUDA install
slurm_include=$(slurm_headers_for "$slurm_include")
headers=$(slurm_release_of "$slurm_include")
release=$(major_minor "$headers")
running=$(running_slurm_release)
[[ -z $running || $(major_minor "$running") == "$release" ]] ||
  echo "package-deb: note: building for Slurm $headers (the headers in $slurm_include); this machine runs $running"

log=$(mktemp "${TMPDIR:-/tmp}/srunway-package-deb.XXXXXX.log")
stage=$(mktemp -d "${TMPDIR:-/tmp}/srunway-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"  # the package's ./ entry
build_srunway "$kSource" "$build_dir" "$plugin_only" "$log" --prefix /usr --buildtype=release \
  -Dslurm=enabled "-Dslurm_include_dir=$slurm_include" -Dsanitized_tests=disabled -Dthread_sanitized_tests=disabled \
  ${cuda_home:+"-Dgpu_include_dir=$cuda_home/include"}
DESTDIR="$stage" install_srunway "$build_dir" "$plugin_only" "$log" >/dev/null
plugin=$(cd "$stage" && find . -name srunway.so -printf '/%P\n' | head -n 1)
[[ -n $plugin ]] || die "meson installed no srunway.so (log: $log)"
install -D -m 0755 "$kSource/scripts/plugstack-dropin.sh" "$stage/usr/share/srunway/plugstack-dropin.sh"

# Depends: the packages of the shared libraries the installed programs and plugin load.
depends=$(find "$stage" -type f -perm -u+x -o -type f -name '*.so' | while read -r file; do
  [[ $(od -An -c -N4 "$file" | tr -d " ") == "177ELF" ]] || continue
  ldd "$file" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true
done | cut -d: -f1 | sort -u | grep -v '^$' | paste -sd, | sed 's/,/, /g')

version=$(meson introspect "$build_dir" --projectinfo | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
name=$( ((plugin_only)) && echo "srunway-spank-slurm$release" || echo "srunway-slurm$release")
arch=$(dpkg --print-architecture)
mkdir -p "$stage/DEBIAN"
cat >"$stage/DEBIAN/control" <<EOF
Package: $name
Version: $version
Architecture: $arch
Maintainer: srunway developers <srunway@localhost>
Section: admin
Priority: optional
Depends: ${depends:-libc6}
Description: srunway for Slurm $release: SPANK plugin$( ((plugin_only)) || echo ", launcher, trainer and node validation")
 Built against the headers of Slurm $headers ($slurm_include); Slurm loads the plugin only into a $release
 release. The postinst adds $plugin to the running Slurm's plugin stack through
 plugstack.conf.d/srunway.conf (default_profile=auto); the prerm removes it.
EOF
cat >"$stage/DEBIAN/postinst" <<EOF
#!/bin/sh
set -e
if [ "\$1" = configure ]; then
  args="\${SRUNWAY_PLUGIN_ARGS:-default_profile=auto}"
  # Arguments the plugin would refuse fail every job step: checked as it checks them before the drop-in names it.
  if ! out=\$(/usr/bin/srunway-topo --plugin-args "\$args" --json 2>&1 >/dev/null); then
    case "\$out" in
      *"error: --plugin-args: "*) echo "srunway: SRUNWAY_PLUGIN_ARGS='\$args': \${out#*error: --plugin-args: }" >&2; exit 1 ;;
    esac
  fi
  /usr/share/srunway/plugstack-dropin.sh add $plugin "\$args" \\
    --comment "srunway's SPANK plugin for Slurm $headers, from the package $name (dpkg -r $name removes it)"
fi
EOF
cat >"$stage/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
  /usr/share/srunway/plugstack-dropin.sh remove
fi
EOF
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm"
mkdir -p "$out"
deb="$out/${name}_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$stage" "$deb" >>"$log" 2>&1 || { tail -n 5 "$log" >&2; die "dpkg-deb failed (log: $log)"; }
rm -f "$log"
echo "package-deb: $name $version for Slurm $headers: $(dpkg-deb -c "$deb" | grep -c -v '/$') files, depends on: ${depends:-libc6}"
echo "$deb"
