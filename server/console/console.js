// The hotledger console: every panel is a SQL query against the node's system views, run
// through POST /api/sql with the logged-in role's session. Nothing is fetched from anywhere
// but this node.
"use strict";

const $ = (id) => document.getElementById(id);
const HEADERS = { "Content-Type": "application/json", "X-Hotledger-Console": "1" };
const HISTORY_SECONDS = 120;

async function post(path, body) {
  const response = await fetch(path, { method: "POST", headers: HEADERS, body: JSON.stringify(body) });
  let answer = {};
  try { answer = await response.json(); } catch (_) { /* an empty body */ }
  return { status: response.status, answer };
}

async function query(sql, writes = false) {
  const { status, answer } = await post("/api/sql", { sql, writes });
  if (status === 401) { showLogin(); throw new Error("logged out"); }
  return answer;
}

function fill(table, answer, numeric = () => false) {
  const thead = table.querySelector("thead");
  const tbody = table.querySelector("tbody");
  thead.replaceChildren();
  tbody.replaceChildren();
  if (!answer.columns) return;
  const head = document.createElement("tr");
  for (const c of answer.columns) {
    const th = document.createElement("th");
    th.textContent = c.name;
    head.append(th);
  }
  thead.append(head);
  for (const row of answer.rows) {
    const tr = document.createElement("tr");
    row.forEach((value, i) => {
      const td = document.createElement("td");
      td.textContent = value === null ? "NULL" : value;
      if (numeric(answer.columns[i])) td.className = "num";
      tr.append(td);
    });
    tbody.append(tr);
  }
}

const isNumber = (c) => ["bigint", "integer", "smallint", "double precision", "numeric"].includes(c.type);

// A line chart on a canvas: `series` is [{ name, color, values }], values oldest first.
function chart(canvas, series, legend) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth, height = canvas.clientHeight;
  canvas.width = width * ratio;
  canvas.height = height * ratio;
  const g = canvas.getContext("2d");
  g.scale(ratio, ratio);
  g.clearRect(0, 0, width, height);
  const left = 52, bottom = 18, top = 8;
  // At least 4, so that the four grid lines have distinct whole-number labels.
  const max = Math.max(4, ...series.flatMap((s) => s.values));
  const y = (v) => top + (height - top - bottom) * (1 - v / max);
  g.strokeStyle = "#e2e5ea";
  g.fillStyle = "#6b7485";
  g.font = "11px system-ui, sans-serif";
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    g.beginPath();
    g.moveTo(left, y(v));
    g.lineTo(width, y(v));
    g.stroke();
    g.fillText(Math.round(v).toLocaleString(), 2, y(v) + 4);
  }
  g.fillText(`${HISTORY_SECONDS} s ago`, left, height - 4);
  g.fillText("now", width - 24, height - 4);
  for (const s of series) {
    const n = s.values.length;
    if (n < 2) continue;
    g.strokeStyle = s.color;
    g.lineWidth = 1.5;
    g.beginPath();
    s.values.forEach((v, i) => {
      const x = left + ((width - left) * i) / (HISTORY_SECONDS - 1) + (width - left) * (HISTORY_SECONDS - n) / (HISTORY_SECONDS - 1);
      if (i === 0) g.moveTo(x, y(v)); else g.lineTo(x, y(v));
    });
    g.stroke();
  }
  legend.replaceChildren(...series.map((s) => {
    const span = document.createElement("span");
    const swatch = document.createElement("b");
    swatch.style.background = s.color;
    const last = s.values.length ? s.values[s.values.length - 1] : 0;
    span.append(swatch, `${s.name} ${Math.round(last).toLocaleString()}`);
    return span;
  }));
}

const latency = { p50: [], p99: [], p999: [] };

async function refreshCluster() {
  const answer = await query(
    "select node_id, role, voter, pg_addr, raft_addr, term, last_log_index, committed_index, applied_index, lag_entries, reachable, is_self from hotledger.cluster order by node_id");
  fill($("cluster"), answer, isNumber);
  const self = (answer.rows || []).find((r) => r[11] === "t");
  if (self) {
    $("node").textContent = `node ${self[0]} · ${self[1]}`;
    $("node").className = `badge ${self[1]}`;
  }
}

