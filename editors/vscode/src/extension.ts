// quickcode for VS Code: starts the quickcode language server (`quickcode lsp`, stdio) with
// vscode-languageclient, whose built-in inline-completion feature (on by default since 10.0.1) shows the
// server's suggestions as ghost text. The server's own commands (quickcode.accept, quickcode.status, ...)
// are registered by the client from the server's executeCommandProvider; VS Code runs an item's
// `quickcode.accept` command when the user accepts it. This file adds settings sync, a status-bar item,
// UI commands, next-edit suggestions (nextEdit.ts, setting `quickcode.nextEdit`) and (where VS Code lets an
// extension use the inlineCompletionsAdditions API) the Copilot-style didShow / didPartiallyAccept notifications.
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification, ExecuteCommandRequest, InlineCompletionRequest, LanguageClient,
  LanguageClientOptions, ServerOptions, State, TransportKind,
} from 'vscode-languageclient/node';
import type * as lsp from 'vscode-languageclient/node';
import {
  endpointList, MoreTextParams, needsRestart, nextEditOn, partialAcceptParams, plainTextTokenHosts, presentStatus,
  ProtocolInlineItem, retriggerFor, serverLaunch, serverSettings, ServerStatus, userLevelGetter,
} from './logic';
import { NextEdits } from './nextEdit';

const SECTION = 'quickcode';
const STATUS_NOTIFICATION = '$/quickcode/status';
const MORE_NOTIFICATION = '$/quickcode/moreText';
const STATUS_POLL_MS = 5000;

let client: LanguageClient | undefined;
let status: ServerStatus | undefined;
let statusItem: vscode.StatusBarItem;
let output: vscode.LogOutputChannel;
let pollTimer: NodeJS.Timeout | undefined;
let clientDisposables: vscode.Disposable[] = [];
let nextEdits: NextEdits | undefined;

const SECRET_KEY = 'quickcode.token';
const PLAIN_OK_KEY = 'quickcode.plainTextTokenHosts';   // hosts the user agreed to send the token to over ws://
const DEFAULT_ENDPOINT = 'ws://127.0.0.1:8765/v1/ws';

let extensionContext: vscode.ExtensionContext;
let secretToken: string | undefined;

const config = () => vscode.workspace.getConfiguration(SECTION);
// endpoints, token, advanced and server.*: the user's own settings only, never a workspace's
const get = userLevelGetter((key: string) => config().get(key), (key: string) => config().inspect(key));

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  extensionContext = context;
  output = vscode.window.createOutputChannel('quickcode', { log: true });
  secretToken = await context.secrets.get(SECRET_KEY);
  statusItem = vscode.window.createStatusBarItem('quickcode.status', vscode.StatusBarAlignment.Right, 100);
  statusItem.name = 'quickcode';
  statusItem.command = 'quickcode.showMenu';
  statusItem.show();
  renderStatus();
  context.subscriptions.push(
    output, statusItem,
    // Our UI command ids differ from the server's (quickcode.enable/disable/status/latencyReport/accept),
    // which vscode-languageclient registers itself.
    vscode.commands.registerCommand('quickcode.toggle', () => setEnabled(!(get('enabled') ?? true))),
    vscode.commands.registerCommand('quickcode.enableCompletions', () => setEnabled(true)),
    vscode.commands.registerCommand('quickcode.disableCompletions', () => setEnabled(false)),
    vscode.commands.registerCommand('quickcode.showLatencyReport', showLatencyReport),
    vscode.commands.registerCommand('quickcode.showStatus', showStatus),
    vscode.commands.registerCommand('quickcode.restartServer', restart),
    vscode.commands.registerCommand('quickcode.showLog', () => output.show()),
    vscode.commands.registerCommand('quickcode.showMenu', showMenu),
    vscode.commands.registerCommand('quickcode.setToken', setToken),
    context.secrets.onDidChange(async (e) => {
      if (e.key !== SECRET_KEY) return;
      secretToken = await context.secrets.get(SECRET_KEY);
      await pushSettings();
    }),
    vscode.workspace.onDidChangeConfiguration(onConfigurationChanged),
    nextEdits = new NextEdits(() => client, () => nextEditOn(serverSettings(get)), output),
    { dispose: () => { void stopClient(); } },
  );
  await startClient();
}

export async function deactivate(): Promise<void> {
  await stopClient();
}

