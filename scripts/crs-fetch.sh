#!/usr/bin/env bash
# Fetch the pinned OWASP CRS release into ./crs (git-ignored), verified by content.
#
#   scripts/crs-fetch.sh            download v$CRS_VERSION into ./crs (needs internet)
#   scripts/crs-fetch.sh --verify D check that folder D holds exactly the pinned rule files
#
# The check hashes what wafer embeds (rules/*.conf, rules/*.data and
# crs-setup.conf.example), so any CRS copy - release tarball, git checkout, or the
# one CI provides - is verified the same way.
set -euo pipefail

CRS_VERSION=4.28.0
CRS_URL="https://github.com/coreruleset/coreruleset/archive/refs/tags/v${CRS_VERSION}.tar.gz"
# sha256 over "sha256sum" lines of the files above, in C-locale order.
CRS_CONTENT_SHA256=433764615f39c337264a2608723e4a2068a3c618f18e320948c9c8ae1a3ac09e

content_hash() {
  (cd "$1" && { find rules -maxdepth 1 -type f \( -name '*.conf' -o -name '*.data' \) | LC_ALL=C sort; echo crs-setup.conf.example; } |
    xargs sha256sum | sha256sum | cut -d' ' -f1)
}

verify() {
  local got
  got=$(content_hash "$1")
  if [ "$got" != "$CRS_CONTENT_SHA256" ]; then
    echo "crs-fetch: $1 does not hold CRS v${CRS_VERSION} (content sha256 $got, expected $CRS_CONTENT_SHA256)" >&2
    return 1
  fi
  echo "crs-fetch: $1 holds CRS v${CRS_VERSION} (content verified)"
}

if [ "${1:-}" = "--verify" ]; then
  verify "${2:?usage: $0 --verify DIR}"
  exit
fi

cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -f crs/crs-setup.conf.example ] && verify crs; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "crs-fetch: downloading $CRS_URL"
curl -fsSL --retry 3 "$CRS_URL" -o "$tmp/crs.tar.gz"
mkdir "$tmp/x"
tar -xzf "$tmp/crs.tar.gz" -C "$tmp/x" --strip-components=1
verify "$tmp/x"
rm -rf crs
mkdir crs
cp -r "$tmp/x/rules" "$tmp/x/crs-setup.conf.example" crs/
[ -d "$tmp/x/tests/regression" ] && mkdir -p crs/tests && cp -r "$tmp/x/tests/regression" crs/tests/
echo "tag: v${CRS_VERSION}" > crs/VERSION
echo "crs-fetch: CRS v${CRS_VERSION} in ./crs; build with: make wasm CRS_DIR=\$(pwd)/crs"
