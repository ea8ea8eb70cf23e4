// node reference_page.js URL SCREENSHOT.png: opens URL in headless Chromium (Debian's package,
// driven by playwright-core: no browser download), waits until Redoc has rendered its side menu,
// saves a screenshot and prints on stdout, as one JSON object, what a person's browser saw:
//   status, headers           the page's own answer
//   menuTags                  the tag entries of the rendered navigation (Redoc's data-item-id
//                             "tag/<name>") and menuLabels, the text of those that are displayed
//   requests                  every URL the page asked for (its scripts, the document, workers)
//   failedRequests            those that failed, with why
//   consoleErrors, pageErrors what the page logged as errors (CSP violations are among them),
//                             and uncaught exceptions
//   violations                securitypolicyviolation events (the CSP's own report)
// The test (test_reference_page.py) decides what is right; this only looks.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const [url, screenshot] = process.argv.slice(2);
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
// As root in a closed network: no sandbox, and nothing of Chromium's own reaching out (its
// background fetches would be refused, and would show up among the page's requests).
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

async function main() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'coachd-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, args: FLAGS,
    viewport: { width: 1440, height: 900 },
  });
  const out = { requests: [], failedRequests: [], consoleErrors: [], pageErrors: [] };
  try {
    // Reports CSP violations from inside the page (an init script is not subject to the CSP).
    await context.addInitScript(() => {
      window.__violations = [];
      document.addEventListener('securitypolicyviolation', (e) => {
        window.__violations.push(`${e.violatedDirective} blocked ${e.blockedURI}`);
      });
    });
    context.on('request', (r) => out.requests.push(r.url()));
    context.on('requestfailed', (r) => out.failedRequests.push(`${r.url()}: ${r.failure()?.errorText}`));
    const page = context.pages()[0] || await context.newPage();
    page.on('console', (m) => { if (m.type() === 'error') out.consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => out.pageErrors.push(String(e)));

    const resp = await page.goto(url, { waitUntil: 'load', timeout: 30000 });
    out.status = resp.status();
    out.headers = await resp.allHeaders();
    await page.waitForSelector('[data-item-id^="tag/"]', { timeout: 30000 });
    await page.waitForLoadState('networkidle', { timeout: 30000 });
    const menu = await page.$$eval('.menu-content [data-item-id^="tag/"]', (els) => els.map((e) => ({
      // The entry's own label (its operations are nested inside the same item).
      id: e.getAttribute('data-item-id'), label: e.querySelector(':scope > label').textContent.trim(),
      visible: e.checkVisibility(),
    })));
    out.menuTags = menu.map((m) => m.id.slice('tag/'.length));
    out.menuLabels = menu.filter((m) => m.visible).map((m) => m.label);
    out.title = await page.title();
    out.violations = await page.evaluate(() => window.__violations);
    fs.mkdirSync(path.dirname(screenshot), { recursive: true });
    await page.screenshot({ path: screenshot });
    out.screenshot = screenshot;
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => { console.error(e && e.stack || e); process.exit(1); });