async function startClient(): Promise<void> {
  const launch = serverLaunch(get, process.env);
  const serverOptions: ServerOptions = {
    command: launch.command, args: launch.args, transport: TransportKind.stdio, options: { env: launch.env },
  };
  const clientOptions: LanguageClientOptions = {
    // every file: the server decides per language (settings `quickcode.languages`, `quickcode.enabled`)
    documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
    initializationOptions: await currentSettings(),
    outputChannel: output,
    middleware: {
      // VS Code shows the suggestion as ghost text; the server's textDocument/completion fallback (one menu
      // item with the same text, for editors without inline completion) would only duplicate it here and
      // cost a second backend request per keystroke. `quickcode.completionMenu` turns it back on.
      provideCompletionItem: (document, position, context, token, next) =>
        get('completionMenu') === true ? next(document, position, context, token) : undefined,
    },
    // a missing/broken backend must never bother the user with popups: the status bar says it
    initializationFailedHandler: (error) => { output.error(`quickcode server failed to initialize: ${error}`); return false; },
  };
  const c = new LanguageClient('quickcode', 'quickcode', serverOptions, clientOptions);
  client = c;
  clientDisposables.push(
    c.onNotification(STATUS_NOTIFICATION, (s: ServerStatus) => { status = s; renderStatus(); }),
    // the ghost text shown was the settled part of a line still being written; the rest is in: ask again
    c.onNotification(MORE_NOTIFICATION, (p: MoreTextParams) => {
      const ed = vscode.window.activeTextEditor;
      if (ed && retriggerFor(p, c.code2ProtocolConverter.asUri(ed.document.uri), ed.selection.active,
        ed.selection.isEmpty)) {
        void vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
      }
    }),
    c.onDidChangeState(() => renderStatus()),
  );
  output.info(`starting ${launch.command} ${launch.args.join(' ')}`);
  try {
    await c.start();
  } catch (e) {
    output.error(`could not start the quickcode language server (${launch.command}): ${e}`);
    void vscode.window.showWarningMessage(
      `quickcode: could not start "${launch.command} ${launch.args.join(' ')}". Set "quickcode.server.command".`,
      'Open Settings').then(choice => {
      if (choice) void vscode.commands.executeCommand('workbench.action.openSettings', 'quickcode.server');
    });
    renderStatus();
    return;
  }
  installTelemetryProvider(c);
  nextEdits?.schedule();          // the editor open before the server ran: its next edit, not only after a key
  await refreshStatus();
  pollTimer = setInterval(() => { void refreshStatus(); }, STATUS_POLL_MS);
}

async function stopClient(): Promise<void> {
  if (pollTimer) clearInterval(pollTimer);
  pollTimer = undefined;
  for (const d of clientDisposables) d.dispose();
  clientDisposables = [];
  const c = client;
  client = undefined;
  status = undefined;
  if (c && c.state !== State.Stopped) {
    try { await c.stop(2000); } catch (e) { output.warn(`stopping the server: ${e}`); }
  }
  renderStatus();
}

async function restart(): Promise<void> {
  await stopClient();
  await startClient();
}

async function serverCommand<T>(command: string, ...args: unknown[]): Promise<T | undefined> {
  if (!client || client.state !== State.Running) return undefined;
  return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args }) as Promise<T>;
}

async function refreshStatus(): Promise<void> {
  try {
    const s = await serverCommand<ServerStatus>('quickcode.status');
    if (s) { status = s; renderStatus(); }
  } catch (e) {
    output.debug(`quickcode.status failed: ${e}`);
  }
}

function renderStatus(): void {
  const p = presentStatus(status, { running: client?.state === State.Running || client?.state === State.Starting,
    enabled: get('enabled') !== false });
  statusItem.text = p.text;
  statusItem.tooltip = new vscode.MarkdownString(p.tooltip, true);
  statusItem.accessibilityInformation = { label: p.ariaLabel };
  statusItem.backgroundColor = p.state === 'disconnected'
    ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
}

function onConfigurationChanged(e: vscode.ConfigurationChangeEvent): void {
  if (!e.affectsConfiguration(SECTION)) return;
  if (needsRestart(s => e.affectsConfiguration(s))) {
    output.info('server settings changed: restarting the language server');
    void restart();
    return;
  }
  void pushSettings();
  renderStatus();
}