async function refreshCharts() {
  const answer = await query(
    `select transfers, statements, commits from hotledger.throughput order by at desc limit ${HISTORY_SECONDS}`);
  const rows = (answer.rows || []).slice().reverse();
  chart($("throughput-chart"), [
    { name: "transfers/s", color: "#2563eb", values: rows.map((r) => Number(r[0])) },
    { name: "statements/s", color: "#16a34a", values: rows.map((r) => Number(r[1])) },
    { name: "commits/s", color: "#ea580c", values: rows.map((r) => Number(r[2])) },
  ], $("throughput-legend"));
  const l = await query(
    "select p50_us, p99_us, p999_us from hotledger.latency where stage = 'commit' and window_seconds = 1");
  const [p50, p99, p999] = (l.rows && l.rows[0]) || [0, 0, 0];
  for (const [k, v] of [["p50", p50], ["p99", p99], ["p999", p999]]) {
    latency[k].push(Number(v));
    if (latency[k].length > HISTORY_SECONDS) latency[k].shift();
  }
  chart($("latency-chart"), [
    { name: "p50", color: "#2563eb", values: latency.p50 },
    { name: "p99", color: "#ea580c", values: latency.p99 },
    { name: "p99.9", color: "#b42318", values: latency.p999 },
  ], $("latency-legend"));
}

async function refreshTables() {
  const hot = await query(
    "select window_seconds, account_id, transfers, debits_posted, credits_posted from hotledger.hot_accounts where window_seconds = 10 order by transfers desc limit 10");
  fill($("hot"), hot, isNumber);
  const metrics = await query(
    "select name, labels, value from hotledger.metrics where name in ('hotledger_sessions', 'hotledger_commits_total', 'hotledger_transfers_total', 'hotledger_log_fsyncs_total', 'hotledger_commands_per_entry', 'hotledger_buffer_pool_dirty_pages', 'hotledger_checkpoint_last_milliseconds') order by name");
  fill($("metrics"), metrics, isNumber);
}

let timer = null;

// Whether a refresh is still running. A tick while one is skips instead of queueing: the
// panels share the role's session with the editor, so refreshes slower than the interval
// (a loaded node) would otherwise pile up ahead of the user's own statement without bound.
let refreshing = false;

async function tick() {
  if (refreshing) return;
  refreshing = true;
  try {
    await refreshCluster();
    await refreshCharts();
    await refreshTables();
  } catch (_) { /* logged out, or the node is restarting: the next tick tries again */ }
  finally { refreshing = false; }
}

function showLogin() {
  clearInterval(timer);
  timer = null;
  $("dashboard").hidden = true;
  $("logout").hidden = true;
  $("who").textContent = "";
  $("login-panel").hidden = false;
}

function showDashboard(user) {
  $("login-panel").hidden = true;
  $("dashboard").hidden = false;
  $("logout").hidden = false;
  $("who").textContent = user;
  tick();
  if (!timer) timer = setInterval(tick, 1000);
}

$("login").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const { status, answer } = await post("/api/login", { user: form.get("user"), password: form.get("password") });
  if (status === 200) {
    $("login-error").textContent = "";
    showDashboard(answer.user);
  } else {
    $("login-error").textContent = (answer.error && answer.error.message) || `login failed (${status})`;
  }
});

$("logout").addEventListener("click", async () => {
  await post("/api/logout", {});
  showLogin();
});

$("editor").addEventListener("submit", async (event) => {
  event.preventDefault();
  const answer = await query($("sql").value, $("writes").checked);
  $("sql-error").textContent = answer.error
    ? `ERROR ${answer.error.sqlstate}: ${answer.error.message}${answer.error.detail ? "\n" + answer.error.detail : ""}`
    : "";
  $("tag").textContent = answer.tag || "";
  fill($("result"), answer, isNumber);
});

(async () => {
  const response = await fetch("/api/me");
  if (response.status === 200) showDashboard((await response.json()).user);
  else showLogin();
})();
