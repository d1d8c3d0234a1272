// Pure logic of the extension (src/logic.ts, bundled to dist/logic.mjs by `npm test`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  serverSettings, serverLaunch, presentStatus, partialAcceptParams, needsRestart, retriggerFor, userLevelGetter,
  plainTextTokenHosts, USER_LEVEL_KEYS, nextEditOn, inlineEditFor, editPreview, editStillApplies,
} from '../dist/logic.mjs';

const getter = (obj) => (key) => obj[key];

test('serverSettings forwards known keys and leaves out empty endpoints/token', () => {
  const s = serverSettings(getter({
    endpoints: [], token: '', enabled: true, languages: { '*': true, markdown: false },
    debounceMs: 40, maxTokens: 32, deadlineMs: 900, multilineMaxLines: 4, suggestionUnit: 'line',
    'server.command': 'x',
  }));
  assert.deepEqual(s, { enabled: true, languages: { '*': true, markdown: false }, debounceMs: 40, maxTokens: 32,
    deadlineMs: 900, multilineMaxLines: 4, suggestionUnit: 'line' });
  assert.ok(!('endpoints' in s) && !('token' in s), 'empty values must not override the server environment');
});

test('serverSettings: endpoints as list or comma string, token, advanced merged last', () => {
  assert.deepEqual(serverSettings(getter({ endpoints: [' ws://a/v1/ws ', '', 'ws://b/v1/ws'], token: 't' })),
    { endpoints: ['ws://a/v1/ws', 'ws://b/v1/ws'], token: 't' });
  assert.deepEqual(serverSettings(getter({ endpoints: 'ws://a/v1/ws, ws://b/v1/ws' })),
    { endpoints: ['ws://a/v1/ws', 'ws://b/v1/ws'] });
  assert.deepEqual(serverSettings(getter({ maxTokens: 8, advanced: { prefetch: false, maxTokens: 16 } })),
    { maxTokens: 16, prefetch: false });
  assert.deepEqual(serverSettings(getter({ languages: 'python' })), {}, 'a malformed languages value is dropped');
});

test('serverLaunch: default command, args, env and log file', () => {
  const d = serverLaunch(getter({}), { PATH: '/bin', UNSET: undefined });
  assert.deepEqual(d, { command: 'quickcode', args: ['lsp'], env: { PATH: '/bin' } });
  const c = serverLaunch(getter({ 'server.command': '/opt/qc/bin/quickcode', 'server.args': ['lsp', '--log-level', 'debug'],
    'server.env': { A: '1' }, 'server.logFile': '/tmp/qc.log' }), {});
  assert.deepEqual(c, { command: '/opt/qc/bin/quickcode', args: ['lsp', '--log-level', 'debug'],
    env: { A: '1', QUICKCODE_LSP_LOG: '/tmp/qc.log' } });
});

test('needsRestart only for the server section', () => {
  assert.equal(needsRestart(s => s === 'quickcode.server'), true);
  assert.equal(needsRestart(s => s === 'quickcode.maxTokens'), false);
});

test('presentStatus states and latency', () => {
  assert.equal(presentStatus(undefined, { running: false, enabled: true }).state, 'stopped');
  assert.equal(presentStatus(undefined, { running: true, enabled: true }).state, 'starting');
  const c = presentStatus({ connected: true, endpoint: 'ws://x/v1/ws', recent_first_chunk_ms_p50: 87.4, acceptance_rate: 0.25 },
    { running: true, enabled: true });
  assert.equal(c.state, 'connected');
  assert.equal(c.text, '$(zap) quickcode 87 ms');
  assert.equal(c.ariaLabel, 'quickcode connected, first chunk p50 87 ms');
  assert.match(c.tooltip, /acceptance: 25 %/);
  const d = presentStatus({ connected: false, last_error: 'refused' }, { running: true, enabled: true });
  assert.equal(d.state, 'disconnected');
  assert.match(d.tooltip, /refused/);
  assert.equal(presentStatus({ connected: true, enabled: false }, { running: true, enabled: true }).state, 'disabled');
  assert.equal(presentStatus({ connected: true }, { running: true, enabled: false }).state, 'disabled');
});

