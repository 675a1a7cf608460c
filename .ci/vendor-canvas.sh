#!/usr/bin/env bash
# Re-fetch the canvas editor's libraries from the npm registry into the app's static files
# (graphs/static/graphs/vendor/), and record each file's version, licence and SHA-256 in
# VENDORED.md there. The service never loads them from a CDN, and installing it needs no
# build step: the built UMD files are committed.
#
#   bash .ci/vendor-canvas.sh                 # the versions pinned below
#   bash .ci/vendor-canvas.sh 3.35.0 4.0.1    # cytoscape, cytoscape-dagre
#
# tests/graphs/test_canvas_vendor.py checks the committed files against VENDORED.md.
set -euo pipefail
cytoscape=${1:-3.35.0}
dagre_layout=${2:-4.0.1}
here=$(cd "$(dirname "$0")/.." && pwd)
target=$here/graphs/static/graphs/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack --silent "cytoscape@$cytoscape" "cytoscape-dagre@$dagre_layout" >/dev/null
# cytoscape-dagre's UMD file bundles @dagrejs/dagre: its licence comes along too.
bundled=$(tar xzf "cytoscape-dagre-$dagre_layout.tgz" -O package/package.json \
  | python3 -c 'import json,sys; p = json.load(sys.stdin); print({**p.get("devDependencies", {}), **p.get("dependencies", {})}["@dagrejs/dagre"].lstrip("^~"))')
npm pack --silent "@dagrejs/dagre@$bundled" >/dev/null
mkdir -p "$target"
tar xzf "cytoscape-$cytoscape.tgz" -O package/dist/cytoscape.min.js >"$target/cytoscape.min.js"
tar xzf "cytoscape-$cytoscape.tgz" -O package/LICENSE >"$target/cytoscape.LICENSE"
tar xzf "cytoscape-dagre-$dagre_layout.tgz" -O package/dist/cytoscape-dagre.min.js \
  >"$target/cytoscape-dagre.min.js"
tar xzf "cytoscape-dagre-$dagre_layout.tgz" -O package/LICENSE >"$target/cytoscape-dagre.LICENSE"
tar xzf "dagrejs-dagre-$bundled.tgz" -O package/LICENSE >"$target/dagre.LICENSE"
{
  echo "# Vendored canvas libraries"
  echo
  echo "Written by \`bash .ci/vendor-canvas.sh\` on $(date -u +%Y-%m-%d) from the npm registry; run it"
  echo "again to update them. Loaded by the canvas editor (templates/admin/graphs/workflow/canvas.html)"
  echo "from the app's static files, never from a CDN."
  echo
  echo "| file | package | version | licence | sha256 |"
  echo "| --- | --- | --- | --- | --- |"
  echo "| cytoscape.min.js | cytoscape | $cytoscape | MIT (cytoscape.LICENSE) | $(sha256sum "$target/cytoscape.min.js" | cut -d' ' -f1) |"
  echo "| cytoscape-dagre.min.js | cytoscape-dagre, bundling @dagrejs/dagre $bundled | $dagre_layout | MIT (cytoscape-dagre.LICENSE, dagre.LICENSE) | $(sha256sum "$target/cytoscape-dagre.min.js" | cut -d' ' -f1) |"
} >"$target/VENDORED.md"
echo "vendored cytoscape $cytoscape, cytoscape-dagre $dagre_layout (@dagrejs/dagre $bundled) into $target"
