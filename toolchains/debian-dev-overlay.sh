#!/usr/bin/env bash
# Unpack Debian packages of a foreign architecture that apt cannot install beside the
# host's compilers into DIR, the Debian way without installing them: apt-get download,
# then dpkg -x. Prints DIR/usr, the prefix to give CMake (CMAKE_PREFIX_PATH).
#
#   toolchains/debian-dev-overlay.sh DIR [ARCH [PACKAGE...]]
#
# Default: ARCH arm64, the ecCodes packages. libeccodes-dev:arm64 depends on
# gfortran-12:arm64 (for its Fortran module), which conflicts with the host's
# gfortran-12, so apt refuses it; its headers, CMake package and libraries need nothing
# of gfortran. Its CMake package checks at configure time that every file its imported
# targets name exists under the same prefix (libeccodes.so.0 of libeccodes0, the tools of
# libeccodes-tools), hence all three. Everything else the target needs comes from apt with
# multiarch (apt-packages.txt: libc6-dev:arm64, libeccodes0:arm64 and their dependencies).
#
# `dpkg --add-architecture ARCH` and `apt-get update` must have run. DIR is reused when it
# holds the same package versions; it is written completely or not at all.
set -euo pipefail

die() { echo "debian-dev-overlay.sh: $*" >&2; exit 2; }

[ $# -ge 1 ] || die "usage: debian-dev-overlay.sh DIR [ARCH [PACKAGE...]]"
dir="$1"
arch="${2:-arm64}"
shift $(( $# >= 2 ? 2 : 1 ))
packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=(libeccodes-dev libeccodes0 libeccodes-tools)

dpkg --print-foreign-architectures | grep -qx "$arch" ||
  die "dpkg does not know architecture $arch: run dpkg --add-architecture $arch && apt-get update"

qualified=("${packages[@]/%/:$arch}")
# The .deb file names apt would download name each package's version.
uris="$(apt-get download --print-uris -q "${qualified[@]}" 2>&1)" ||
  die "apt cannot download ${qualified[*]} (apt-get update?): $uris"
wanted="$(awk '{print $2}' <<< "$uris" | sort)"

if [ -f "$dir/.overlay-packages" ] && [ "$(cat "$dir/.overlay-packages")" = "$wanted" ]; then
  echo "$dir/usr"
  exit 0
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/dev-overlay.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/debs" "$tmp/root"
# apt-get download writes into the current directory
(cd "$tmp/debs" && apt-get download -q "${qualified[@]}" >/dev/null 2>"$tmp/apt.err") ||
  { cat "$tmp/apt.err" >&2; die "apt-get download ${qualified[*]} failed"; }
for deb in "$tmp"/debs/*.deb; do
  dpkg -x "$deb" "$tmp/root"
done
echo "$wanted" > "$tmp/root/.overlay-packages"

rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
mv "$tmp/root" "$dir"
echo "$dir/usr"
