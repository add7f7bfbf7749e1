// node-postgres against hotledger: connect, DDL, parameters, transactions, SQLSTATE,
// prepared statement reuse, uuid values, enum labels, LISTEN/NOTIFY. Run by server/tests/drivers.rs.
const { Client } = require('pg');

function check(condition, message) {
  if (!condition) {
    console.error(`FAILED: ${message}`);
    process.exit(1);
  }
}

const config = {
  host: '127.0.0.1',
  port: Number(process.env.HOTLEDGER_PORT),
  user: 'ledger',
  password: process.env.HOTLEDGER_PASSWORD,
  database: 'ledger',
};

async function main() {
  const client = new Client(config);
  await client.connect();
  await client.query('create table js_items (id bigint primary key, name text not null, qty int default 0)');
  for (let i = 1; i <= 10; i++) {
    await client.query('insert into js_items (id, name, qty) values ($1, $2, $3)', [i, `item ${i}`, i * 3]);
  }
  const one = await client.query('select name, qty from js_items where id = $1', [4]);
  check(one.rows[0].name === 'item 4' && one.rows[0].qty === 12, `select returned ${JSON.stringify(one.rows)}`);
  const sum = await client.query('select sum(qty) as s from js_items');
  check(Number(sum.rows[0].s) === 165, `sum returned ${JSON.stringify(sum.rows)}`);

  // A named prepared statement, reused.
  for (let i = 0; i < 20; i++) {
    const r = await client.query({ name: 'qty_by_id', text: 'select qty from js_items where id = $1', values: [1 + (i % 10)] });
    check(r.rows[0].qty === (1 + (i % 10)) * 3, `prepared select returned ${JSON.stringify(r.rows)}`);
  }

  await client.query('begin');
  await client.query('update js_items set qty = qty + 100 where id = 1');
  await client.query('rollback');
  await client.query('begin');
  await client.query('update js_items set qty = qty + 1000 where id = 2');
  await client.query('commit');
  check((await client.query('select qty from js_items where id = 1')).rows[0].qty === 3, 'rollback kept a change');
  check((await client.query('select qty from js_items where id = 2')).rows[0].qty === 1006, 'commit lost a change');

  try {
    await client.query("insert into js_items (id, name) values (1, 'dup')");
    check(false, 'duplicate key did not fail');
  } catch (e) {
    check(e.code === '23505', `sqlstate ${e.code}`);
  }
  try {
    await client.query('select * from no_such_table');
    check(false, 'unknown table did not fail');
  } catch (e) {
    check(e.code === '42P01', `sqlstate ${e.code}`);
  }
  check(Number((await client.query('select count(*) as n from js_items')).rows[0].n) === 10, 'rows after errors');

  // A failed statement (with parameters: the extended protocol) fails its transaction: the
  // next statement gets 25P02 and COMMIT answers ROLLBACK, keeping nothing.
  await client.query('create table js_atomic (id int primary key)');
  await client.query('begin');
  await client.query('insert into js_atomic values ($1)', [1]);
  try {
    await client.query('select * from no_such_table where id = $1', [1]);
    check(false, 'unknown table did not fail');
  } catch (e) {
    check(e.code === '42P01', `sqlstate ${e.code}`);
  }
  try {
    await client.query('insert into js_atomic values ($1)', [2]);
    check(false, 'a statement after the failure ran');
  } catch (e) {
    check(e.code === '25P02', `after the failure: ${e.code}`);
  }
  const commit = await client.query('commit');
  check(commit.command === 'ROLLBACK', `commit of a failed transaction answered ${commit.command}`);
  check(Number((await client.query('select count(*) as n from js_atomic')).rows[0].n) === 0, 'a failed transaction left rows');

  // uuid: strings in and out, a drawn default, and an array parameter for = ANY.
  await client.query('create table js_tokens (id uuid primary key default gen_random_uuid(), n int not null)');
  const given = 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11';
  await client.query('insert into js_tokens (id, n) values ($1, 1)', [given]);
  const drawn = (await client.query('insert into js_tokens (n) values (2), (3) returning id')).rows.map((r) => r.id);
  check(drawn.every((id) => /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id)), `drawn ${drawn}`);
  const found = await client.query('select n from js_tokens where id = any($1::uuid[]) order by n', [[given, drawn[1]]]);
  check(found.rows.map((r) => r.n).join() === '1,3', `uuid = any: ${JSON.stringify(found.rows)}`);
  const back = await client.query('select id from js_tokens where n = 1');
  check(back.rows[0].id === given.toLowerCase(), `uuid text form: ${back.rows[0].id}`);

  // An enum type: labels as parameters, read back as strings, ordered by the type's order.
  await client.query("create type js_size as enum ('small', 'medium', 'large')");
  await client.query('create table js_shirts (id int primary key, size js_size not null)');
  await client.query('insert into js_shirts values ($1, $2), ($3, $4), ($5, $6)', [1, 'large', 2, 'small', 3, 'medium']);
  const sizes = await client.query('select size from js_shirts where size > $1 order by size', ['small']);
  check(sizes.rows.map((r) => r.size).join() === 'medium,large', `enum order: ${JSON.stringify(sizes.rows)}`);
  try {
    await client.query('insert into js_shirts values ($1, $2)', [4, 'huge']);
    check(false, 'a label the type lacks was accepted');
  } catch (e) {
    check(e.code === '22P02', `a label the type lacks: ${e.code} ${e.message}`);
  }

  // LISTEN/NOTIFY: another connection's notification arrives as a 'notification' event.
  const listener = new Client(config);
  await listener.connect();
  const seen = [];
  listener.on('notification', (m) => seen.push(`${m.channel}:${m.payload}`));
  await listener.query('LISTEN jobs');
  await client.query("NOTIFY jobs, 'from node'");
  for (let i = 0; i < 100 && seen.length === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  check(seen.join() === 'jobs:from node', `notifications: ${seen}`);
  await listener.end();
  await client.end();
  console.log('node-postgres: ok');
}

main().catch((e) => {
  console.error(`FAILED: ${e.stack || e}`);
  process.exit(1);
});
