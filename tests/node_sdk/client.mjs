// Drives `citegraph mcp` with the official TypeScript SDK client (tests/test_mcp_node.py).
// argv[2]: JSON {"command", "args", "env", "cwd", "calls": [{"name", "arguments"}]}; prints one JSON
// line: {"tools": [names], "results": [{"result"} | {"thrown": {"code", "message"}}]}.
// The SDK validates structuredContent against each tool's outputSchema: a result that does
// not match is thrown (McpError -32602), which is what this records.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const spec = JSON.parse(process.argv[2]);
const transport = new StdioClientTransport({
  command: spec.command, args: spec.args, env: spec.env, cwd: spec.cwd, stderr: "ignore",
});
const client = new Client({ name: "citegraph-node-test", version: "1.0.0" });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const results = [];
for (const call of spec.calls) {
  try {
    results.push({ result: await client.callTool({ name: call.name, arguments: call.arguments }) });
  } catch (err) {
    results.push({ thrown: { code: err.code ?? null, message: String(err.message ?? err) } });
  }
}
process.stdout.write(JSON.stringify({ tools, results }) + "\n");
await client.close();
