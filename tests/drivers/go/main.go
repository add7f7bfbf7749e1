// pgx v5 against hotledger: connect, DDL, parameters, transactions, SQLSTATE, prepared
// statement reuse (pgx caches and describes every statement), uuids, advisory locks, enum
// labels. Run by server/tests/drivers.rs.
package main

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

func check(ok bool, format string, args ...any) {
	if !ok {
		fmt.Fprintf(os.Stderr, "FAILED: "+format+"\n", args...)
		os.Exit(1)
	}
}

func must(err error, what string) {
	check(err == nil, "%s: %v", what, err)
}

func sqlstate(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return fmt.Sprintf("not a server error: %v", err)
}

func main() {
	ctx := context.Background()
	url := fmt.Sprintf("postgres://ledger:%s@127.0.0.1:%s/ledger?sslmode=disable", os.Getenv("HOTLEDGER_PASSWORD"), os.Getenv("HOTLEDGER_PORT"))
	conn, err := pgx.Connect(ctx, url)
	must(err, "connect")
	defer conn.Close(ctx)

	_, err = conn.Exec(ctx, "create table go_items (id bigint primary key, name text not null, qty int default 0)")
	must(err, "create table")
	for i := int64(1); i <= 10; i++ {
		_, err = conn.Exec(ctx, "insert into go_items (id, name, qty) values ($1, $2, $3)", i, fmt.Sprintf("item %d", i), int32(i*3))
		must(err, "insert")
	}
	var name string
	var qty int32
	must(conn.QueryRow(ctx, "select name, qty from go_items where id = $1", int64(4)).Scan(&name, &qty), "select")
	check(name == "item 4" && qty == 12, "select returned %q %d", name, qty)
	// SUM(bigint) is NUMERIC, read in binary.
	var total int64
	must(conn.QueryRow(ctx, "select sum(id) from go_items").Scan(&total), "sum")
	check(total == 55, "sum(id) = %d", total)

	for i := 0; i < 20; i++ {
		id := int64(1 + i%10)
		must(conn.QueryRow(ctx, "select qty from go_items where id = $1", id).Scan(&qty), "prepared select")
		check(qty == int32(id*3), "prepared select returned %d", qty)
	}

	tx, err := conn.Begin(ctx)
	must(err, "begin")
	_, err = tx.Exec(ctx, "update go_items set qty = qty + 100 where id = 1")
	must(err, "update in tx")
	must(tx.Rollback(ctx), "rollback")
	tx, err = conn.Begin(ctx)
	must(err, "begin")
	_, err = tx.Exec(ctx, "update go_items set qty = qty + 1000 where id = 2")
	must(err, "update in tx")
	must(tx.Commit(ctx), "commit")
	must(conn.QueryRow(ctx, "select qty from go_items where id = 1").Scan(&qty), "after rollback")
	check(qty == 3, "rollback kept a change: %d", qty)
	must(conn.QueryRow(ctx, "select qty from go_items where id = 2").Scan(&qty), "after commit")
	check(qty == 1006, "commit lost a change: %d", qty)

	_, err = conn.Exec(ctx, "insert into go_items (id, name) values (1, 'dup')")
	check(sqlstate(err) == "23505", "duplicate key: %v", err)
	_, err = conn.Exec(ctx, "select * from no_such_table")
	check(sqlstate(err) == "42P01", "unknown table: %v", err)
	var n int64
	must(conn.QueryRow(ctx, "select count(*) from go_items").Scan(&n), "count")
	check(n == 10, "rows after errors: %d", n)

	// A batch is one transaction (its statements go before one Sync): a failure anywhere
	// applies none of it, and the statements see each other. In a transaction, a failed
	// statement fails it: the next gets 25P02 and the commit keeps nothing.
	_, err = conn.Exec(ctx, "create table go_atomic (id int primary key)")
	must(err, "create go_atomic")
	batch := &pgx.Batch{}
	batch.Queue("insert into go_atomic values ($1)", 1)
	batch.Queue("insert into go_atomic values ($1)", 1)
	batch.Queue("insert into go_atomic values ($1)", 2)
	err = conn.SendBatch(ctx, batch).Close()
	check(sqlstate(err) == "23505", "a batch with a duplicate key: %v", err)
	batch = &pgx.Batch{}
	batch.Queue("insert into go_atomic values ($1)", 3)
	batch.Queue("select count(*) from go_atomic")
	results := conn.SendBatch(ctx, batch)
	_, err = results.Exec()
	must(err, "batch insert")
	must(results.QueryRow().Scan(&n), "batch count")
	must(results.Close(), "batch close")
	check(n == 1, "a batch's statement did not see the one before: %d", n)
	tx, err = conn.Begin(ctx)
	must(err, "begin")
	_, err = tx.Exec(ctx, "insert into go_atomic values ($1)", 4)
	must(err, "insert in tx")
	_, err = tx.Exec(ctx, "insert into go_atomic values ($1)", 3)
	check(sqlstate(err) == "23505", "duplicate in tx: %v", err)
	_, err = tx.Exec(ctx, "insert into go_atomic values ($1)", 5)
	check(sqlstate(err) == "25P02", "after the failure: %v", err)
	err = tx.Commit(ctx)
	check(errors.Is(err, pgx.ErrTxCommitRollback), "commit of a failed transaction: %v", err)
	must(conn.QueryRow(ctx, "select count(*) from go_atomic").Scan(&n), "count go_atomic")
	check(n == 1, "rows after the failed batch and transaction: %d", n)

	// uuid: pgx sends and reads uuids in binary ([16]byte), and a drawn default.
	_, err = conn.Exec(ctx, "create table go_tokens (id uuid primary key default gen_random_uuid(), n int not null)")
	must(err, "create go_tokens")
	given := [16]byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}
	_, err = conn.Exec(ctx, "insert into go_tokens (id, n) values ($1, 1)", given)
	must(err, "insert a uuid")
	var text string
	must(conn.QueryRow(ctx, "select id::text from go_tokens where id = $1", given).Scan(&text), "find by uuid")
	check(text == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "uuid text form: %s", text)
	var drawn [16]byte
	must(conn.QueryRow(ctx, "insert into go_tokens (n) values (2) returning id").Scan(&drawn), "a drawn uuid")
	check(drawn[6]>>4 == 4 && drawn[8]>>6 == 2, "drawn uuid version and variant: %x", drawn)

	// Advisory locks, as golang-migrate takes and gives back its migration lock.
	_, err = conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(1234))
	must(err, "advisory lock")
	var unlocked bool
	must(conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", int64(1234)).Scan(&unlocked), "advisory unlock")
	check(unlocked, "the advisory lock was not held")

	// An enum type: pgx sends a Go string for the enum-typed parameter and reads the label
	// back as a string; a label the type lacks is 22P02.
	_, err = conn.Exec(ctx, "create type go_state as enum ('new', 'paid', 'void'); create table go_orders (id int primary key, state go_state not null)")
	must(err, "create an enum type and a table using it")
	_, err = conn.Exec(ctx, "insert into go_orders values ($1, $2), ($3, $4)", 1, "paid", 2, "new")
	must(err, "insert enum labels as parameters")
	var states []string
	rows, err := conn.Query(ctx, "select state from go_orders where state >= $1 order by state desc", "new")
	must(err, "query by an enum parameter")
	for rows.Next() {
		var s string
		must(rows.Scan(&s), "scan an enum label")
		states = append(states, s)
	}
	must(rows.Err(), "enum rows")
	check(fmt.Sprint(states) == "[paid new]", "enum order: %v", states)
	_, err = conn.Exec(ctx, "insert into go_orders values ($1, $2)", 3, "lost")
	check(sqlstate(err) == "22P02", "a label the type lacks: %v", err)

	// NUMERIC up to 2^128 - 1 (TigerBeetle's largest amount): pgx sends and reads it in
	// binary form, as a big integer and an exponent.
	top, _ := new(big.Int).SetString("340282366920938463463374607431768211455", 10)
	_, err = conn.Exec(ctx, "create table go_amounts (id int primary key, amount numeric(39,0) not null)")
	must(err, "create a numeric(39,0) table")
	_, err = conn.Exec(ctx, "insert into go_amounts values ($1, $2)", 1, pgtype.Numeric{Int: top, Valid: true})
	must(err, "insert 2^128 - 1 as a binary parameter")
	var amount pgtype.Numeric
	must(conn.QueryRow(ctx, "select amount from go_amounts where id = $1", 1).Scan(&amount), "read 2^128 - 1")
	check(amount.Valid && amount.Exp == 0 && amount.Int.Cmp(top) == 0, "2^128 - 1 in binary: %v e%d", amount.Int, amount.Exp)
	fmt.Println("pgx: ok")
}
