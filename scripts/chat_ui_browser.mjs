// Drives agent-chat-ui in headless Chromium (puppeteer-core with the system browser, nothing
// downloaded) through one scenario per graph; run by scripts/chat_ui_test.py, which starts the
// servers and passes a JSON config as argv[2]:
// {clientDir, uiUrl, apiUrl, chromium, outDir, scenarios: [{name, assistant, message, steps, passthrough?}]}
// A step: {waitText}, {click: "button text"}, {fill: {label, find, replace} | {label, text}},
// {send: "a chat message"}, {waitCard: "CSS selector inside a generative-UI card"},
// {shot: "name"} (a screenshot <outDir>/<name>.png taken while the run still goes on; fails if it is over),
// {still: "name"} (a screenshot at any time), {cardText: "text inside a card"},
// {fieldHas: {label, text}} (the form field under a label holds the text, as it is),
// {visible: "button text"} (a button shown now, nothing toggled), {gone: "button text"} (the
// button disappears: e.g. the paused run's form), {below: "answer text"} (at the end, the answer
// sits below every card, as it streamed), {noCard: "CSS selector"} (no card has it, at the end).
// {shot: ..., running: false} (a screenshot whether or not the run goes on), {reload: true}, {absentText: "text"}.
// Each scenario ends with a full-page screenshot <outDir>/<name>.png.
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

async function cardText(page, text) {
  await page.waitForFunction(
    (t) => [...document.querySelectorAll('[id^="child-shadow"]')].some((d) => d.shadowRoot?.textContent.includes(t)),
    { timeout: TIMEOUT, polling: 500 },
    text,
  );
}

async function fieldHas(page, { label, text }) {
  await page.waitForFunction(
    (l, t) =>
      [...document.querySelectorAll("p")]
        .filter((p) => p.innerText.trim() === l)
        .some((p) => (p.parentElement.querySelector("textarea")?.value ?? "").includes(t)),
    { timeout: TIMEOUT },
    label,
    text,
  );
}

async function visible(page, text) {
  await page.waitForFunction(
    (t) =>
      [...document.querySelectorAll("button")].some((b) => {
        const r = b.getBoundingClientRect();
        return b.innerText.trim() === t && r.width > 0 && r.height > 0 && !b.disabled;
      }),
    { timeout: TIMEOUT },
    text,
  );
}

async function gone(page, text) {
  await page.waitForFunction((t) => ![...document.querySelectorAll("button")].some((b) => b.innerText.trim() === t), {
    timeout: 60_000,
  }, text);
}

// The answer's top edge below the bottom edge of every card: the text did not jump above them.
async function below(page, text) {
  await waitText(page, text);
  await runOver(page);
  await new Promise((resolve) => setTimeout(resolve, 2000)); // the thread's final state has arrived
  const where = await page.evaluate((t) => {
    const cards = [...document.querySelectorAll('[id^="child-shadow"]')].map((d) => d.getBoundingClientRect().bottom);
    const blocks = [...document.querySelectorAll("p, li, div")].filter(
      (e) => e.children.length === 0 && e.innerText?.includes(t),
    );
    return { cards, answer: blocks.length ? blocks[blocks.length - 1].getBoundingClientRect().top : null };
  }, text);
  if (!where.cards.length) throw new Error("below: no cards on the page");
  if (where.answer === null) throw new Error(`below: "${text}" not found`);
  if (where.answer < Math.max(...where.cards)) {
    throw new Error(`below: the answer (top ${where.answer}) is above a card (bottom ${Math.max(...where.cards)})`);
  }
}

async function noCard(page, selector) {
  await runOver(page);
  const found = await page.evaluate(
    (sel) => [...document.querySelectorAll('[id^="child-shadow"]')].filter((d) => d.shadowRoot?.querySelector(sel)).length,
    selector,
  );
  if (found) throw new Error(`noCard: ${found} card(s) match ${selector}`);
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
    // `passthrough`: the client reaches the server through its own API passthrough (/api/*, with
    // LANGGRAPH_API_URL set on the client's server), as its production setup does.
    const apiUrl = scenario.passthrough ? `${config.uiUrl}/api` : config.apiUrl;
    const url = `${config.uiUrl}/?apiUrl=${encodeURIComponent(apiUrl)}&assistantId=${encodeURIComponent(scenario.assistant)}&chatHistoryOpen=false`;
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
        if (step.cardText) await cardText(page, step.cardText);
        if (step.fieldHas) await fieldHas(page, step.fieldHas);
        if (step.visible) await visible(page, step.visible);
        if (step.gone) await gone(page, step.gone);
        if (step.below) await below(page, step.below);
        if (step.noCard) await noCard(page, step.noCard);
        if (step.still) await page.screenshot({ path: path.join(config.outDir, `${step.still}.png`), fullPage: true });
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
