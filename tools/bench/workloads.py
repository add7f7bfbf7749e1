"""The workloads, each a pgbench invocation plus the state it starts from, the same on both
systems (see docs/benchmarks.md for what each one stands for)."""

import os
import re
from dataclasses import dataclass, field

from servers import run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ACCOUNTS = 100_000
BATCH_ROWS = 1_000
NOOP7 = "BEGIN;\nSELECT 1;\nSELECT 1;\nSELECT 1;\nSELECT 1;\nSELECT 1;\nEND;\n"
NOOP1 = "SELECT 1;\n"
SERIAL_TABLE = "CREATE TABLE orders (id bigserial PRIMARY KEY, account bigint, amount bigint, note text);\n"
SERIAL_INSERT = ("\\set a random(1, 100000)\n"
                 "INSERT INTO orders (account, amount, note) VALUES (:a, 1, 'order') RETURNING id;\n")


@dataclass
class Workload:
    name: str
    title: str
    # "pgbench" (pgbench -i -s 1), "ledger" (100,001 accounts), "serial" (an empty table
    # keyed by a bigserial) or None (no tables).
    state: str | None
    args: list = field(default_factory=list)
    mode: str = "prepared"
    script: str | None = None  # a script's text, written to a file at run time
    script_path: str | None = None
    per_transaction: int = 1  # business operations per pgbench transaction
    unit: str = "transactions"
    ceiling: str | None = None  # the do-nothing workload of the same round trips


def batch_script():
    """One INSERT of BATCH_ROWS transfers, each crediting account 1 from a pseudo-random
    account; ids are unique per statement and random across statements. pgbench allows 255
    parameters per prepared statement, so this one goes as simple-protocol text."""
    rows = []
    for k in range(BATCH_ROWS):
        rows.append(f"(:base * {BATCH_ROWS} + {k}, 2 + (:base * 7919 + {k * 104729}) % {ACCOUNTS}, 1, 1, 1, 1)")
    # :base is substituted as a literal: below 2^31 it would be an integer, and integer *
    # integer overflows (in PostgreSQL and hotledger alike), so it is drawn from 2^31 up.
    return ("\\set base random(2147483648, 9000000000000)\n"
            "INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) VALUES\n"
            + ",\n".join(rows) + ";\n")


WORKLOADS = {w.name: w for w in [
    Workload("tpcb", "pgbench TPC-B, scale 1 (one hot branch row)", "pgbench", ceiling="noop7"),
    Workload("select", "pgbench -S: primary-key SELECT, no writes", "pgbench", args=["-S"], ceiling="noop1"),
    Workload("nohot", "pgbench -N: TPC-B without the branch and teller updates (no hot row)", "pgbench",
             args=["-N"], ceiling="noop7"),
    Workload("transfer", "hot-account transfer: CALL transfer(...) crediting account 1", "ledger",
             script_path=os.path.join(ROOT, "tools", "pgbench", "transfer.sql"), ceiling="noop1",
             unit="transfers"),
    Workload("transfer_read", "a hot-account transfer, then a point read of a random account's balance",
             "ledger", script_path=os.path.join(ROOT, "tools", "pgbench", "transfer_read.sql"),
             unit="transfers"),
    Workload("batch", f"INSERT INTO transfers of {BATCH_ROWS:,} rows, all crediting account 1", "ledger",
             mode="simple", script=batch_script(), per_transaction=BATCH_ROWS, unit="transfers"),
    Workload("serial", "INSERT ... RETURNING id into a table keyed by a bigserial (one sequence for all)",
             "serial", script=SERIAL_INSERT, ceiling="noop1", unit="inserts"),
    Workload("noop7", "client ceiling: BEGIN, five SELECT 1, END (TPC-B's round trips)", None, script=NOOP7),
    Workload("noop1", "client ceiling: SELECT 1 (one round trip)", None, script=NOOP1),
]}


def prepare(workload, server, accounts=ACCOUNTS):
    """Brings `server` to the workload's starting state (hotledger is restarted fresh by the
    caller; PostgreSQL's tables are recreated here)."""
    if workload.state == "pgbench":
        cmd = ["pgbench", "-h", "127.0.0.1", "-p", str(server.port), "-i", "-s", "1", "-q", server.db]
        run(cmd, env=server.env)
    elif workload.state == "ledger":
        load_ledger(server, accounts)
    elif workload.state == "serial":
        drop = "DROP TABLE IF EXISTS orders;\n" if server.name == "postgresql" else ""
        server.psql(None, stdin=drop + SERIAL_TABLE)


def ledger_tables_for_postgres():
    """hotledger's ledger tables (migrations/0002_ledger.sql) less their ledger_role options."""
    with open(os.path.join(ROOT, "migrations", "0002_ledger.sql")) as f:
        return re.sub(r"\s*WITH \(ledger_role = '\w+'\)", "", f.read())


def load_ledger(server, accounts):
    """Accounts 1..accounts+1 (account 1 the hot one). On PostgreSQL first the tables and the
    transfer trigger and procedure of tools/pgbench/postgres_ledger.sql."""
    if server.name == "postgresql":
        drop = "DROP TABLE IF EXISTS transfers, accounts, pending_transfers, account_balances CASCADE;\n"
        with open(os.path.join(ROOT, "tools", "pgbench", "postgres_ledger.sql")) as f:
            logic = f.read()
        rows = (f"INSERT INTO accounts (id, ledger, code) SELECT g, 1, 1 FROM generate_series(1, {accounts + 1}) g;\n"
                "VACUUM ANALYZE;\n")
        server.psql(None, stdin=drop + ledger_tables_for_postgres() + logic + rows)
    else:
        rows = "".join(f"{i}\t1\t1\n" for i in range(1, accounts + 2))
        server.psql("COPY accounts (id, ledger, code) FROM STDIN", stdin=rows)
