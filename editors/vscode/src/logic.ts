// Pure logic of the extension (no `vscode` import), tested with `node --test` (test/logic.test.mjs):
// VS Code settings → the server's settings, the server launch, and the status-bar presentation.

/** `quickcode.*` keys that are forwarded to the language server unchanged (quickcode/lsp_client/config.py names, camelCase). */
export const FORWARDED_KEYS = [
  'enabled', 'languages', 'debounceMs', 'maxTokens', 'deadlineMs', 'multilineMaxLines', 'suggestionUnit',
  'nextEdit',
] as const;

/** What `$/quickcode/status` and `quickcode.status` carry (quickcode/lsp_client/server.py `status()`); all optional. */
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

/**
 * Settings a repository must not choose: where the user's code and token go (`endpoints`, `token`,
 * `advanced`, which can set any server field) and what runs (`server.*`). package.json gives them machine
 * scope, so VS Code ignores them in a workspace's `.vscode/settings.json`; `userLevelGetter` ignores such
 * values too (the user's own settings, else the default), in case a VS Code version or a fork does not.
 */
export const USER_LEVEL_KEYS = new Set(['endpoints', 'token', 'advanced', 'server.command', 'server.args',
  'server.env', 'server.logFile']);

/** The part of `WorkspaceConfiguration.inspect()` we read. */
export interface Inspected {
  defaultValue?: unknown;
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

export function userLevelGetter(get: Getter, inspect: (key: string) => Inspected | undefined): Getter {
  return (key: string) => {
    if (!USER_LEVEL_KEYS.has(key)) return get(key);
    const i = inspect(key);
    return i?.globalValue !== undefined ? i.globalValue : i?.defaultValue;
  };
}

function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/**
 * Hosts a token would reach unencrypted: `ws://` endpoints that are not loopback. The extension asks
 * before sending a token there (anyone on the path could read it and use it).
 */
export function plainTextTokenHosts(endpoints: readonly string[], hasToken: boolean): string[] {
  if (!hasToken) return [];
  const hosts: string[] = [];
  for (const e of endpoints) {
    let u: URL;
    try { u = new URL(e.trim()); } catch { continue; }
    if ((u.protocol === 'ws:' || u.protocol === 'http:') && !isLoopbackHost(u.hostname) && !hosts.includes(u.host)) {
      hosts.push(u.host);
    }
  }
  return hosts;
}

/** The endpoint list a settings object (or the server's `QUICKCODE_ENDPOINTS`) names. */
export function endpointList(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((e): e is string => typeof e === 'string' && e.trim() !== '').map(e => e.trim());
  if (typeof value === 'string') return value.split(',').map(e => e.trim()).filter(e => e !== '');
  return [];
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The settings object sent as initializationOptions and in workspace/didChangeConfiguration
 * (`{"quickcode": <this>}`). Empty endpoints / token are left out, so that the server keeps what its
 * environment gave it (QUICKCODE_ENDPOINTS, QUICKCODE_TOKEN, --endpoint). `advanced` is merged last:
 * any other field of the server's ClientConfig (e.g. {"prefetch": false}). `secretToken` (from VS Code's
 * SecretStorage) wins over the `quickcode.token` setting; `withholdToken` sends none (the user declined to
 * send it over plain ws://). Pass a `userLevelGetter`: endpoints/token/advanced of a workspace never count.
 */
export function serverSettings(get: Getter, secretToken?: string, withholdToken = false): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const endpoints = endpointList(get('endpoints'));
  if (endpoints.length > 0) out.endpoints = endpoints;
  const token = secretToken || get('token');
  if (typeof token === 'string' && token !== '' && !withholdToken) out.token = token;
  for (const key of FORWARDED_KEYS) {
    const v = get(key);
    if (v === undefined || v === null) continue;
    if (key === 'languages' && !isObject(v)) continue;
    out[key] = v;
  }
  const advanced = get('advanced');
  if (isObject(advanced)) Object.assign(out, advanced);
  if (withholdToken) delete out.token;
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

// ── next edits (`textDocument/copilotInlineEdit`, setting `quickcode.nextEdit`)

/** Whether the extension asks for next edits: `nextEdit` on (directly or through `advanced`) and not disabled. */
export function nextEditOn(settings: Record<string, unknown>): boolean {
  return (settings.nextEdit === true || settings.next_edit === true) && settings.enabled !== false;
}

export interface Pos { line: number; character: number }

/** One edit of a `textDocument/copilotInlineEdit` answer, as the extension uses it. */
export interface InlineEdit {
  range: { start: Pos; end: Pos };
  text: string;
  version: number;            // the document version the edit applies to
  command?: { title: string; command: string; arguments?: unknown[] };
}

const MAX_EDIT_CHARS = 20000;      // an answer larger than this is not shown (a hostile or broken server)

function isPos(p: unknown): p is Pos {
  const o = p as Pos;
  return isObject(p) && Number.isInteger(o.line) && o.line >= 0 && Number.isInteger(o.character) && o.character >= 0;
}

/**
 * The edit of a `copilotInlineEdit` answer for `uri`, or null: none, malformed, for another document, an empty
 * range with no text, or a range that ends before it starts. Every field is checked (the answer is input).
 */
export function inlineEditFor(result: unknown, uri: string): InlineEdit | null {
  const edits = isObject(result) && Array.isArray(result.edits) ? result.edits : [];
  for (const e of edits) {
    if (!isObject(e) || typeof e.text !== 'string' || e.text.length > MAX_EDIT_CHARS || !isObject(e.range)) continue;
    const { start, end } = e.range as { start: unknown; end: unknown };
    const doc = e.textDocument as { uri?: unknown; version?: unknown } | undefined;
    if (!isPos(start) || !isPos(end) || !isObject(doc) || doc.uri !== uri || !Number.isInteger(doc.version)) continue;
    if (end.line < start.line || (end.line === start.line && end.character < start.character)) continue;
    if (e.text === '' && end.line === start.line && end.character === start.character) continue;
    const command = isObject(e.command) && typeof e.command.command === 'string'
      ? e.command as InlineEdit['command'] : undefined;
    return { range: { start, end }, text: e.text, version: doc.version as number, command };
  }
  return null;
}

/** The preview drawn after the target line: the new text on one line (line breaks as ⏎), at most `maxChars`. */
export function editPreview(text: string, maxChars = 120): string {
  const one = text.replace(/\r?\n/g, ' ⏎ ').replace(/\t/g, '  ');
  const shown = one.length > maxChars ? `${one.slice(0, maxChars - 1)}…` : one;
  return shown === '' ? '(delete)' : shown;
}

/**
 * Whether a shown edit may still be applied: the document is at the version it was answered for and the
 * range holds the very text it held when it was shown (never apply an edit to a document that moved on).
 */
export function editStillApplies(shown: { version: number; oldText: string },
  now: { version: number; textInRange: string }): boolean {
  return shown.version === now.version && shown.oldText === now.textInRange;
}
