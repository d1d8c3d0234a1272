// What the drivers of a real VS Code (code-server in headless Chromium, playwright-core) share:
// drive_code_server.mjs (tests/editors/test_vscode.py) and bridge_code_server.mjs (quickcode bench vscode).
import { chromium } from 'playwright-core';

export const STATUS = '[aria-label^="quickcode "]';
export const nbsp = (s) => (s ?? '').replace(/\u00a0/g, ' ');

export function launch(chromiumPath) {
  return chromium.launch({
    executablePath: chromiumPath, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

export async function openFile(page, file) {
  // Quick Open (Ctrl+P) is independent of the Explorer's state
  await page.keyboard.press('Control+P');
  await page.waitForSelector('.quick-input-widget:not([style*="display: none"]) input', { timeout: 20000 });
  await page.keyboard.type(file, { delay: 20 });
  await page.waitForSelector(`.quick-input-list .monaco-list-row[aria-label*="${file}"]`, { timeout: 20000 });
  await page.keyboard.press('Enter');
  await page.waitForSelector(`.tab.active[aria-label*="${file}"]`, { timeout: 20000 });
  await page.waitForSelector('.monaco-editor.focused .view-lines', { timeout: 20000 });
}

export async function readGhost(page) {
  return page.evaluate(() => {
    const inline = [...document.querySelectorAll('.monaco-editor.focused .ghost-text-decoration')]
      .map(e => e.textContent).join('');
    // lines after the first are rendered in a view zone below the cursor line (VS Code 1.100:
    // .view-zones > [monaco-view-zone] > .suggest-preview-text > .view-line > span > span.ghost-text)
    const more = [...document.querySelectorAll('.monaco-editor.focused .suggest-preview-text .view-line')]
      .map(e => e.textContent);
    return { inline, more };
  });
}