test('partialAcceptParams clamps to the item text', () => {
  const item = { insertText: 'return a + b', command: { title: '', command: 'quickcode.accept', arguments: [{ id: 'x', chars: 12 }] } };
  assert.deepEqual(partialAcceptParams(item, 6), { item, acceptedLength: 6 });
  assert.equal(partialAcceptParams(item, 99).acceptedLength, 12);
  assert.equal(partialAcceptParams(item, 0), null);
  assert.equal(partialAcceptParams({ insertText: { kind: 'snippet', value: 'ab' } }, 5).acceptedLength, 2);
});

test('retriggerFor: only for the document and place the cursor is at, with no selection', () => {
  const p = { textDocument: { uri: 'file:///a.py' }, position: { line: 3, character: 8 } };
  assert.equal(retriggerFor(p, 'file:///a.py', { line: 3, character: 8 }, true), true);
  assert.equal(retriggerFor(p, 'file:///b.py', { line: 3, character: 8 }, true), false);
  assert.equal(retriggerFor(p, 'file:///a.py', { line: 3, character: 9 }, true), false);
  assert.equal(retriggerFor(p, 'file:///a.py', { line: 3, character: 8 }, false), false);
  assert.equal(retriggerFor(undefined, 'file:///a.py', { line: 3, character: 8 }, true), false);
});

// ── a repository's .vscode/settings.json must not redirect the user's code and token

test('package.json: endpoints, token, advanced and server.* are machine-scoped (no workspace value)', () => {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url)));
  const props = pkg.contributes.configuration.properties;
  for (const key of USER_LEVEL_KEYS) {
    assert.ok(['machine', 'application'].includes(props[`quickcode.${key}`].scope), key);
  }
  assert.ok(pkg.contributes.commands.some(c => c.command === 'quickcode.setToken'));
});

test('workspace-level endpoints, token and advanced are ignored; the user\'s own count', () => {
  // what VS Code's inspect() returns when a cloned repository's .vscode/settings.json sets them
  const hostile = {
    endpoints: { defaultValue: [], workspaceValue: ['ws://evil.example:80/v1/ws'] },
    token: { defaultValue: '', workspaceFolderValue: 'qc_attacker' },
    advanced: { defaultValue: {}, workspaceValue: { endpoints: ['ws://evil.example/v1/ws'], token: 'x' } },
    'server.command': { defaultValue: 'quickcode', workspaceValue: '/tmp/evil' },
    maxTokens: { defaultValue: 64, workspaceValue: 16 },
  };
  const merged = { endpoints: ['ws://evil.example:80/v1/ws'], token: 'qc_attacker', maxTokens: 16,
    advanced: { endpoints: ['ws://evil.example/v1/ws'], token: 'x' }, 'server.command': '/tmp/evil' };
  const get = userLevelGetter(k => merged[k], k => hostile[k]);
  assert.deepEqual(serverSettings(get), { maxTokens: 16 }, 'only the harmless workspace value is kept');
  assert.equal(get('server.command'), 'quickcode');
  const user = { ...hostile, endpoints: { ...hostile.endpoints, globalValue: ['wss://mine.example/v1/ws'] } };
  assert.deepEqual(serverSettings(userLevelGetter(k => merged[k], k => user[k]), 'qc_secret'),
    { endpoints: ['wss://mine.example/v1/ws'], token: 'qc_secret', maxTokens: 16 });
});

test('the token from secret storage wins; a withheld token is never sent', () => {
  assert.equal(serverSettings(getter({ token: 'qc_setting' }), 'qc_secret').token, 'qc_secret');
  assert.equal(serverSettings(getter({ token: 'qc_setting' })).token, 'qc_setting');
  assert.ok(!('token' in serverSettings(getter({ token: 'qc_setting', advanced: { token: 'y' } }), 'qc_secret', true)));
});

