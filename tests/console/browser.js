// The browsers the console is tested in, behind the few page operations the test uses:
// Debian's Chromium driven by playwright-core, and Debian's Firefox ESR driven by
// puppeteer-core over WebDriver BiDi (Playwright's Firefox needs its own patched build,
// which only Playwright's download site serves).
"use strict";

const timeout = 20000;

async function chromiumPage(viewport) {
  const { chromium } = require("playwright-core");
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu"],
  });
  const page = await browser.newPage({ viewport });
  return {
    browser,
    page,
    fill: (selector, value) => page.fill(selector, value),
    waitFor: (fn, arg) => page.waitForFunction(fn, arg, { timeout }),
    pause: (ms) => page.waitForTimeout(ms),
  };
}

async function firefoxPage(viewport) {
  const puppeteer = require("puppeteer-core");
  const browser = await puppeteer.launch({
    browser: "firefox",
    executablePath: process.env.FIREFOX || "/usr/bin/firefox-esr",
    headless: true,
  });
  const page = await browser.newPage();
  await page.setViewport(viewport);
  return {
    browser,
    page,
    fill: (selector, value) => page.locator(selector).fill(value),
    waitFor: (fn, arg) => page.waitForFunction(fn, { timeout }, arg),
    pause: (ms) => new Promise((done) => setTimeout(done, ms)),
  };
}

/// Opens `name` ("chromium" or "firefox") at `viewport`; what comes back drives one page.
async function open(name, viewport) {
  const opened = name === "firefox" ? await firefoxPage(viewport) : await chromiumPage(viewport);
  const { page } = opened;
  return {
    ...opened,
    goto: (url) => page.goto(url, { waitUntil: "load" }),
    click: (selector) => page.click(selector),
    waitForSelector: (selector) => page.waitForSelector(selector, { timeout }),
    evaluate: (fn) => page.evaluate(fn),
    text: (selector) => page.$eval(selector, (e) => e.textContent),
    visible: (selector) => page.$eval(selector, (e) => !e.closest("[hidden]") && e.offsetParent !== null),
    screenshot: (path, fullPage) => page.screenshot({ path, fullPage }),
    onRequest: (f) => page.on("request", (r) => f(r.url())),
    onPageError: (f) => page.on("pageerror", f),
    close: () => opened.browser.close(),
  };
}

module.exports = { open };
