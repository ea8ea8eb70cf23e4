// node dev_pages.js PLAN.json: runs the flows of PLAN (a JSON list) in one headless Chromium
// (Debian's package, driven by playwright-core: no browser download), three at a time, each flow
// in a fresh browser context (its own cookies), and prints on stdout one JSON object per flow, in a list:
//   name, url             the flow's name and the URL its page ended on
//   ms, steps             how long the flow took, and each step that succeeded (milliseconds)
//   values                what its steps recorded (text of an element, an attribute)
//   error                 the first step that failed (a selector that never appeared), and
//                         text, the page's text at that moment
//   requests              every request of the flow (method and URL)
//   consoleErrors, pageErrors  what the pages logged as errors (CSP violations are among
//                         them), and uncaught exceptions
//   violations            securitypolicyviolation events (the CSP's own report)
// A flow: {"name", "steps": [...]}, each step one of
//   {"goto": URL}  {"fill": SELECTOR, "value": V}  {"click": SELECTOR}
//   {"wait": SELECTOR[, "timeout": MS]}  (visible; by default within 10 s)
//   {"text": SELECTOR, "as": KEY}  {"attr": SELECTOR, "name": ATTRIBUTE, "as": KEY}
//   {"screenshot": PATH}
// The test (test_dev_pages.py) decides what is right; this only drives and looks.
'use strict';
const fs = require('fs');
const { chromium } = require('playwright-core');

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
// As root in a closed network: no sandbox, and nothing of Chromium's own reaching out.
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const STEP_TIMEOUT = 10000;
const PARALLEL = 3;

async function runFlow(browser, flow) {
  const started = Date.now();
  const out = {
    name: flow.name, values: {}, steps: [], requests: [], consoleErrors: [], pageErrors: [], violations: [],
  };
  const context = await browser.newContext({ viewport: { width: 900, height: 760 } });
  try {
    await context.addInitScript(() => {
      window.__violations = [];
      document.addEventListener('securitypolicyviolation', (e) => {
        window.__violations.push(`${e.violatedDirective} blocked ${e.blockedURI}`);
      });
    });
    context.on('request', (r) => out.requests.push(`${r.method()} ${r.url()}`));
    const page = await context.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT);
    page.on('console', (m) => { if (m.type() === 'error') out.consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => out.pageErrors.push(String(e)));
    // Violations are kept per document: collected before each navigation and at the end.
    const collect = async () => {
      try {
        out.violations.push(...await page.evaluate(() => window.__violations || []));
      } catch (e) { /* no document yet */ }
    };
    for (const [i, step] of flow.steps.entries()) {
      const t = Date.now();
      try {
        if ('goto' in step) {
          await collect();
          await page.goto(step.goto, { waitUntil: 'load' });
        } else if ('fill' in step) {
          await page.fill(step.fill, step.value);
        } else if ('click' in step) {
          await page.click(step.click);
        } else if ('wait' in step) {
          await page.waitForSelector(step.wait, { state: 'visible', timeout: step.timeout });
        } else if ('text' in step) {
          out.values[step.as] = (await page.textContent(step.text)).trim();
        } else if ('attr' in step) {
          out.values[step.as] = await page.getAttribute(step.attr, step.name);
        } else if ('screenshot' in step) {
          await page.screenshot({ path: step.screenshot, fullPage: true });
        } else {
          throw new Error(`unknown step ${JSON.stringify(step)}`);
        }
      } catch (e) {
        out.error = `step ${i} ${JSON.stringify(step)}: ${String(e).split('\n')[0]}`;
        out.text = await page.evaluate(() => document.body && document.body.innerText).catch(() => null);
        break;
      }
      out.steps.push(Date.now() - t);
    }
    await collect();
    out.url = page.url();
  } finally {
    await context.close();
  }
  out.ms = Date.now() - started;
  return out;
}

async function main() {
  const plan = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
  const results = new Array(plan.length);
  try {
    // The flows are independent (each its own accounts and cookies): PARALLEL of them run side
    // by side (more would only share the same few CPUs).
    let next = 0;
    const lane = async () => {
      while (next < plan.length) {
        const i = next++;
        results[i] = await runFlow(browser, plan[i]);
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, lane));
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(results) + '\n');
}

main().catch((e) => { console.error(e && e.stack || e); process.exit(1); });