async function pushSettings(): Promise<void> {
  const settings = await currentSettings();
  if (client?.state === State.Running) {
    void client.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: settings } });
  }
}

/** The server's settings; the token is left out if it would go over plain ws:// to a host the user did not
 * agree to (asked once per host, remembered in the extension's global state). */
async function currentSettings(): Promise<Record<string, unknown>> {
  const settings = serverSettings(get, secretToken);
  let endpoints = endpointList(settings.endpoints);
  if (endpoints.length === 0) endpoints = endpointList(process.env.QUICKCODE_ENDPOINTS ?? '');
  if (endpoints.length === 0) endpoints = [DEFAULT_ENDPOINT];
  const agreed = extensionContext.globalState.get<string[]>(PLAIN_OK_KEY, []);
  const hasToken = typeof settings.token === 'string' || !!process.env.QUICKCODE_TOKEN;
  for (const host of plainTextTokenHosts(endpoints, hasToken)) {
    if (agreed.includes(host)) continue;
    const choice = await vscode.window.showWarningMessage(
      `quickcode: your API token would be sent UNENCRYPTED (ws://) to ${host}. Anyone on the network path could `
      + 'read it and use the backend as you, and read your code. Use a wss:// endpoint instead.',
      { modal: true }, 'Send anyway to this host', 'Do not send the token');
    if (choice !== 'Send anyway to this host') {
      output.warn(`not sending the API token over plain ws:// to ${host}`);
      return serverSettings(get, secretToken, true);
    }
    await extensionContext.globalState.update(PLAIN_OK_KEY, [...agreed, host]);
    agreed.push(host);
  }
  return settings;
}

async function setToken(): Promise<void> {
  const token = await vscode.window.showInputBox({
    title: 'quickcode API token', password: true, ignoreFocusOut: true,
    prompt: 'Kept in VS Code\'s secret storage (the OS keychain), not in settings.json. Empty: remove it.',
  });
  if (token === undefined) return;
  if (token.trim() === '') await extensionContext.secrets.delete(SECRET_KEY);
  else await extensionContext.secrets.store(SECRET_KEY, token.trim());
  void vscode.window.setStatusBarMessage(`quickcode: API token ${token.trim() ? 'stored' : 'removed'}`, 2000);
}

async function setEnabled(enabled: boolean): Promise<void> {
  // the setting is the source of truth (synchronized to the server); the server command applies it at once
  const target = vscode.workspace.workspaceFolders?.length && config().inspect('enabled')?.workspaceValue !== undefined
    ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
  await config().update('enabled', enabled, target);
  try { await serverCommand(enabled ? 'quickcode.enable' : 'quickcode.disable'); } catch { /* reported by the client */ }
  await refreshStatus();
  void vscode.window.setStatusBarMessage(`quickcode ${enabled ? 'enabled' : 'disabled'}`, 2000);
}

async function showLatencyReport(): Promise<void> {
  let report: string | undefined;
  try {
    report = await serverCommand<string>('quickcode.latencyReport');
  } catch (e) {
    report = `latency report failed: ${e}`;
  }
  const content = `# quickcode latency report\n\n${report ?? 'The language server is not running.'}\n`;
  output.info(content);
  const doc = await vscode.workspace.openTextDocument({ language: 'markdown', content });
  try {
    await vscode.commands.executeCommand('markdown.showPreview', doc.uri);
  } catch {
    await vscode.window.showTextDocument(doc, { preview: true });
  }
}

async function showStatus(): Promise<void> {
  await refreshStatus();
  const p = presentStatus(status, { running: client?.state === State.Running, enabled: get('enabled') !== false });
  output.info(`status: ${JSON.stringify(status ?? {})}`);
  void vscode.window.showInformationMessage(`${p.ariaLabel}${status?.endpoint ? ` — ${status.endpoint}` : ''}`);
}

