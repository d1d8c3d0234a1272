// A real VS Code (code-server) in Debian's headless Chromium, driven one command at a time over stdin/stdout
// (one JSON object per line each way) — the editor of `quickcode bench vscode` (quickcode/benchmarks/vscode_typing.py),
// whose developer decides each key from the ghost text the editor shows. Commands:
//   {"op": "open", "file": "a.py"}      open a workspace file, cursor at its end, once the extension is connected
//   {"op": "key", "text": "x"}          type one key: a character, or "\n" + the next line's indentation
//   {"op": "backspace"} | {"op": "tab"} | {"op": "undo"}  press the key (undo: Ctrl+Z)
//   {"op": "ghost"}                     → {"ghost": "first line\nmore lines" | null}
//   {"op": "line"}                      → {"line": the text of the cursor's line, as rendered}
//   {"op": "nextEdit"}                  → {"nextEdit": {struck, preview, struck_line, preview_line, cursor_line} | null}:
//                                         the next edit shown (text struck through, the preview after its line;
//                                         lines are 1-based view lines)
//   {"op": "escape"}                    press Escape
//   {"op": "save"}                      Ctrl+S
//   {"op": "quit"}
// Every reply is {"ok": true, ...} or {"ok": false, "error": "..."}.
//   CS_URL=http://127.0.0.1:PORT WS=/abs/workspace node bridge_code_server.mjs
import { STATUS, launch, nbsp, openFile, readGhost } from './code_server_ui.mjs';
import readline from 'node:readline';

const url = process.env.CS_URL;
const ws = process.env.WS;
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const loadTimeoutMs = Number(process.env.LOAD_TIMEOUT_MS ?? 180000);

const browser = await launch(chromiumPath);
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
await page.goto(`${url}/?folder=${encodeURIComponent(ws)}`, { timeout: loadTimeoutMs });
await page.waitForSelector('.monaco-workbench', { timeout: loadTimeoutMs });
await page.waitForSelector(STATUS, { timeout: loadTimeoutMs });

async function open(file) {
  await openFile(page, file);
  await page.keyboard.press('Control+End');
  await page.waitForFunction(sel => document.querySelector(sel)?.getAttribute('aria-label')?.startsWith('quickcode connected'),
    STATUS, { timeout: 60000 });
}

async function ghost() {
  const { inline, more } = await readGhost(page);
  return inline || more.length ? nbsp([inline, ...more].join('\n')) : null;
}

async function cursorLine() {
  return nbsp(await page.evaluate(() => {
    const ed = document.querySelector('.monaco-editor.focused');
    const cur = ed?.querySelector('.view-overlays .current-line');
    if (!cur) return null;
    const top = cur.parentElement.style.top;
    const line = [...ed.querySelectorAll('.view-lines .view-line')].find(l => l.style.top === top);
    return line ? [...line.querySelectorAll('span > span')].filter(s => !s.className.includes('ghost-text'))
      .map(s => s.textContent).join('') : null;
  }));
}

// the next edit the extension shows (src/nextEdit.ts): its struck-through text and the `→ new text` after its line
async function nextEdit() {
  return page.evaluate(() => {
    const ed = document.querySelector('.monaco-editor.focused');
    if (!ed) return null;
    const lineHeight = parseFloat(getComputedStyle(ed.querySelector('.view-lines .view-line')).height);
    const scroll = ed.querySelector('.lines-content');
    const lineOf = (el) => {
      const row = el.closest('.view-line') ?? el.closest('.view-overlays > div');
      return row ? Math.round((parseFloat(row.style.top) - parseFloat(scroll?.style.top || 0)) / lineHeight) + 1 : null;
    };
    const spans = [...ed.querySelectorAll('.view-lines .view-line span')].filter(s => s.children.length === 0);
    const struckSpans = spans.filter(s => getComputedStyle(s).textDecorationLine.includes('line-through'));
    let preview = null, previewLine = null;
    for (const s of spans) {
      const after = getComputedStyle(s, '::after').content;
      const text = after && after !== 'none' && after !== 'normal' ? JSON.parse(after) : s.textContent;
      if (text.startsWith('→ ')) { preview = text.slice(2); previewLine = lineOf(s); break; }
    }
    if (preview === null && struckSpans.length === 0) return null;
    const cur = ed.querySelector('.view-overlays .current-line');
    return { struck: struckSpans.map(s => s.textContent).join(''), preview,
      struck_line: struckSpans.length ? lineOf(struckSpans[0]) : null, preview_line: previewLine,
      cursor_line: cur ? lineOf(cur) : null };
  }).then(r => r && { ...r, struck: nbsp(r.struck), preview: r.preview === null ? null : nbsp(r.preview) });
}

async function key(text) {
  if (text.startsWith('\n')) {
    await page.keyboard.press('Enter');
    if (text.length > 1) await page.keyboard.insertText(text.slice(1));
  } else {
    await page.keyboard.type(text);
  }
}

const ops = {
  open: c => open(c.file),
  key: c => key(c.text),
  backspace: () => page.keyboard.press('Backspace'),
  tab: () => page.keyboard.press('Tab'),
  undo: () => page.keyboard.press('Control+Z'),
  ghost: async () => ({ ghost: await ghost() }),
  line: async () => ({ line: await cursorLine() }),
  nextEdit: async () => ({ nextEdit: await nextEdit() }),
  escape: () => page.keyboard.press('Escape'),
  save: () => page.keyboard.press('Control+S'),
};

const reply = (o) => process.stdout.write(JSON.stringify(o) + '\n');
reply({ ok: true, ready: true });
for await (const raw of readline.createInterface({ input: process.stdin })) {
  const c = JSON.parse(raw);
  if (c.op === 'quit') break;
  try {
    reply({ ok: true, ...((await ops[c.op](c)) ?? {}) });
  } catch (e) {
    reply({ ok: false, error: String(e?.message ?? e) });
  }
}
await browser.close();
