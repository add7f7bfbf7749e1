// The console in a real browser: Debian's Chromium (playwright-core) on a wide screen, or
// Debian's Firefox ESR (puppeteer-core) on a laptop's.
//
//   node console_test.js chromium|firefox BASE_URL PASSWORD SCREENSHOT_DIR [NODES]
//
// With NODES (a cluster's node count): logs in, finds every member on the cluster panel and
// the load on the chart, and saves `console-cluster.png`; nothing else.
//
// Logs in (a wrong password first, which must be refused), finds the node leading on the
// cluster panel, runs SELECT 1 and a bad statement in the editor (the result, then the
// SQLSTATE), checks that nothing runs off the side of the screen, watches the transfers/s chart and the hot-accounts table move while the test
// that started it runs a load, and saves screenshots. No request may leave the node.
"use strict";

const { open } = require("./browser");

const [browserName, base, password, shots, nodes] = process.argv.slice(2);
const viewport = browserName === "firefox" ? { width: 1280, height: 800 } : { width: 1440, height: 1100 };
// Chromium's screenshots are the ones docs/console.md shows; Firefox's carry its name.
const shot = (name) => `${shots}/${name}${browserName === "firefox" ? "-firefox" : ""}.png`;

function check(condition, what) {
  if (!condition) throw new Error(`failed: ${what}`);
  console.log(`ok: ${what}`);
}

async function transfersShown(page) {
  await page.waitFor(() => {
    const legend = document.getElementById("throughput-legend").textContent;
    const m = legend.match(/transfers\/s ([\d,]+)/);
    return m && Number(m[1].replace(/,/g, "")) > 0;
  });
}

async function clusterView(page, nodes) {
  await page.fill("input[name=user]", "ledger");
  await page.fill("input[name=password]", password);
  await page.click("#login button[type=submit]");
  await page.waitForSelector("#dashboard:not([hidden])");
  await page.waitFor(
    (n) => document.querySelectorAll("#cluster tbody tr").length === n
      && document.querySelector("#cluster tbody").textContent.includes("leader"),
    nodes);
  check(true, `the cluster panel lists ${nodes} members and the leader`);
  await transfersShown(page);
  check(true, "the load shows on this node's chart");
  await page.pause(3000);
  await page.screenshot(shot("console-cluster"), true);
}

(async () => {
  const page = await open(browserName, viewport);
  const elsewhere = [];
  page.onRequest((url) => { if (!url.startsWith(base)) elsewhere.push(url); });
  page.onPageError((e) => { throw new Error(`the page threw: ${e.message}`); });
  try {
    await page.goto(base);
    await page.waitForSelector("#login-panel:not([hidden])");

    if (nodes) {
      await clusterView(page, Number(nodes));
      return;
    }
    await page.fill("input[name=user]", "ledger");
    await page.fill("input[name=password]", "not the password");
    await page.click("#login button[type=submit]");
    await page.waitFor(
      () => document.getElementById("login-error").textContent.includes("password authentication failed"));
    check(await page.visible("#login-panel"), "a wrong password is refused and the form stays");
    await page.screenshot(shot("login-refused"), false);

    await page.fill("input[name=password]", password);
    await page.click("#login button[type=submit]");
    await page.waitForSelector("#dashboard:not([hidden])");
    check(true, "the right password opens the console");

    await page.waitFor(() => document.querySelector("#cluster tbody").textContent.includes("leader"));
    check((await page.text("#node")).includes("leader"), "the cluster panel names this node the leader");
    // Firefox's driver clicks where the button was when it looked: let the first refresh fill
    // every panel (and move whatever it moves) before the first click.
    await page.waitFor(() => document.querySelectorAll("#metrics tbody tr").length > 0
      && document.querySelectorAll("#hot tbody tr").length > 0);

    await page.fill("#sql", "select 1 as one");
    await page.click("#run");
    await page.waitFor(() => document.getElementById("tag").textContent === "SELECT 1");
    check((await page.text("#result tbody")).trim() === "1", "SELECT 1 shows its row");

    await page.fill("#sql", "selec 1");
    await page.click("#run");
    await page.waitFor(() => document.getElementById("sql-error").textContent.includes("42601"));
    check(true, "a bad statement shows its SQLSTATE (42601)");

    await page.fill("#sql", "create table console_made (id int)");
    await page.click("#run");
    await page.waitFor(() => document.getElementById("sql-error").textContent.includes("25006"));
    check(true, "writes are refused until unlocked (25006)");

    // The load the test runs moves the chart and the hot accounts.
    await transfersShown(page);
    check(true, "the transfers/s chart shows the load");
    await page.waitFor(
      () => document.querySelectorAll("#hot tbody tr").length > 0
        && document.querySelector("#hot tbody tr td:nth-child(2)").textContent === "1");
    check(true, "the hot-accounts table has the hot account first");
    const firstCount = Number(await page.text("#hot tbody tr td:nth-child(3)"));
    await page.waitFor(
      (before) => Number(document.querySelector("#hot tbody tr td:nth-child(3)").textContent) !== before,
      firstCount);
    check(true, "the hot account's count moves");

    await page.fill("#sql", "select name, labels, value from hotledger.metrics where name like 'hotledger_statements%' order by labels");
    await page.click("#run");
    await page.waitFor(() => document.querySelectorAll("#result tbody tr").length >= 8);
    const [wide, window] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    check(wide <= window, `nothing runs off the side of a ${viewport.width}-pixel window (${wide} px wide)`);
    await page.pause(3000);
    await page.screenshot(shot("console"), true);

    check(elsewhere.length === 0, `no request leaves the node (${elsewhere.join(", ") || "none"})`);
  } catch (e) {
    await page.screenshot(shot("failure"), true).catch(() => {});
    console.error(e.message);
    process.exitCode = 1;
  } finally {
    await page.close();
  }
})();
