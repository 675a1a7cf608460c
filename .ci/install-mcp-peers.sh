#!/usr/bin/env bash
# Install the npm MCP servers the tests talk to (and mcpGraph, whose example graph files
# they import, and the TypeScript SDK, whose client they run), so that no test reaches the
# network.
#
#   1. Pinned versions into $MCP_PEERS_HOME/node_modules; tests start them with
#      `node <package's bin script>` (tests/peers: npm_server_command).
#   2. npx's own cache for `npx -y @modelcontextprotocol/server-filesystem` (a bare name, as
#      graph YAML files write it) in $MCP_PEERS_HOME/npm-cache. npx resolves a bare name
#      against the registry every time unless npm is offline, so a test that runs such a
#      graph sets npm_config_cache=$MCP_PEERS_HOME/npm-cache and npm_config_offline=true
#      (tests/peers: npx_offline_env); stdio servers inherit npm_config_* variables.
#
# Usage: install-mcp-peers.sh        Env: MCP_PEERS_HOME (default /tmp/mcp-peers)
# Idempotent: a second run with everything in place does not touch the network.
set -euo pipefail

HOME_DIR=${MCP_PEERS_HOME:-/tmp/mcp-peers}
PACKAGES=(
  @modelcontextprotocol/server-everything@2026.8.31
  @modelcontextprotocol/server-filesystem@2026.8.31
  # Not a server the tests start: its examples/ are graph files the tests import unchanged.
  mcpgraph@0.1.23
  # Not a server: the official TypeScript SDK, whose client tests/peers/ts_client.mjs runs.
  @modelcontextprotocol/sdk@1.32.2
)
# Started through npx by graph files; npx takes whichever version was latest when cached.
NPX_PACKAGES=(@modelcontextprotocol/server-filesystem)

export npm_config_cache=$HOME_DIR/npm-cache
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
command -v node >/dev/null || { echo "[mcp-peers] node is not installed" >&2; exit 1; }
mkdir -p "$HOME_DIR"
[[ -f $HOME_DIR/package.json ]] || echo '{"name":"mcp-peers","private":true}' >"$HOME_DIR/package.json"

installed() {  # installed NAME@VERSION: is exactly that version in node_modules?
  local name=${1%@*} version=${1##*@} manifest
  manifest=$HOME_DIR/node_modules/$name/package.json
  [[ -f $manifest ]] && [[ $(node -p "require('$manifest').version") == "$version" ]]
}

missing=()
for package in "${PACKAGES[@]}"; do installed "$package" || missing+=("$package"); done
if (( ${#missing[@]} )); then
  echo "[mcp-peers] installing ${missing[*]} into $HOME_DIR" >&2
  npm install --prefix "$HOME_DIR" --save-exact --loglevel=error "${missing[@]}" >&2
fi

# A server started with stdin at end of file starts, finds no client and exits 0.
starts_offline() { npm_config_offline=true timeout 60 npx -y "$1" "$HOME_DIR" </dev/null >/dev/null 2>&1; }
for package in "${NPX_PACKAGES[@]}"; do
  if ! starts_offline "$package"; then
    echo "[mcp-peers] caching $package for npx" >&2
    timeout 300 npx -y "$package" "$HOME_DIR" </dev/null >/dev/null
    starts_offline "$package" || { echo "[mcp-peers] npx cannot start $package offline" >&2; exit 1; }
  fi
done
echo "[mcp-peers] ready in $HOME_DIR (node $(node -v))" >&2
