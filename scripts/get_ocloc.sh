#!/usr/bin/env bash
# Fetches Intel's offline GPU compiler (ocloc, with IGC) from Debian's packages, unpacked without installing,
# for tests/test_device_compile.py: it compiles the kernel's SPIR-V for Intel GPUs on a machine with none.
# Debian sid has the release that knows Xe2 (bmg, lnl) besides pvc and dg2; Debian 12's own (22.43) knows no
# Xe2 and runs 2-4x slower. Sid's ocloc needs sid's C and C++ runtime, so it runs through sid's own loader
# with sid's libraries first, leaving this machine's untouched. Prints the wrapper's path.
# The packages come from the Debian archive this machine's apt already uses (its sources.list or a deb822
# .sources file: the entry for the machine's own release), with only the suite switched to sid, so a local
# mirror serves them too.
#   OCLOC_DIR=path   where the packages go (default: .cache/ocloc in the repository)
#   get_ocloc.sh --archive   prints the archive URL it would use, and nothing else
#   APT_ETC, OS_RELEASE      where apt's configuration and os-release are read (default: /etc/apt, /etc/os-release)
set -euo pipefail
cd "$(dirname "$0")/.."
APT_ETC=${APT_ETC:-/etc/apt}
OS_RELEASE=${OS_RELEASE:-/etc/os-release}

# The URI of the first enabled `deb` entry for this Debian release's own suite with component main, from
# sources.list and sources.list.d/*.list (one line per entry) or sources.list.d/*.sources (deb822 stanzas).
os_release_field() {
    sed -n "s/^$1=//p" "$OS_RELEASE" 2>/dev/null | tr -d "\"'" | head -n 1
}
debian_archive() {
    local codename uri file
    codename=$(os_release_field VERSION_CODENAME)
    [ "$(os_release_field ID)" = debian ] && [ -n "$codename" ] || return 0
    shopt -s nullglob
    local lists=("$APT_ETC"/sources.list "$APT_ETC"/sources.list.d/*.list) stanzas=("$APT_ETC"/sources.list.d/*.sources)
    shopt -u nullglob
    for file in "${lists[@]}"; do
        [ -f "$file" ] || continue
        # deb [options] uri suite component...; the options may hold spaces, so they go first.
        uri=$(sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$file" | awk -v suite="$codename" \
            '$1 == "deb" && $3 == suite && !found { for (i = 4; i <= NF; i++) if ($i == "main") found = $2 }
             END { if (found) print found }')
        [ -z "$uri" ] || { echo "$uri"; return 0; }
    done
    for file in "${stanzas[@]}"; do
        uri=$(awk -v suite="$codename" '
            function has(list, word,   n, i, w) { n = split(list, w, /[ \t]+/); for (i = 1; i <= n; i++) if (w[i] == word) return 1; return 0 }
            function stanza_end() {
                if (has(f["types"], "deb") && has(f["suites"], suite) && has(f["components"], "main") && tolower(f["enabled"]) != "no") {
                    split(f["uris"], u, /[ \t]+/); print u[1]; found = 1; exit
                }
                delete f; key = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { stanza_end(); next }
            /^[ \t]/ { if (key != "") f[key] = f[key] " " $0; next }  # a continuation line
            { key = tolower(substr($0, 1, index($0, ":") - 1)); value = substr($0, index($0, ":") + 1)
              gsub(/^[ \t]+|[ \t]+$/, "", value); f[key] = value }
            END { if (!found) stanza_end() }' "$file")
        [ -z "$uri" ] || { echo "$uri"; return 0; }
    done
}

ARCHIVE=$(debian_archive)
NO_ARCHIVE="get_ocloc: found no Debian archive in this machine's apt sources ($APT_ETC/sources.list, \
sources.list.d/*.list and *.sources: an enabled deb entry for this Debian release's suite with component main), \
and ocloc comes from that archive's sid suite"
if [ "${1:-}" = --archive ]; then
    [ -n "$ARCHIVE" ] || { echo "$NO_ARCHIVE" >&2; exit 1; }
    echo "$ARCHIVE"
    exit 0
fi

DIR=${OCLOC_DIR:-.cache/ocloc}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
WRAPPER="$DIR/bin/ocloc"
# (ocloc query writes its answer into a file of the current folder: run it in $DIR)
if [ -x "$WRAPPER" ] && (cd "$DIR" && "$WRAPPER" query OCL_DRIVER_VERSION >/dev/null 2>&1); then
    echo "$WRAPPER"
    exit 0
fi
[ -n "$ARCHIVE" ] || { echo "$NO_ARCHIVE" >&2; exit 1; }
PACKAGES="intel-ocloc libigc2 libigdfcl2 libigdgmm12 libc6 libstdc++6 libgcc-s1 zlib1g"
APT="$DIR/apt"
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$DIR/debs"
# Debian's archive key (package debian-archive-keyring; on Ubuntu too) signs sid's package lists.
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
[ -r "$KEYRING" ] || { echo "get_ocloc: no $KEYRING: install the debian-archive-keyring package" >&2; exit 1; }
echo "deb [signed-by=$KEYRING] $ARCHIVE sid main" >"$APT/sources.list"
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