async function showMenu(): Promise<void> {
  const enabled = get('enabled') !== false;
  const items: (vscode.QuickPickItem & { command: string })[] = [
    { label: enabled ? '$(circle-slash) Disable completions' : '$(zap) Enable completions', command: 'quickcode.toggle' },
    { label: '$(graph) Show latency report', command: 'quickcode.showLatencyReport' },
    { label: '$(info) Show status', command: 'quickcode.showStatus' },
    { label: '$(output) Show log', command: 'quickcode.showLog' },
    { label: '$(key) Set API token', command: 'quickcode.setToken' },
    { label: '$(debug-restart) Restart language server', command: 'quickcode.restartServer' },
    { label: '$(gear) Settings', command: 'workbench.action.openSettings' },
  ];
  const pick = await vscode.window.showQuickPick(items, { placeHolder: presentStatus(status,
    { running: client?.state === State.Running, enabled }).ariaLabel });
  if (pick) await vscode.commands.executeCommand(pick.command, ...(pick.command.startsWith('workbench') ? ['quickcode'] : []));
}

// ── Copilot-style telemetry (textDocument/didShowCompletion, textDocument/didPartiallyAcceptCompletion).
// VS Code tells an inline provider that an item was shown / partly accepted (Ctrl+→) only through the
// proposed API `inlineCompletionsAdditions`, which VS Code grants to an extension started with
// `--enable-proposed-api quickcode.quickcode` (or in development). When it is granted, the client's
// provider is replaced by one that does the same request and also reports these events; otherwise the
// stock vscode-languageclient provider stays, and full accepts are still reported by the item's command.

interface ProposedInlineProvider extends vscode.InlineCompletionItemProvider {
  handleDidShowCompletionItem?(item: vscode.InlineCompletionItem, updatedInsertText?: string): void;
  handleDidPartiallyAcceptCompletionItem?(item: vscode.InlineCompletionItem, info: number | { acceptedLength: number }): void;
}

function proposedInlineApiGranted(): boolean {
  try {
    const probe: ProposedInlineProvider = { provideInlineCompletionItems: () => [], handleDidShowCompletionItem: () => undefined };
    vscode.languages.registerInlineCompletionItemProvider({ scheme: 'quickcode-probe' }, probe).dispose();
    return true;
  } catch {
    return false;
  }
}

function installTelemetryProvider(c: LanguageClient): void {
  if (!c.initializeResult?.capabilities.inlineCompletionProvider || !proposedInlineApiGranted()) {
    output.info('inline completion: vscode-languageclient provider (accepts reported by the item command)');
    return;
  }
  const feature = c.getFeature(InlineCompletionRequest.method);
  feature?.clear();
  const origin = new WeakMap<vscode.InlineCompletionItem, ProtocolInlineItem>();
  const reported = new WeakMap<vscode.InlineCompletionItem, number>();
  const provider: ProposedInlineProvider = {
    provideInlineCompletionItems: async (document, position, context, token) => {
      const params = c.code2ProtocolConverter.asInlineCompletionParams(document, position, context);
      let result: lsp.InlineCompletionList | lsp.InlineCompletionItem[] | null;
      try {
        result = await c.sendRequest(InlineCompletionRequest.type, params, token);
      } catch (error) {
        return c.handleFailedRequest(InlineCompletionRequest.type, token, error, null);
      }
      if (token.isCancellationRequested || !result) return null;
      const lspItems = Array.isArray(result) ? result : result.items;
      const items = lspItems.map(item => {
        const converted = c.protocol2CodeConverter.asInlineCompletionItem(item);
        origin.set(converted, item as ProtocolInlineItem);
        return converted;
      });
      return new vscode.InlineCompletionList(items);
    },
    handleDidShowCompletionItem: (item) => {
      const lspItem = origin.get(item);
      if (lspItem) void c.sendNotification('textDocument/didShowCompletion', { item: lspItem });
    },
    // VS Code 1.100 calls this twice per partial accept (the number overload, then PartialAcceptInfo):
    // report each accepted length of an item once
    handleDidPartiallyAcceptCompletionItem: (item, info) => {
      const lspItem = origin.get(item);
      const length = typeof info === 'number' ? info : info?.acceptedLength;
      const params = lspItem && typeof length === 'number' ? partialAcceptParams(lspItem, length) : null;
      if (!params || reported.get(item) === params.acceptedLength) return;
      reported.set(item, params.acceptedLength);
      void c.sendNotification('textDocument/didPartiallyAcceptCompletion', params);
    },
  };
  clientDisposables.push(vscode.languages.registerInlineCompletionItemProvider(
    [{ scheme: 'file' }, { scheme: 'untitled' }], provider));
  output.info('inline completion: provider with didShow/didPartiallyAccept telemetry (proposed API granted)');
}
