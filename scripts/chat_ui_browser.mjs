// Drives agent-chat-ui in headless Chromium (puppeteer-core with the system browser, nothing
// downloaded) through one scenario per graph; run by scripts/chat_ui_test.py, which starts the
// servers and passes a JSON config as argv[2]:
// {clientDir, uiUrl, apiUrl, chromium, outDir, scenarios: [{name, assistant, message, steps}]}
// A step: {waitText}, {click: "button text"}, {fill: {label, find, replace} | {label, text}},
// {send: "a chat message"}, {waitCard: "CSS selector inside a generative-UI card"},
// {shot: "name"} (a screenshot <outDir>/<name>.png taken while the run still goes on; fails if it is over,
// unless the step says running: false), {reload: true}, {absentText: "text"}. Each scenario ends with a full-page screenshot <outDir>/<name>.png.
import { createRequire } from "node:module";
import * as fs from "node:fs";
import * as path from "node:path";

const config = JSON.parse(process.argv[2]);
const require = createRequire(path.join(config.clientDir, "package.json"));
const puppeteer = require("puppeteer-core");

const TIMEOUT = 180_000;

async function waitText(page, text) {
  await page.waitForFunction((t) => document.body.innerText.includes(t), { timeout: TIMEOUT }, text);
}

// A generative-UI card: agent-chat-ui renders each in a shadow root (polled: changes inside a
// shadow root do not wake selector waits on the page).
async function waitCard(page, selector) {
  await page.waitForFunction(
    (sel) => [...document.querySelectorAll('[id^="child-shadow"]')].some((d) => d.shadowRoot?.querySelector(sel)),
    { timeout: TIMEOUT, polling: 500 },
    selector,
  );
}

async function runOver(page) {
  await page.waitForFunction(
    () => ![...document.querySelectorAll("button")].some((b) => b.innerText.trim() === "Cancel"),
    { timeout: TIMEOUT },
  );
}

async function clickButton(page, text) {
  await page.waitForFunction(
    (t) => [...document.querySelectorAll("button")].some((b) => b.innerText.trim() === t && !b.disabled),
    { timeout: TIMEOUT },
    text,
  );
  await page.evaluate((t) => {
    const buttons = [...document.querySelectorAll("button")].filter((b) => b.innerText.trim() === t && !b.disabled);
    buttons[buttons.length - 1].click();
  }, text);
}

// The textarea that follows a label (agent-chat-ui's edit/reject cards: a <p> label, then a textarea).
async function fill(page, { label, find, replace, text }) {
  await page.waitForFunction(
    (l) => [...document.querySelectorAll("p")].some((p) => p.innerText.trim() === l),
    { timeout: TIMEOUT },
    label,
  );
  // The form is reset when the thread's state arrives again: fill it once the run has ended.
  await runOver(page);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const handle = await page.evaluateHandle((l) => {
    const p = [...document.querySelectorAll("p")].filter((p) => p.innerText.trim() === l).pop();
    return p.parentElement.querySelector("textarea") ?? p.parentElement.parentElement.querySelector("textarea");
  }, label);
  const current = await page.evaluate((el) => el.value, handle);
  const next = text ?? current.replace(find, replace);
  // Set the value the way React sees typing (its onChange listens to input events).
  await page.evaluate(
    (el, value) => {
      Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, "value").set.call(el, value);
      el.dispatchEvent(new Event("input", { bubbles: true }));
    },
    handle,
    next,
  );
  await page.waitForFunction((el, value) => el.value === value, { timeout: 10_000 }, handle, next);
}

// Steps of the Stop and failed-run scenarios: {reload: true} reloads the page (the thread's id is
// in its URL) and waits for it to settle; {absentText: "..."} fails if the text is on the page
// once it has settled (a few seconds after the last step).
async function reloadOrAbsent(page, step) {
  if (step.reload) {
    await page.reload({ waitUntil: "networkidle2", timeout: TIMEOUT });
  }
  if (step.absentText) {
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const present = await page.evaluate((t) => document.body.innerText.includes(t), step.absentText);
    if (present) throw new Error(`"${step.absentText}" is on the page`);
  }
}

async function send(page, message) {
  const input = 'textarea[placeholder="Type your message..."]';
  await page.waitForSelector(input, { timeout: TIMEOUT });
  await page.type(input, message, { delay: 2 });
  await page.keyboard.press("Enter");
}

const browser = await puppeteer.launch({
  executablePath: config.chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const results = [];
try {
  for (const scenario of config.scenarios.filter((s) => !config.only || config.only.includes(s.name))) {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 1400 });
    const logs = [];
    page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
    page.on("requestfailed", (r) => logs.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`));
    page.on("response", (r) => {
      if (r.status() >= 400 || r.url().includes("/ui/")) logs.push(`response: ${r.status()} ${r.request().method()} ${r.url()}`);
    });
    const url = `${config.uiUrl}/?apiUrl=${encodeURIComponent(config.apiUrl)}&assistantId=${encodeURIComponent(scenario.assistant)}&chatHistoryOpen=false`;
    const started = Date.now();
    let error = null;
    try {
      await page.goto(url, { waitUntil: "networkidle2", timeout: TIMEOUT });
      await send(page, scenario.message);
      for (const step of scenario.steps) {
        if (step.waitText) await waitText(page, step.waitText);
        if (step.waitCard) await waitCard(page, step.waitCard);
        if (step.fill) await fill(page, step.fill);
        if (step.click) await clickButton(page, step.click);
        if (step.send) await send(page, step.send);
        if (step.reload || step.absentText) await reloadOrAbsent(page, step);
        if (step.shot) {
          const running = await page.evaluate(() =>
            [...document.querySelectorAll("button")].some((b) => b.innerText.trim() === "Cancel"),
          );
          await page.screenshot({ path: path.join(config.outDir, `${step.shot}.png`), fullPage: true });
          if (!running && step.running !== false) throw new Error(`${step.shot}: the run was already over`);
        }
      }
      // The run is over when the input's Cancel button is gone: the end state, cards attached.
      await runOver(page);
    } catch (exc) {
      error = String(exc);
    }
    const cards = await page.evaluate(() =>
      [...document.querySelectorAll('[id^="child-shadow"]')].map((d) => (d.shadowRoot?.innerHTML ?? "(no shadow root)").slice(0, 300)),
    );
    logs.push(`generative-UI cards on the page: ${cards.length}\n${cards.join("\n")}`);
    const shot = path.join(config.outDir, `${scenario.name}.png`);
    await page.screenshot({ path: shot, fullPage: true });
    fs.writeFileSync(path.join(config.outDir, `${scenario.name}.console.log`), logs.join("\n"));
    results.push({ name: scenario.name, ok: error === null, error, screenshot: shot, seconds: (Date.now() - started) / 1000 });
    console.log(`${error === null ? "ok  " : "FAIL"} ${scenario.name}${error ? `: ${error}` : ""} -> ${shot}`);
    await page.close();
  }
} finally {
  await browser.close();
}
fs.writeFileSync(path.join(config.outDir, "results.json"), JSON.stringify(results, null, 2));
process.exit(results.every((r) => r.ok) ? 0 : 1);
