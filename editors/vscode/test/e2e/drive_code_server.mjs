// Drive a real VS Code 1.100.3 (code-server 4.100.3) in Debian's headless Chromium with playwright-core:
// wait for the quickcode status-bar item, open a Python file, type like a user, wait for the ghost text
// (textDocument/inlineCompletion through vscode-languageclient), screenshot it, accept with Tab, save.
// Tries the given files in order until ghost text appears. Writes a JSON result.
// Used by tests/editors/test_vscode.py:
//   CS_URL=http://127.0.0.1:PORT WS=/abs/workspace ATTEMPTS='[{"file":"a.py","typed":"self"}]' \
//   SCREENSHOT=/abs/shot.png RESULT=/abs/result.json node drive_code_server.mjs
// and by scripts/screenshot_ghost_text.py (the README's picture); VIEWPORT=WIDTHxHEIGHT (default 1280x800).
import { STATUS, launch, nbsp, openFile, readGhost } from './code_server_ui.mjs';
import fs from 'node:fs';
import path from 'node:path';

const url = process.env.CS_URL ?? 'http://127.0.0.1:18080';
const ws = process.env.WS;
const attempts = JSON.parse(process.env.ATTEMPTS ?? '[]');
const screenshot = process.env.SCREENSHOT;
const resultPath = process.env.RESULT;
const ghostTimeoutMs = Number(process.env.GHOST_TIMEOUT_MS ?? 25000);
const loadTimeoutMs = Number(process.env.LOAD_TIMEOUT_MS ?? 180000);
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const [viewWidth, viewHeight] = (process.env.VIEWPORT ?? '1280x800').split('x').map(Number);

const t0 = Date.now();
const ms = () => Date.now() - t0;
const res = { timings_ms: {}, attempts: [], console_errors: [] };
const lap = (name) => { res.timings_ms[name] = ms(); };

async function statusLabel(page) {
  return page.$eval(STATUS, el => el.getAttribute('aria-label')).catch(() => null);
}

async function runCommand(page, title) {
  await page.keyboard.press('Escape');
  await page.keyboard.press('F1');
  await page.waitForSelector('.quick-input-widget:not([style*="display: none"]) input', { timeout: 20000 });
  await page.keyboard.type(title, { delay: 10 });
  await page.waitForSelector(`.quick-input-list .monaco-list-row[aria-label*="${title}"]`, { timeout: 20000 });
  await page.keyboard.press('Enter');
}

async function waitStatus(page, prefix) {
  return page.waitForFunction(([sel, p]) => document.querySelector(sel)?.getAttribute('aria-label')?.startsWith(p),
    [STATUS, prefix], { timeout: 20000 }).then(() => true).catch(() => false);
}

const browser = await launch(chromiumPath);
try {
  const page = await browser.newPage({ viewport: { width: viewWidth, height: viewHeight } });
  page.on('console', m => { if (m.type() === 'error') res.console_errors.push(m.text().slice(0, 300)); });
  await page.goto(`${url}/?folder=${encodeURIComponent(ws)}`, { timeout: loadTimeoutMs });
  await page.waitForSelector('.monaco-workbench', { timeout: loadTimeoutMs });
  lap('workbench');
  // the extension activates on startup: its status-bar item appears, then reports the connection
  await page.waitForSelector(STATUS, { timeout: loadTimeoutMs });
  lap('status_item');
  for (const attempt of attempts) {
    const a = { file: attempt.file, typed: attempt.typed };
    res.attempts.push(a);
    await openFile(page, attempt.file);
    await page.keyboard.press('Control+End');
    await page.waitForFunction(sel => document.querySelector(sel)?.getAttribute('aria-label')?.startsWith('quickcode connected'),
      STATUS, { timeout: 60000 });
    a.opened_ms = ms();
    const tType = Date.now();
    await page.keyboard.type(attempt.typed, { delay: 60 });
    try {
      await page.waitForSelector('.monaco-editor.focused .ghost-text-decoration', { timeout: ghostTimeoutMs });
    } catch {
      a.ghost = null;
      continue;
    }
    await page.waitForTimeout(300);          // let a multi-line view zone render
    const ghost = await readGhost(page);
    a.ghost_after_typing_ms = Date.now() - tType;
    a.ghost = { inline: nbsp(ghost.inline), more: ghost.more.map(nbsp) };
    if (!a.ghost.inline && a.ghost.more.length === 0) continue;
    if (screenshot) await page.screenshot({ path: screenshot });
    await page.keyboard.press('Tab');        // accept the inline suggestion
    await page.waitForTimeout(200);
    await page.keyboard.press('Control+S');
    const file = path.join(ws, attempt.file);
    const before = fs.readFileSync(file, 'utf8');
    const deadline = Date.now() + 10000;
    while (Date.now() < deadline && fs.readFileSync(file, 'utf8') === before) await page.waitForTimeout(100);
    a.file_after_accept = fs.readFileSync(file, 'utf8');
    a.accepted_ms = ms();
    res.accepted = a;
    break;
  }
  // latency shows in the status bar once a request was measured (the extension polls every 5 s)
  await page.waitForFunction(sel => /first chunk p50/.test(document.querySelector(sel)?.getAttribute('aria-label') ?? ''),
    STATUS, { timeout: 15000 }).catch(() => {});
  res.status_label = await statusLabel(page);
  res.status_text = await page.$eval(STATUS, el => el.textContent).catch(() => null);
  if (res.accepted) {
    // the extension's commands, from the command palette like a user
    res.commands = {};
    await runCommand(page, 'quickcode: Disable inline completions');
    res.commands.disabled = await waitStatus(page, 'quickcode disabled');
    await runCommand(page, 'quickcode: Enable inline completions');
    res.commands.enabled = await waitStatus(page, 'quickcode connected');
    await runCommand(page, 'quickcode: Show latency report');
    res.commands.latency_report = await page.waitForSelector('.tab[aria-label*="Preview"], .tab[aria-label*="Untitled"]',
      { timeout: 20000 }).then(el => el.getAttribute('aria-label')).catch(() => null);
    lap('commands');
  }
  if (!res.accepted && screenshot) await page.screenshot({ path: screenshot });
} catch (e) {
  res.error = String(e?.stack ?? e);
} finally {
  res.total_ms = ms();
  await browser.close();
  const out = JSON.stringify(res, null, 1);
  if (resultPath) fs.writeFileSync(resultPath, out);
  console.log(out);
}
