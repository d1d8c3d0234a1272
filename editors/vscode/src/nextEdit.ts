// Next-edit suggestions in VS Code (setting `quickcode.nextEdit`, off by default): after a change or a cursor
// move in the active editor the extension asks the server `textDocument/copilotInlineEdit` (the server waits
// for the pause itself and answers nothing if the document changes meanwhile; a newer ask cancels the older),
// and shows the edit where it goes, also away from the cursor: the text it replaces struck through and the new
// text after the target line. While one is shown the context key `quickcode.nextEditShown` is set, so Tab
// (package.json keybindings) applies it — only if the document is still at the version and the range still holds
// the text it was shown for — and Escape drops it; any change to the document drops it too.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { editPreview, editStillApplies, inlineEditFor, InlineEdit } from './logic';

export const INLINE_EDIT_METHOD = 'textDocument/copilotInlineEdit';
export const SHOWN_CONTEXT_KEY = 'quickcode.nextEditShown';

interface Shown {
  editor: vscode.TextEditor;
  range: vscode.Range;
  oldText: string;           // the text of `range` when the edit was shown
  edit: InlineEdit;
}

export class NextEdits implements vscode.Disposable {
  private shown: Shown | undefined;
  private asking: vscode.CancellationTokenSource | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly removed = vscode.window.createTextEditorDecorationType({
    textDecoration: 'line-through',
    backgroundColor: new vscode.ThemeColor('diffEditor.removedTextBackground'),
  });
  private readonly added = vscode.window.createTextEditorDecorationType({
    after: { color: new vscode.ThemeColor('editorGhostText.foreground'), margin: '0 0 0 2em' },
  });
  private readonly subscriptions: vscode.Disposable[];

  constructor(private readonly client: () => LanguageClient | undefined, private readonly on: () => boolean,
    private readonly log: vscode.LogOutputChannel) {
    this.subscriptions = [
      vscode.workspace.onDidChangeTextDocument(e => {
        if (this.shown && e.document === this.shown.editor.document && e.contentChanges.length > 0) this.clear();
        if (e.document === vscode.window.activeTextEditor?.document && e.contentChanges.length > 0) this.schedule();
      }),
      vscode.window.onDidChangeTextEditorSelection(e => {
        if (e.textEditor === vscode.window.activeTextEditor) this.schedule();
      }),
      vscode.window.onDidChangeActiveTextEditor(() => { this.clear(); this.schedule(); }),
      vscode.workspace.onDidChangeConfiguration(e => {
        if (e.affectsConfiguration('quickcode') && !this.on()) { this.cancelAsk(); this.clear(); }
      }),
      vscode.commands.registerCommand('quickcode.acceptNextEdit', () => this.accept()),
      vscode.commands.registerCommand('quickcode.dismissNextEdit', () => this.clear()),
    ];
  }

  dispose(): void {
    this.clear();
    this.cancelAsk();
    for (const d of this.subscriptions) d.dispose();
    this.removed.dispose();
    this.added.dispose();
  }

  /** Ask once the events of this keystroke are in (a change and its cursor move are one ask). */
  schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => { this.timer = undefined; void this.ask(); }, 0);
  }

  private cancelAsk(): void {
    this.asking?.cancel();
    this.asking?.dispose();
    this.asking = undefined;
  }

  private async ask(): Promise<void> {
    this.cancelAsk();
    const c = this.client();
    const editor = vscode.window.activeTextEditor;
    if (!c || !c.isRunning() || !editor || !this.on() || !editor.selection.isEmpty) {
      if (!this.on()) this.clear();
      return;
    }
    const doc = editor.document;
    const version = doc.version;
    const uri = c.code2ProtocolConverter.asUri(doc.uri);
    const source = new vscode.CancellationTokenSource();
    this.asking = source;
    let result: unknown;
    try {
      result = await c.sendRequest(INLINE_EDIT_METHOD, {
        textDocument: { uri, version }, position: c.code2ProtocolConverter.asPosition(editor.selection.active),
      }, source.token);
    } catch (e) {
      if (!source.token.isCancellationRequested) this.log.debug(`${INLINE_EDIT_METHOD} failed: ${e}`);
      return;
    }
    if (source.token.isCancellationRequested || this.asking !== source) return;
    this.asking = undefined;
    source.dispose();
    const edit = inlineEditFor(result, uri);
    if (vscode.window.activeTextEditor !== editor || doc.version !== version) return;   // moved on meanwhile
    if (!edit || edit.version !== version) { this.clear(); return; }
    await this.show(editor, edit);
  }

  private async show(editor: vscode.TextEditor, edit: InlineEdit): Promise<void> {
    const doc = editor.document;
    const range = doc.validateRange(new vscode.Range(edit.range.start.line, edit.range.start.character,
      edit.range.end.line, edit.range.end.character));
    const oldText = doc.getText(range);
    if (oldText === edit.text) { this.clear(); return; }
    this.clear();
    const shown = { editor, range, oldText, edit };
    this.shown = shown;
    // Tab is bound before the edit is drawn: a Tab the moment it appears applies it, never types a tab
    // (accept() types the plain tab itself when nothing applies)
    await vscode.commands.executeCommand('setContext', SHOWN_CONTEXT_KEY, true);
    if (this.shown !== shown) return;              // typed or dismissed meanwhile
    const hover = new vscode.MarkdownString('quickcode next edit: **Tab** applies, **Escape** dismisses');
    editor.setDecorations(this.removed, range.isEmpty ? [] : [{ range, hoverMessage: hover }]);
    const lineEnd = doc.lineAt(range.end.line).range.end;
    editor.setDecorations(this.added, [{
      range: new vscode.Range(lineEnd, lineEnd), hoverMessage: hover,
      renderOptions: { after: { contentText: `→ ${editPreview(edit.text)}` } },
    }]);
  }

  clear(): void {
    const s = this.shown;
    this.shown = undefined;
    if (!s) return;
    s.editor.setDecorations(this.removed, []);
    s.editor.setDecorations(this.added, []);
    void vscode.commands.executeCommand('setContext', SHOWN_CONTEXT_KEY, false);
  }

  /** Tab: apply the shown edit if it still applies to the document as it is; else Tab's own meaning. */
  async accept(): Promise<void> {
    const s = this.shown;
    const editor = vscode.window.activeTextEditor;
    this.clear();
    if (!s || editor !== s.editor || !editStillApplies({ version: s.edit.version, oldText: s.oldText },
      { version: editor.document.version, textInRange: editor.document.getText(s.range) })) {
      await vscode.commands.executeCommand('tab');
      return;
    }
    const doc = editor.document;
    const start = doc.offsetAt(s.range.start);
    const applied = await editor.edit(b => b.replace(s.range, s.edit.text));
    if (!applied) return;
    const end = doc.positionAt(start + s.edit.text.length);
    editor.selection = new vscode.Selection(end, end);
    editor.revealRange(new vscode.Range(end, end));
    const cmd = s.edit.command;
    if (cmd) {
      try {
        await vscode.commands.executeCommand(cmd.command, ...(cmd.arguments ?? []));
      } catch (e) {
        this.log.debug(`${cmd.command} failed: ${e}`);
      }
    }
  }
}
