#!/bin/sh
# Copy the front-end packages' dist files from node_modules ($1) into static/vendor ($2).
# Shared by `make install` and the Dockerfile's node stage, so both ship the same files.
set -eu
src=$1
dst=$2
rm -rf "$dst"
mkdir -p "$dst/reveal.js" "$dst/katex" "$dst/d3"
cp -R "$src/reveal.js/dist/." "$dst/reveal.js/"
cp -R "$src/katex/dist/." "$dst/katex/"
cp "$src/d3/dist/d3.min.js" "$dst/d3/"
for pkg in reveal.js katex d3; do cp "$src/$pkg/LICENSE" "$dst/$pkg/" 2>/dev/null || true; done
