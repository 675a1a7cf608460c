// The official TypeScript SDK's OAuth client against a live Switchyard, driven line by line by
// tests/e2e/test_oauth_ts_sdk.py.
//
//   node ts_oauth_client.mjs BASE_URL TRANSPORT REDIRECT_URI CLIENT_NAME
//     TRANSPORT: streamable_http (BASE_URL/mcp) or sse (the legacy transport, BASE_URL/sse)
//     env MCP_PEERS_HOME: where .ci/install-mcp-peers.sh installed the SDK
//
// The client is the SDK's own: its transports with an `authProvider` discover the server's
// metadata from a 401, register (RFC 7591), start the code flow with PKCE, refresh, and step up
// on a 403; the provider below only keeps what they hand it, in memory, as an app would.
//
// It reads one JSON command a line on stdin and answers each with one JSON line on stdout:
//   {"do": "connect"}                          -> {"done": {"server", "protocolVersion"}}
//   {"do": "list"}                             -> {"done": {"tools": [names]}}
//   {"do": "call", "name", "arguments"}        -> {"done": {"isError", "structuredContent"}}
//   {"do": "tokens"}                           -> {"done": {"scope", "access", "refresh"}}
//                                                 (fingerprints of the tokens held, not them)
//   {"do": "revoke"}                           -> {"done": {"status"}}: the app revokes its
//                                                 refresh token (RFC 7009) where the server's
//                                                 metadata says, as on signing out
//   {"do": "close"}                            -> {"done": {}}, then exits
// A command that fails answers {"failed": "<message>"}. When the SDK needs the person (it
// called redirectToAuthorization), the script first writes {"authorize": "<url>"} and reads
// the query the browser came back with ({"code", "state", "iss"} or {"error", ...}): with a
// code, it calls the transport's finishAuth and tries the command again, as the SDK's own
// example client does. Every line written carries "http": the requests made since the last
// line, each [method, path, status, grant_type at /token, the challenge's error].
import { createHash, randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import { join } from "node:path";
import { createInterface } from "node:readline";

const [base, transportName, redirectUri, clientName] = process.argv.slice(2);
if (!base || !["streamable_http", "sse"].includes(transportName) || !redirectUri || !clientName) {
  console.error("usage: node ts_oauth_client.mjs BASE_URL streamable_http|sse REDIRECT_URI NAME");
  process.exit(2);
}
// The SDK is installed beside the other npm peers, not beside this script.
const peers = createRequire(join(process.env.MCP_PEERS_HOME || "/tmp/mcp-peers", "package.json"));
const { Client } = peers("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = peers("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { SSEClientTransport } = peers("@modelcontextprotocol/sdk/client/sse.js");
const { UnauthorizedError, discoverAuthorizationServerMetadata } = peers(
  "@modelcontextprotocol/sdk/client/auth.js",
);

const exchanges = [];

// Every request the SDK makes (the transport's, and its OAuth flow's) goes through here.
async function logged(input, init) {
  const response = await fetch(input, init);
  const address = new URL(input instanceof Request ? input.url : String(input));
  const body = init?.body;
  const form =
    body instanceof URLSearchParams ? body : typeof body === "string" ? new URLSearchParams(body) : null;
  const grant = address.pathname === "/token" ? (form?.get("grant_type") ?? null) : null;
  const error = /error="([^"]*)"/.exec(response.headers.get("www-authenticate") ?? "")?.[1] ?? null;
  exchanges.push([init?.method ?? "GET", address.pathname, response.status, grant, error]);
  return response;
}

// What the SDK asks an app to keep: the registration, the tokens, the PKCE verifier.
class Provider {
  get redirectUrl() {
    return redirectUri;
  }

  get clientMetadata() {
    return {
      client_name: clientName,
      redirect_uris: [redirectUri],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }

  state() {
    this.sentState = randomBytes(16).toString("hex");
    return this.sentState;
  }

  clientInformation() {
    return this.client;
  }

  saveClientInformation(information) {
    this.client = information;
  }

  tokens() {
    return this.saved;
  }

  saveTokens(tokens) {
    this.saved = tokens;
  }

  redirectToAuthorization(url) {
    this.authorizationUrl = url.href;
  }

  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }

  codeVerifier() {
    return this.verifier;
  }

  invalidateCredentials(what) {
    if (what === "all" || what === "client") this.client = undefined;
    if (what === "all" || what === "tokens") this.saved = undefined;
    if (what === "all" || what === "verifier") this.verifier = undefined;
  }
}

const provider = new Provider();
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
let client;
let transport;

function say(message) {
  process.stdout.write(`${JSON.stringify({ ...message, http: exchanges.splice(0) })}\n`);
}

async function ask(message) {
  say(message);
  const { value, done } = await lines.next();
  if (done) throw new Error("stdin closed while waiting for the person");
  return JSON.parse(value);
}

// `action`, and once more after the person authorized, if the SDK asked for them.
async function authorized(action) {
  try {
    return await action();
  } catch (error) {
    const url = provider.authorizationUrl;
    if (!(error instanceof UnauthorizedError) || url === undefined) throw error;
    provider.authorizationUrl = undefined;
    const returned = await ask({ authorize: url });
    if (!returned.code) throw new Error(`sent back without a code: ${JSON.stringify(returned)}`);
    // The SDK leaves checking the state to the app (RFC 6749, 10.12).
    if (returned.state !== provider.sentState) throw new Error("the state came back changed");
    await transport.finishAuth(returned.code);
    return await action();
  }
}

function fingerprint(token) {
  return token ? createHash("sha256").update(token).digest("hex").slice(0, 12) : null;
}

const commands = {
  async connect() {
    await authorized(async () => {
      const url = new URL(transportName === "sse" ? `${base}/sse` : `${base}/mcp`);
      const options = { authProvider: provider, fetch: logged };
      transport =
        transportName === "sse"
          ? new SSEClientTransport(url, options)
          : new StreamableHTTPClientTransport(url, options);
      client = new Client({ name: "switchyard-ts-oauth-tests", version: "1.0.0" });
      await client.connect(transport);
    });
    return {
      server: client.getServerVersion()?.name ?? null,
      protocolVersion: transport.protocolVersion ?? transport._protocolVersion ?? null,
    };
  },
  async list() {
    const { tools } = await authorized(() => client.listTools());
    return { tools: tools.map((tool) => tool.name) };
  },
  async call({ name, arguments: args }) {
    const called = await authorized(() => client.callTool({ name, arguments: args ?? {} }));
    return { isError: called.isError ?? false, structuredContent: called.structuredContent ?? null };
  },
  async tokens() {
    const tokens = provider.tokens();
    return {
      scope: tokens?.scope ?? null,
      access: fingerprint(tokens?.access_token),
      refresh: fingerprint(tokens?.refresh_token),
    };
  },
  async revoke() {
    const metadata = await discoverAuthorizationServerMetadata(new URL(base), { fetchFn: logged });
    const body = new URLSearchParams({
      token: provider.tokens().refresh_token,
      token_type_hint: "refresh_token",
      client_id: provider.clientInformation().client_id,
    });
    const response = await logged(metadata.revocation_endpoint, { method: "POST", body });
    return { status: response.status };
  },
};

for (;;) {
  const { value, done } = await lines.next();
  if (done) break;
  const command = JSON.parse(value);
  if (command.do === "close") {
    await client?.close();
    say({ done: {} });
    break;
  }
  try {
    say({ done: await commands[command.do](command) });
  } catch (error) {
    say({ failed: error?.message ?? String(error) });
  }
}
// An SSE stream the SDK keeps open would keep Node running.
process.exit(0);
