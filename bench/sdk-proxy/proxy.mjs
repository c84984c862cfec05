/*
 * mcp-bench sdk-proxy: the stdio-to-stdio MCP proxy a user would write with
 * the official TypeScript SDK (@modelcontextprotocol/sdk, pinned in
 * package-lock.json) instead of using mcp-chain.  It is the baseline that
 * mcp-chain's throughput is compared with.
 *
 * A `Server` on a StdioServerTransport (our stdin/stdout) forwards
 * tools/list and tools/call, with their progress notifications, to a
 * `Client` on a StdioClientTransport that spawns the backend.
 *
 * usage: node proxy.mjs [--max-buffer-mib N] [--] COMMAND [ARGS...]
 *    or: node proxy.mjs [--max-buffer-mib N] --config chain.json
 *        (the first entry of mcpServers)
 */
import { readFileSync } from 'node:fs';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CallToolRequestSchema,
  CallToolResultSchema,
  ListToolsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

// Report an error the SDK raised outside any request, on stderr.
function logError(side, err) {
  process.stderr.write(`mcp-bench sdk-proxy (${side}): ${err?.message ?? err}\n`);
}

// Work out the backend's command, args and env from our arguments.
function backendFromArgs(argv) {
  if (argv[0] === '--config') {
    const cfg = JSON.parse(readFileSync(argv[1], 'utf8'));
    const [name, spec] = Object.entries(cfg.mcpServers ?? {})[0] ?? [];
    if (!spec) throw new Error(`no server in ${argv[1]}`);
    return { name, command: spec.command, args: spec.args ?? [], env: spec.env };
  }
  const rest = argv[0] === '--' ? argv.slice(1) : argv;
  if (rest.length === 0) {
    throw new Error('usage: node proxy.mjs [--max-buffer-mib N] [--] COMMAND [ARGS...] | --config FILE');
  }
  return { name: 'backend', command: rest[0], args: rest.slice(1) };
}

// Connect to the backend, then serve our stdin/stdout, forwarding tools.
async function main() {
  let argv = process.argv.slice(2);
  // The SDK's stdio transports refuse any message over 10 MiB by default;
  // --max-buffer-mib N raises that limit (both directions).
  let maxBufferSize;
  if (argv[0] === '--max-buffer-mib') {
    maxBufferSize = Number(argv[1]) * 1024 * 1024;
    argv = argv.slice(2);
  }
  const backend = backendFromArgs(argv);
  const client = new Client({ name: 'mcp-bench-sdk-proxy', version: '0.1.0' });
  client.onerror = (err) => logError('client', err);
  const upstream = new StdioClientTransport({
    command: backend.command,
    args: backend.args,
    env: backend.env ? { ...process.env, ...backend.env } : undefined,
    stderr: 'inherit',
    maxBufferSize,
  });
  await client.connect(upstream);

  const server = new Server(
    { name: 'mcp-bench-sdk-proxy', version: '0.1.0' },
    { capabilities: { tools: {} } },
  );
  server.onerror = (err) => logError('server', err);

  server.setRequestHandler(ListToolsRequestSchema, async (request) =>
    client.listTools(request.params),
  );

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const { _meta, ...params } = request.params;
    const token = _meta?.progressToken;
    const options = { timeout: 600000 };
    if (token !== undefined) {
      // The client makes up its own token downstream; map it back here.
      options.onprogress = (progress) =>
        extra.sendNotification({
          method: 'notifications/progress',
          params: { ...progress, progressToken: token },
        });
      options.resetTimeoutOnProgress = true;
    }
    return client.callTool(params, CallToolResultSchema, options);
  });

  // When our client goes away, stop the backend and exit.
  const shutdown = async () => {
    try {
      await client.close();
    } finally {
      process.exit(0);
    }
  };
  process.stdin.on('end', shutdown);
  process.stdin.on('close', shutdown);
  upstream.onclose = () => process.exit(0);

  await server.connect(new StdioServerTransport(process.stdin, process.stdout,
    maxBufferSize ? { maxBufferSize } : undefined));
}

main().catch((err) => {
  process.stderr.write(`mcp-bench sdk-proxy: ${err?.stack ?? err}\n`);
  process.exit(1);
});
