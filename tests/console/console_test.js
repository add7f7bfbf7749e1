// The console in a real browser: Debian's Chromium driven by playwright-core.
//
//   node console_test.js BASE_URL PASSWORD SCREENSHOT_DIR [NODES]
//
// With NODES (a cluster's node count): logs in, finds every member on the cluster panel and
// the load on the chart, and saves `console-cluster.png`; nothing else.
//
// Logs in (a wrong password first, which must be refused), finds the node leading on the
// cluster panel, runs SELECT 1 and a bad statement in the editor (the result, then the
// SQLSTATE), watches the transfers/s chart and the hot-accounts table move while the test
// that started it runs a load, and saves screenshots. No request may leave the node.
"use strict";

const { chromium } = require("playwright-core");

const [base, password, shots, nodes] = process.argv.slice(2);
const timeout = 20000;

function check(condition, what) {
  if (!condition) throw new Error(`failed: ${what}`);
  console.log(`ok: ${what}`);
}

async function transfersShown(page) {
  await page.waitForFunction(() => {
    const legend = document.getElementById("throughput-legend").textContent;
    const m = legend.match(/transfers\/s ([\d,]+)/);
    return m && Number(m[1].replace(/,/g, "")) > 0;
  }, null, { timeout });
}

async function clusterView(page, nodes) {
  await page.fill("input[name=user]", "ledger");
  await page.fill("input[name=password]", password);
  await page.click("#login button[type=submit]");
  await page.waitForSelector("#dashboard:not([hidden])", { timeout });
  await page.waitForFunction(
    (n) => document.querySelectorAll("#cluster tbody tr").length === n
      && document.querySelector("#cluster tbody").textContent.includes("leader"),
    nodes, { timeout });
  check(true, `the cluster panel lists ${nodes} members and the leader`);
  await transfersShown(page);
  check(true, "the load shows on this node's chart");
  await page.waitForTimeout(3000);
  await page.screenshot({ path: `${shots}/console-cluster.png`, fullPage: true });
}

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu"],
  });
  const page = await browser.newPage({ viewport: { width: 1440, height: 1100 } });
  const elsewhere = [];
  page.on("request", (r) => { if (!r.url().startsWith(base)) elsewhere.push(r.url()); });
  page.on("pageerror", (e) => { throw new Error(`the page threw: ${e.message}`); });
  try {
    await page.goto(base, { waitUntil: "load" });
    await page.waitForSelector("#login-panel:not([hidden])", { timeout });

    if (nodes) {
      await clusterView(page, Number(nodes));
      return;
    }
    await page.fill("input[name=user]", "ledger");
    await page.fill("input[name=password]", "not the password");
    await page.click("#login button[type=submit]");
    await page.waitForFunction(
      () => document.getElementById("login-error").textContent.includes("password authentication failed"),
      null, { timeout });
    check(await page.isVisible("#login-panel"), "a wrong password is refused and the form stays");
    await page.screenshot({ path: `${shots}/login-refused.png` });

    await page.fill("input[name=password]", password);
    await page.click("#login button[type=submit]");
    await page.waitForSelector("#dashboard:not([hidden])", { timeout });
    check(true, "the right password opens the console");

    await page.waitForFunction(
      () => document.querySelector("#cluster tbody").textContent.includes("leader"),
      null, { timeout });
    check((await page.textContent("#node")).includes("leader"), "the cluster panel names this node the leader");

    await page.fill("#sql", "select 1 as one");
    await page.click("#run");
    await page.waitForFunction(() => document.getElementById("tag").textContent === "SELECT 1", null, { timeout });
    check((await page.textContent("#result tbody")).trim() === "1", "SELECT 1 shows its row");

    await page.fill("#sql", "selec 1");
    await page.click("#run");
    await page.waitForFunction(() => document.getElementById("sql-error").textContent.includes("42601"), null, { timeout });
    check(true, "a bad statement shows its SQLSTATE (42601)");

    await page.fill("#sql", "create table console_made (id int)");
    await page.click("#run");
    await page.waitForFunction(() => document.getElementById("sql-error").textContent.includes("25006"), null, { timeout });
    check(true, "writes are refused until unlocked (25006)");

    // The load the test runs moves the chart and the hot accounts.
    await transfersShown(page);
    check(true, "the transfers/s chart shows the load");
    await page.waitForFunction(
      () => document.querySelectorAll("#hot tbody tr").length > 0
        && document.querySelector("#hot tbody tr td:nth-child(2)").textContent === "1",
      null, { timeout });
    check(true, "the hot-accounts table has the hot account first");
    const firstCount = Number(await page.textContent("#hot tbody tr td:nth-child(3)"));
    await page.waitForFunction(
      (before) => Number(document.querySelector("#hot tbody tr td:nth-child(3)").textContent) !== before,
      firstCount, { timeout });
    check(true, "the hot account's count moves");

    await page.fill("#sql", "select name, labels, value from hotledger.metrics where name like 'hotledger_statements%' order by labels");
    await page.click("#run");
    await page.waitForFunction(() => document.querySelectorAll("#result tbody tr").length >= 8, null, { timeout });
    await page.waitForTimeout(3000);
    await page.screenshot({ path: `${shots}/console.png`, fullPage: true });

    check(elsewhere.length === 0, `no request leaves the node (${elsewhere.join(", ") || "none"})`);
  } catch (e) {
    await page.screenshot({ path: `${shots}/failure.png`, fullPage: true }).catch(() => {});
    console.error(e.message);
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
})();
