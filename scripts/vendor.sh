#!/bin/sh
# Copy the front-end packages' dist files from node_modules ($1) into static/vendor ($2).
# Shared by `make install` and the Dockerfile's node stage, so both ship the same files.
set -eu
src=$1
dst=$2
rm -rf "$dst"
mkdir -p "$dst/reveal.js" "$dst/katex" "$dst/d3" "$dst/fonts"
cp -R "$src/reveal.js/dist/." "$dst/reveal.js/"
# The black theme without the four whole Source Sans Pro fonts it embeds as base64 (560 KB, render-blocking):
# static/css/fonts.css loads the Latin subsets of the same font, as files, only the weights a page uses.
sed 's/@font-face{[^}]*}//g' "$src/reveal.js/dist/theme/black.css" > "$dst/reveal.js/theme/black-nofonts.css"
cp -R "$src/katex/dist/." "$dst/katex/"
cp "$src/d3/dist/d3.min.js" "$dst/d3/"
for subset in latin latin-ext; do
  for style in 400-normal 400-italic 600-normal 600-italic; do
    cp "$src/@fontsource/source-sans-pro/files/source-sans-pro-$subset-$style.woff2" "$dst/fonts/"
  done
done
cp "$src/@fontsource/source-sans-pro/LICENSE" "$dst/fonts/"
for pkg in reveal.js katex d3; do cp "$src/$pkg/LICENSE" "$dst/$pkg/" 2>/dev/null || true; done
