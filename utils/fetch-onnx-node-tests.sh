#!/usr/bin/env bash
# Fetches ONNX 1.20's backend node tests (onnx/backend/test/data/node of
# PyPI's onnx-1.20.0 source distribution, checked against its SHA-256) into
# DEST/node, for pcc-onnx-node-tests --data. Debian's libonnx-testdata has
# 1.12's only. Does nothing when DEST/node is there already.
#
#   utils/fetch-onnx-node-tests.sh DEST
set -euo pipefail
dest=${1:?usage: $0 DEST}
[ -d "$dest/node" ] && exit 0
url=https://files.pythonhosted.org/packages/bd/bf/824b13b7ea14c2d374b48a296cfa412442e5559326fbab5441a4fcb68924/onnx-1.20.0.tar.gz
sha256=1a93ec69996b4556062d552ed1aa0671978cfd3c17a40bf4c89a1ae169c6a4ad
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -sSfL --retry 3 -o "$tmp/onnx.tar.gz" "$url"
echo "$sha256  $tmp/onnx.tar.gz" | sha256sum -c --quiet -
tar xzf "$tmp/onnx.tar.gz" -C "$tmp" onnx-1.20.0/onnx/backend/test/data/node
mkdir -p "$dest"
mv "$tmp/onnx-1.20.0/onnx/backend/test/data/node" "$dest/node"
