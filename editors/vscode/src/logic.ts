// Pure logic of the extension (no `vscode` import), tested with `node --test` (test/logic.test.mjs):
// VS Code settings → the server's settings, the server launch, and the status-bar presentation.

/** `quickcode.*` keys that are forwarded to the language server unchanged (lsp_client/config.py names, camelCase). */
export const FORWARDED_KEYS = [
  'enabled', 'languages', 'debounceMs', 'maxTokens', 'deadlineMs', 'multilineMaxLines',
] as const;

/** What `$/quickcode/status` and `quickcode.status` carry (lsp_client/server.py `status()`); all optional. */
export interface ServerStatus {
  connected?: boolean;
  endpoint?: string;
  model?: string;
  replica?: string;
  pending?: number;
  connects?: number;
  last_error?: string | null;
  recent_first_chunk_ms_p50?: number;
  acceptance_rate?: number;
  enabled?: boolean;
}

export type Getter = (key: string) => unknown;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The settings object sent as initializationOptions and in workspace/didChangeConfiguration
 * (`{"quickcode": <this>}`). Empty endpoints / token are left out, so that the server keeps what its
 * environment gave it (QUICKCODE_ENDPOINTS, QUICKCODE_TOKEN, --endpoint). `advanced` is merged last:
 * any other field of the server's ClientConfig (e.g. {"prefetch": false}).
 */
export function serverSettings(get: Getter): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const endpoints = get('endpoints');
  if (Array.isArray(endpoints)) {
    const list = endpoints.filter((e): e is string => typeof e === 'string' && e.trim() !== '').map(e => e.trim());
    if (list.length > 0) out.endpoints = list;
  } else if (typeof endpoints === 'string' && endpoints.trim() !== '') {
    out.endpoints = endpoints.split(',').map(e => e.trim()).filter(e => e !== '');
  }
  const token = get('token');
  if (typeof token === 'string' && token !== '') out.token = token;
  for (const key of FORWARDED_KEYS) {
    const v = get(key);
    if (v === undefined || v === null) continue;
    if (key === 'languages' && !isObject(v)) continue;
    out[key] = v;
  }
  const advanced = get('advanced');
  if (isObject(advanced)) Object.assign(out, advanced);
  return out;
}

export interface ServerLaunch {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** How to start `quickcode lsp`: `server.command` (+ `server.args`), with the log file and extra env. */
export function serverLaunch(get: Getter, baseEnv: Record<string, string | undefined>): ServerLaunch {
  const command = (typeof get('server.command') === 'string' && (get('server.command') as string).trim()) || 'quickcode';
  const rawArgs = get('server.args');
  const args = Array.isArray(rawArgs) ? rawArgs.map(String) : ['lsp'];
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(baseEnv)) if (typeof v === 'string') env[k] = v;
  const extra = get('server.env');
  if (isObject(extra)) for (const [k, v] of Object.entries(extra)) if (v !== undefined && v !== null) env[k] = String(v);
  const logFile = get('server.logFile');
  if (typeof logFile === 'string' && logFile !== '') env.QUICKCODE_LSP_LOG = logFile;
  return { command, args, env };
}

/** Whether a settings change needs the server restarted (its command line or environment changed). */
export function needsRestart(affects: (section: string) => boolean): boolean {
  return affects('quickcode.server');
}

export interface StatusPresentation {
  text: string;            // status-bar text (codicons allowed)
  tooltip: string;         // markdown
  ariaLabel: string;       // stable prefix "quickcode <state>" (the e2e test reads it)
  state: 'starting' | 'connected' | 'disconnected' | 'disabled' | 'stopped';
}

export function presentStatus(status: ServerStatus | undefined, opts: { running: boolean; enabled: boolean }): StatusPresentation {
  if (!opts.running) {
    return { text: '$(circle-slash) quickcode', tooltip: 'quickcode: the language server is not running',
      ariaLabel: 'quickcode stopped', state: 'stopped' };
  }
  const enabled = opts.enabled && status?.enabled !== false;
  const lines: string[] = [];
  if (status?.endpoint) lines.push(`endpoint: \`${status.endpoint}\``);
  if (status?.model) lines.push(`model: ${status.model}${status.replica ? ` (${status.replica})` : ''}`);
  const p50 = status?.recent_first_chunk_ms_p50;
  if (typeof p50 === 'number') lines.push(`first chunk p50: ${Math.round(p50)} ms`);
  if (typeof status?.acceptance_rate === 'number') lines.push(`acceptance: ${Math.round(status.acceptance_rate * 100)} %`);
  if (status?.last_error) lines.push(`last error: ${status.last_error}`);
  lines.push('', 'Click for actions');
  const latency = typeof p50 === 'number' ? ` ${Math.round(p50)} ms` : '';
  let state: StatusPresentation['state'];
  let text: string;
  if (!enabled) {
    state = 'disabled'; text = '$(circle-slash) quickcode off';
  } else if (status === undefined) {
    state = 'starting'; text = '$(sync~spin) quickcode';
  } else if (status.connected) {
    state = 'connected'; text = `$(zap) quickcode${latency}`;
  } else {
    state = 'disconnected'; text = '$(debug-disconnect) quickcode';
  }
  const aria = `quickcode ${state}${latency ? `, first chunk p50${latency}` : ''}`;
  return { text, tooltip: [`**quickcode: ${state}**`, '', ...lines].join('\n\n'), ariaLabel: aria, state };
}

/** An LSP InlineCompletionItem as the Copilot-style telemetry notifications carry it. */
export interface ProtocolInlineItem {
  insertText: string | { kind: string; value: string };
  filterText?: string;
  range?: { start: { line: number; character: number }; end: { line: number; character: number } };
  command?: { title: string; command: string; arguments?: unknown[] };
}

/** `textDocument/didPartiallyAcceptCompletion` params; null when nothing was accepted. */
export function partialAcceptParams(item: ProtocolInlineItem, acceptedLength: number): { item: ProtocolInlineItem; acceptedLength: number } | null {
  const text = typeof item.insertText === 'string' ? item.insertText : item.insertText.value;
  const n = Math.max(0, Math.min(Math.floor(acceptedLength), text.length));
  return n > 0 ? { item, acceptedLength: n } : null;
}

/** `$/quickcode/moreText`: the suggestion shown early (its settled words) at this place is complete now. */
export interface MoreTextParams {
  textDocument: { uri: string };
  position: { line: number; character: number };
}

/**
 * Should the editor ask again for the ghost text? Only when the notice is for the document and the very
 * place the cursor is at (no selection): anywhere else the user has moved on and the next keystroke asks.
 */
export function retriggerFor(p: MoreTextParams | undefined, documentUri: string,
  cursor: { line: number; character: number }, selectionEmpty: boolean): boolean {
  return !!p && selectionEmpty && p.textDocument?.uri === documentUri
    && p.position?.line === cursor.line && p.position?.character === cursor.character;
}
