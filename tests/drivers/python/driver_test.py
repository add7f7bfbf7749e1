"""psycopg 3 against hotledger: connect, DDL, parameters, transactions, SQLSTATE, prepared reuse.

Run by server/tests/drivers.rs with HOTLEDGER_PORT and HOTLEDGER_PASSWORD set.
"""
import datetime
import os
import sys

import psycopg
from psycopg import errors

conninfo = (
    f"host=127.0.0.1 port={os.environ['HOTLEDGER_PORT']} dbname=ledger user=ledger "
    f"password={os.environ['HOTLEDGER_PASSWORD']}"
)


def check(condition, message):
    if not condition:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)


with psycopg.connect(conninfo, autocommit=True) as conn:
    conn.execute("create table py_items (id bigint primary key, name text not null, qty int default 0)")
    for i in range(1, 11):
        # psycopg binds small integers as binary int2: the server must accept them for bigint.
        conn.execute("insert into py_items (id, name, qty) values (%s, %s, %s)", (i, f"item {i}", i * 3))
    row = conn.execute("select name, qty from py_items where id = %s", (4,)).fetchone()
    check(row == ("item 4", 12), f"select returned {row}")
    total = conn.execute("select sum(qty) from py_items").fetchone()[0]
    check(int(total) == 165, f"sum(qty) = {total}")

    # Prepared statement reuse: psycopg prepares server-side after a few executions.
    for i in range(20):
        got = conn.execute("select qty from py_items where id = %s", (1 + i % 10,), prepare=True).fetchone()[0]
        check(got == (1 + i % 10) * 3, f"prepared select returned {got}")

    # Transactions: rollback discards, commit keeps.
    conn.autocommit = False
    conn.execute("update py_items set qty = qty + 100 where id = 1")
    conn.rollback()
    conn.execute("update py_items set qty = qty + 1000 where id = 2")
    conn.commit()
    conn.autocommit = True
    check(conn.execute("select qty from py_items where id = 1").fetchone()[0] == 3, "rollback kept a change")
    check(conn.execute("select qty from py_items where id = 2").fetchone()[0] == 1006, "commit lost a change")

    # An error with its SQLSTATE; the connection stays usable.
    try:
        conn.execute("insert into py_items (id, name) values (1, 'dup')")
        check(False, "duplicate key did not fail")
    except errors.UniqueViolation as e:
        check(e.sqlstate == "23505", f"sqlstate {e.sqlstate}")
    try:
        conn.execute("select * from no_such_table")
        check(False, "unknown table did not fail")
    except errors.UndefinedTable as e:
        check(e.sqlstate == "42P01", f"sqlstate {e.sqlstate}")
    check(conn.execute("select count(*) from py_items").fetchone()[0] == 10, "rows after errors")

    # Nested transactions are savepoints: the inner one rolls back alone.
    with conn.transaction():
        conn.execute("update py_items set qty = qty + 1 where id = 3")
        try:
            with conn.transaction():
                conn.execute("update py_items set qty = qty + 500 where id = 3")
                conn.execute("insert into py_items (id, name) values (3, 'dup')")
        except errors.UniqueViolation:
            pass
        conn.execute("update py_items set qty = qty + 10 where id = 3")
    got = conn.execute("select qty from py_items where id = 3").fetchone()[0]
    check(got == 20, f"savepoint rollback left qty {got}")

    # Intervals and window functions: a timedelta parameter, interval results in text and
    # in binary form.
    got = conn.execute(
        "select %s::interval + interval '1 hour'", (datetime.timedelta(days=1, seconds=30),)
    ).fetchone()[0]
    check(got == datetime.timedelta(days=1, hours=1, seconds=30), f"interval returned {got}")
    with conn.cursor(binary=True) as cur:
        got = cur.execute(
            "select timestamp '2024-01-31 10:00' + %s, interval '-1 day 02:00:00.5'",
            (datetime.timedelta(days=1),),
        ).fetchone()
        expected = (
            datetime.datetime(2024, 2, 1, 10, 0),
            datetime.timedelta(days=-1, hours=2, microseconds=500000),
        )
        check(got == expected, f"binary intervals returned {got}")
    rows = conn.execute(
        "select id, sum(qty) over (order by id) from py_items where id <= 3 order by id"
    ).fetchall()
    check([(i, int(t)) for i, t in rows] == [(1, 3), (2, 1009), (3, 1029)], f"running sums {rows}")

print("psycopg: ok")
