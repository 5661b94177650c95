#!/usr/bin/env bash
# Stage 0: fetch the Spanish gettext catalogs (*.mo) that Debian packages ship, without installing the packages.
# Every package of the release with a Spanish catalog (.../es/LC_MESSAGES/*.mo) whose .deb is under MAX_BYTES
# (3 MB: leaves out games and data packages whose size is artwork), plus LibreOffice's and the dialogue of two
# story games (Wesnoth campaigns, FreedroidRPG), the most conversational text in the catalogs.
# Needs apt-file (apt-get install apt-file && apt-file update). Writes training/work/mo/<package>/*.mo with the
# package's copyright file, and training/catalog-licences.tsv (package, its DEP-5 licence names).
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p work/debs work/mo
apt-file search -x '/es/LC_MESSAGES/[^/]*\.mo$' | cut -d: -f1 | sort -u > work/mo-candidates.txt
# shellcheck disable=SC2046
apt-cache show --no-all-versions $(cat work/mo-candidates.txt) |
    awk -v max="${MAX_BYTES:-3000000}" -v big='^(libreoffice-l10n-es|wesnoth-1[.]16-.*|freedroidrpg-data)$' \
        '/^Package:/{p=$2} /^Size:/{if ($2 < max || p ~ big) print p}' > work/mo-packages.txt
(cd work/debs && xargs -n 50 apt-get download -q < ../mo-packages.txt || true)
for deb in work/debs/*.deb; do
    pkg=$(dpkg-deb -f "$deb" Package)
    mkdir -p "work/mo/$pkg"
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "work/mo/$pkg" --wildcards --no-anchored --transform 's,.*/,,' \
        '*/es/LC_MESSAGES/*.mo' "usr/share/doc/$pkg/copyright" 2>/dev/null || true
    licences=$(sed -n 's/^License: *\(..*\)/\1/p' "work/mo/$pkg/copyright" 2>/dev/null | sort -u | paste -sd ';' || true)
    printf '%s\t%s\n' "$pkg" "${licences:-see /usr/share/doc/$pkg/copyright}"
done > catalog-licences.tsv
rm -rf work/debs
echo "$(ls work/mo | wc -l) packages, $(find work/mo -name '*.mo' | wc -l) catalogs in $(pwd)/work/mo"