test('plain ws:// to a non-loopback host with a token is flagged; wss:// and loopback are not', () => {
  const eps = ['ws://127.0.0.1:8765/v1/ws', 'ws://localhost/v1/ws', 'ws://[::1]:1/v1/ws', 'wss://a.example/v1/ws',
    'ws://10.0.0.5:8765/v1/ws', 'ws://b.example/v1/ws', 'ws://b.example/v1/ws', 'not a url'];
  assert.deepEqual(plainTextTokenHosts(eps, true), ['10.0.0.5:8765', 'b.example']);
  assert.deepEqual(plainTextTokenHosts(eps, false), []);
});

// ── next edits

test('nextEdit is off by default, on through the setting or advanced, never while disabled', () => {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url)));
  assert.equal(pkg.contributes.configuration.properties['quickcode.nextEdit'].default, false);
  assert.equal(nextEditOn(serverSettings(getter({}))), false);
  assert.equal(nextEditOn(serverSettings(getter({ nextEdit: true }))), true);
  assert.equal(serverSettings(getter({ nextEdit: true })).nextEdit, true, 'forwarded to the server');
  assert.equal(nextEditOn(serverSettings(getter({ advanced: { nextEdit: true } }))), true);
  assert.equal(nextEditOn(serverSettings(getter({ nextEdit: true, enabled: false }))), false);
  // Tab applies an edit only while one is shown, and never over ghost text or the suggest widget
  const tab = pkg.contributes.keybindings.find(k => k.key === 'tab');
  assert.equal(tab.command, 'quickcode.acceptNextEdit');
  assert.match(tab.when, /^quickcode\.nextEditShown && /);
  assert.match(tab.when, /!inlineSuggestionVisible/);
  assert.match(tab.when, /!suggestWidgetVisible/);
});

test('inlineEditFor takes a well-formed edit for the document and nothing else', () => {
  const uri = 'file:///a.py';
  const good = { range: { start: { line: 1, character: 14 }, end: { line: 1, character: 15 } }, text: '*',
    textDocument: { uri, version: 3 }, command: { title: '', command: 'quickcode.accept', arguments: [{ id: 'e1' }] } };
  assert.deepEqual(inlineEditFor({ edits: [good] }, uri),
    { range: good.range, text: '*', version: 3, command: good.command });
  assert.equal(inlineEditFor({ edits: [] }, uri), null);
  assert.equal(inlineEditFor(null, uri), null);
  assert.equal(inlineEditFor({ edits: [good] }, 'file:///b.py'), null, 'another document');
  const bad = [
    { ...good, text: 7 }, { ...good, text: 'x'.repeat(20001) }, { ...good, range: null },
    { ...good, range: { start: { line: -1, character: 0 }, end: { line: 1, character: 0 } } },
    { ...good, range: { start: { line: 2, character: 0 }, end: { line: 1, character: 0 } } },
    { ...good, range: { start: { line: 1, character: 1.5 }, end: { line: 1, character: 2 } } },
    { ...good, textDocument: { uri } }, { ...good, range: { start: good.range.start, end: good.range.start }, text: '' },
  ];
  for (const e of bad) assert.equal(inlineEditFor({ edits: [e] }, uri), null, JSON.stringify(e).slice(0, 80));
  assert.equal(inlineEditFor({ edits: [...bad, good] }, uri).text, '*', 'the first well-formed one');
  assert.equal(inlineEditFor({ edits: [{ ...good, command: 'x' }] }, uri).command, undefined);
});

test('editPreview is one line, bounded; editStillApplies needs the same version and text', () => {
  assert.equal(editPreview('a * b'), 'a * b');
  assert.equal(editPreview('x = 1\ny = 2\n'), 'x = 1 ⏎ y = 2 ⏎ ');
  assert.equal(editPreview(''), '(delete)');
  assert.equal(editPreview('y'.repeat(500)).length, 120);
  assert.equal(editStillApplies({ version: 3, oldText: '+' }, { version: 3, textInRange: '+' }), true);
  assert.equal(editStillApplies({ version: 3, oldText: '+' }, { version: 4, textInRange: '+' }), false);
  assert.equal(editStillApplies({ version: 3, oldText: '+' }, { version: 3, textInRange: '-' }), false);
});
