// The official TypeScript SDK's client against a live Switchyard, for tests/e2e/test_ts_client.py.
//
//   node ts_client.mjs BASE_URL      (env: MCP_KEY, the API key; MCP_PEERS_HOME, where
//                                     .ci/install-mcp-peers.sh installed the SDK)
//
// Connects over Streamable HTTP (BASE_URL/mcp), then over the legacy SSE transport
// (BASE_URL/sse), each time sending the key as `Authorization: Bearer`; lists the tools and
// calls get_node_types. Prints one JSON object: per transport, the server's name, the tools
// listed and the answer of the call (or, when it was refused, `refused`: why). Exits 1 with
// the error on stderr when anything else fails.
import { createRequire } from "node:module";
import { join } from "node:path";

const [base] = process.argv.slice(2);
const key = process.env.MCP_KEY;
if (!base || !key) {
  console.error("usage: MCP_KEY=KEY node ts_client.mjs BASE_URL");
  process.exit(2);
}
// The SDK is installed beside the other npm peers, not beside this script.
const peers = createRequire(join(process.env.MCP_PEERS_HOME || "/tmp/mcp-peers", "package.json"));
const { Client } = peers("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = peers("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { SSEClientTransport } = peers("@modelcontextprotocol/sdk/client/sse.js");

const requestInit = { headers: { Authorization: `Bearer ${key}` } };
const transports = {
  streamable_http: () => new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit }),
  sse: () => new SSEClientTransport(new URL(`${base}/sse`), { requestInit }),
};

async function session(makeTransport) {
  const client = new Client({ name: "switchyard-ts-tests", version: "1.0.0" });
  const transport = makeTransport();
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    const answer = {
      server: client.getServerVersion()?.name ?? null,
      tools: tools.map((tool) => tool.name),
    };
    try {
      const called = await client.callTool({ name: "get_node_types", arguments: {} });
      answer.isError = called.isError ?? false;
      answer.nodeTypes = Object.keys(called.structuredContent ?? {});
    } catch (error) {
      answer.refused = error?.message ?? String(error); // a JSON-RPC error (a missing scope)
    }
    return answer;
  } finally {
    await client.close();
  }
}

try {
  const answers = {};
  for (const [name, makeTransport] of Object.entries(transports)) {
    answers[name] = await session(makeTransport);
  }
  console.log(JSON.stringify(answers));
} catch (error) {
  console.error(error?.stack ?? String(error));
  process.exit(1);
}
