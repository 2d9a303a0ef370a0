#!/usr/bin/env bash
# Fetches Intel's offline GPU compiler (ocloc, with IGC) from Debian's packages, unpacked without installing,
# for tests/test_device_compile.py: it compiles the kernel's SPIR-V for Intel GPUs on a machine with none.
# Debian sid has the release that knows Xe2 (bmg, lnl) besides pvc and dg2; Debian 12's own (22.43) knows no
# Xe2 and runs 2-4x slower. Sid's ocloc needs sid's C and C++ runtime, so it runs through sid's own loader
# with sid's libraries first, leaving this machine's untouched. Prints the wrapper's path.
#   OCLOC_DIR=path   where the packages go (default: .cache/ocloc in the repository)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${OCLOC_DIR:-.cache/ocloc}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
WRAPPER="$DIR/bin/ocloc"
# (ocloc query writes its answer into a file of the current folder: run it in $DIR)
if [ -x "$WRAPPER" ] && (cd "$DIR" && "$WRAPPER" query OCL_DRIVER_VERSION >/dev/null 2>&1); then
    echo "$WRAPPER"
    exit 0
fi
PACKAGES="intel-ocloc libigc2 libigdfcl2 libigdgmm12 libc6 libstdc++6 libgcc-s1 zlib1g"
APT="$DIR/apt"
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$DIR/debs"
# Debian's archive key (package debian-archive-keyring; on Ubuntu too) signs sid's package lists.
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
[ -r "$KEYRING" ] || { echo "get_ocloc: no $KEYRING: install the debian-archive-keyring package" >&2; exit 1; }
echo "deb [signed-by=$KEYRING] http://deb.debian.org/debian sid main" >"$APT/sources.list"
# A private sources list, package lists and cache: the machine's own apt state is neither read nor changed.
apt_get() {
    apt-get -q -o Dir::Etc::sourcelist="$APT/sources.list" -o Dir::Etc::sourceparts=- \
        -o Dir::State::Lists="$APT/lists" -o Dir::Cache="$APT/cache" -o Debug::NoLocking=1 "$@"
}
apt_get update >&2
# shellcheck disable=SC2086  # a list of package names
(cd "$DIR/debs" && rm -f ./*.deb && apt_get download $PACKAGES >&2)
rm -rf "$DIR/root"
for deb in "$DIR"/debs/*.deb; do dpkg-deb -x "$deb" "$DIR/root"; done
ROOT="$DIR/root"
OCLOC=$(find "$ROOT/usr/bin" -name 'ocloc-*' -type f | head -n 1)
[ -n "$OCLOC" ] || { echo "get_ocloc: intel-ocloc has no ocloc binary" >&2; exit 1; }
mkdir -p "$DIR/bin"
cat >"$WRAPPER" <<WRAP
#!/bin/sh
# sid's ocloc through sid's loader and libraries (written by scripts/get_ocloc.sh)
exec "$ROOT/usr/lib64/ld-linux-x86-64.so.2" --library-path "$ROOT/usr/lib/x86_64-linux-gnu:$ROOT/lib/x86_64-linux-gnu" "$OCLOC" "\$@"
WRAP
chmod +x "$WRAPPER"
(cd "$DIR" && "$WRAPPER" query OCL_DRIVER_VERSION >/dev/null)
echo "$WRAPPER"
