//! Real psql against the real server: DDL and DML, the `\d` family, `\timing`, `\copy`.

mod common;

use std::io::Write;

use common::{stderr, stdout, TestServer};

fn run(server: &TestServer, script: &str) -> String {
    let mut file = tempfile::NamedTempFile::new().expect("script file");
    file.write_all(script.as_bytes()).expect("write script");
    let out = server.psql(&["-f", file.path().to_str().expect("utf-8 path")]);
    assert!(
        out.status.success(),
        "psql failed:\n{}\n{}\nserver log:\n{}",
        stdout(&out),
        stderr(&out),
        server.log()
    );
    stdout(&out)
}

#[test]
fn psql_creates_queries_and_describes() {
    let server = TestServer::start();
    let out = run(
        &server,
        "create table accounts_demo (id bigint primary key, owner varchar(40) not null, balance numeric(14,2) default 0 check (balance >= 0), opened date);
         insert into accounts_demo values (1, 'ada', 10.50, '2024-01-02'), (2, 'bob', 0, null);
         create index accounts_demo_owner_idx on accounts_demo (owner);
         select id, owner, balance, opened from accounts_demo order by id;
         \\dt
         \\d
         \\d accounts_demo
         \\timing on
         select count(*) as n from accounts_demo;
         ",
    );
    assert!(out.contains(" 1 | ada   |   10.50 | 2024-01-02"), "{out}");
    assert!(out.contains(" 2 | bob   |    0.00 | "), "{out}");
    assert!(out.contains("public | accounts_demo"), "{out}");
    assert!(out.contains("Table \"public.accounts_demo\""), "{out}");
    assert!(out.contains("character varying(40)"), "{out}");
    assert!(out.contains("numeric(14,2)"), "{out}");
    assert!(
        out.contains("\"accounts_demo_pkey\" PRIMARY KEY, btree (id)"),
        "{out}"
    );
    assert!(out.contains("CHECK ((balance >= 0))"), "{out}");
    assert!(
        out.contains("\"accounts_demo_owner_idx\" btree (owner)"),
        "{out}"
    );
    assert!(out.contains("Time: "), "\\timing printed no time: {out}");
}

/// `\d` shows a table's foreign keys and the ones referencing it, as PostgreSQL's psql
/// does (it finds them through pg_constraint, pg_trigger and pg_partition_ancestors).
#[test]
fn psql_describes_foreign_keys_both_ways() {
    let server = TestServer::start();
    let out = run(
        &server,
        "create table fk_owner (id int primary key);
         create table fk_pet (id int primary key, owner_id int references fk_owner on delete cascade);
         \\d fk_pet
         \\d fk_owner
         ",
    );
    assert!(
        out.contains("Foreign-key constraints:\n    \"fk_pet_owner_id_fkey\" FOREIGN KEY (owner_id) REFERENCES fk_owner(id) ON DELETE CASCADE"),
        "{out}"
    );
    assert!(
        out.contains("Referenced by:\n    TABLE \"fk_pet\" CONSTRAINT \"fk_pet_owner_id_fkey\" FOREIGN KEY (owner_id) REFERENCES fk_owner(id) ON DELETE CASCADE"),
        "{out}"
    );
}

#[test]
fn psql_lists_databases_roles_procedures_extensions_types_sizes_privileges_and_details() {
    let server = TestServer::start();
    let out = run(
        &server,
        "create table notes (id bigint primary key, body text not null default '');
         create procedure pay(a bigint, b bigint, amount bigint) language sql as $$
             insert into transfers (id, debit_account_id, credit_account_id, amount, ledger, code)
             values (a * 1000 + b, a, b, amount, 1, 1)
         $$;
         \\l
         \\du
         \\df
         \\d+ notes
         \\dx
         \\dT
         \\dt+ notes
         \\di+ notes_pkey
         \\d+
         \\dp notes
         create table tickets (id int generated always as identity, n bigserial);
         \\ds
         \\d tickets_id_seq
         \\d tickets
         ",
    );
    // \ds, \d of a sequence and of a table with identity and serial columns.
    assert!(
        out.contains(" public | tickets_n_seq  | sequence | ledger"),
        "{out}"
    );
    assert!(
        out.contains(" integer |     1 |       1 | 2147483647 |         1 | no      |     1"),
        "{out}"
    );
    assert!(
        out.contains("Sequence for identity column: public.tickets.id"),
        "{out}"
    );
    assert!(
        out.contains(" id     | integer |           | not null | generated always as identity"),
        "{out}"
    );
    assert!(
        out.contains(
            " n      | bigint  |           | not null | nextval('tickets_n_seq'::regclass)"
        ),
        "{out}"
    );
    // \l
    assert!(out.contains("List of databases"), "{out}");
    assert!(out.contains(" ledger | ledger | UTF8"), "{out}");
    // \du
    assert!(out.contains("List of roles"), "{out}");
    assert!(out.contains(" ledger    | Superuser"), "{out}");
    // \df: the stored procedure with its arguments.
    assert!(
        out.contains(
            " public | pay  |                  | a bigint, b bigint, amount bigint | proc"
        ),
        "{out}"
    );
    // \d+: the extra columns, and the table's indexes.
    assert!(
        out.contains("Storage | Compression | Stats target | Description"),
        "{out}"
    );
    assert!(
        out.contains(" body   | text   |           | not null | ''      | plain"),
        "{out}"
    );
    assert!(
        out.contains("\"notes_pkey\" PRIMARY KEY, btree (id)"),
        "{out}"
    );
    // \dx, \dT: nothing installed or defined, but no error.
    assert!(out.contains("List of installed extensions"), "{out}");
    assert!(out.contains("List of data types"), "{out}");
    // \dt+, \di+, \d+: sizes from storage.
    let sized = |name: &str| {
        out.lines().any(|l| {
            l.contains(&format!(" {name} ")) && (l.contains(" bytes ") || l.contains(" kB "))
        })
    };
    assert!(sized("notes"), "{out}");
    assert!(sized("notes_pkey"), "{out}");
    assert!(sized("accounts"), "{out}");
    // \dp: the default privileges (the one role owns everything).
    assert!(out.contains("Access privileges"), "{out}");
}

#[test]
fn psql_copy_from_and_to_files_and_stdio() {
    let server = TestServer::start();
    let mut data = tempfile::NamedTempFile::new().expect("data file");
    for i in 1..=500 {
        writeln!(data, "{i}\tname {i}\t{}", i * 2).expect("write row");
    }
    writeln!(data, "501\t\\N\t0").expect("write row");
    data.flush().expect("flush");
    let path = data.path().to_str().expect("utf-8 path").to_string();
    let out_file = tempfile::NamedTempFile::new().expect("output file");
    let out_path = out_file.path().to_str().expect("utf-8 path").to_string();
    let out = run(
        &server,
        &format!(
            "create table items (id int primary key, name text, qty int);\n\
             \\copy items from '{path}'\n\
             select count(*), sum(qty), count(name) from items;\n\
             \\copy items (id, name, qty) from stdin with (format csv)\n\
             600,\"quoted, name\",7\n\
             601,,8\n\
             \\.\n\
             select name is null, qty from items where id >= 600 order by id;\n\
             \\copy items from stdin csv header\n\
             id,name,qty\n\
             700,legacy,1\n\
             \\.\n\
             delete from items where id = 700 returning name;\n\
             \\copy (select id, name, qty * 2 as twice from items where id >= 500 order by id desc) to '{out_path}' with csv header\n\
             copy items (id, name) to stdout;\n"
        ),
    );
    // COPY TO: what \copy wrote to a file, and the text format on stdout (NULL as \N).
    let written = std::fs::read_to_string(&out_path).expect("copy output");
    assert_eq!(
        written,
        "id,name,twice\n601,,16\n600,\"quoted, name\",14\n501,,0\n500,name 500,2000\n"
    );
    assert!(out.contains("COPY 4"), "{out}");
    // The old spelling `csv header` skips the header line.
    assert!(out.contains(" legacy\n"), "{out}");
    assert!(out.contains("501\t\\N\n"), "{out}");
    assert!(out.contains("600\tquoted, name\n"), "{out}");
    assert!(out.contains("COPY 501"), "{out}");
    assert!(out.contains("   501 | 250500 |   500"), "{out}");
    assert!(out.contains("COPY 2"), "{out}");
    assert!(out.contains(" f        |   7"), "{out}");
    assert!(out.contains(" t        |   8"), "{out}");
}

#[test]
fn psql_shows_errors_and_keeps_going() {
    let server = TestServer::start();
    let out = server.psql(&["-c", "select * from missing_table"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("relation \"missing_table\" does not exist"),
        "{}",
        stderr(&out)
    );
    // A duplicate key on COPY applies nothing.
    let mut file = tempfile::NamedTempFile::new().expect("script");
    write!(file, "create table k (id int primary key);\ninsert into k values (2);\n\\copy k from stdin\n1\n2\n3\n\\.\n").expect("write");
    let failed = server.psql(&["-f", file.path().to_str().unwrap()]);
    assert!(
        stderr(&failed).contains("duplicate key value violates unique constraint \"k_pkey\""),
        "{}",
        stderr(&failed)
    );
    let count = server.psql(&["-At", "-c", "select count(*) from k"]);
    assert_eq!(
        stdout(&count).trim(),
        "1",
        "a failed COPY must apply no rows"
    );
}

/// A script `pg_dump` (PostgreSQL 15) wrote for a table with an identity column and one with
/// a SERIAL column restores with `ON_ERROR_STOP`, and the sequences continue after the
/// restored rows.
#[test]
fn psql_restores_a_pg_dump_of_serial_and_identity_columns() {
    let server = TestServer::start();
    let dump = common::repo_root().join("tests/fixtures/pg_dump_sequences.sql");
    let out = server.psql(&[
        "-v",
        "ON_ERROR_STOP=1",
        "-f",
        dump.to_str().expect("utf-8 path"),
    ]);
    assert!(
        out.status.success(),
        "restore failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let out = run(
        &server,
        "insert into pdi (v) values ('new') returning id;
         insert into pds (v) values ('new') returning id;
         select count(*) from pdi;
         \\d pdi",
    );
    assert!(out.contains(" id \n----\n  3\n"), "{out}");
    assert!(out.contains(" id \n----\n  4\n"), "{out}");
    assert!(
        out.contains(" id     | integer |           | not null | generated always as identity"),
        "{out}"
    );
    let out = run(&server, "\\d pds");
    assert!(
        out.contains(" id     | integer |           | not null | nextval('pds_id_seq'::regclass)"),
        "{out}"
    );
}

/// `\du` lists the roles with their attributes and memberships, `\dp` a table's grants,
/// from the same catalogs PostgreSQL's psql reads.
#[test]
fn psql_lists_roles_and_privileges() {
    let server = TestServer::start();
    let out = run(
        &server,
        "create role readers;
         create role alice login password 'x' createdb connection limit 3;
         grant readers to alice;
         create table notes (id int primary key);
         grant select, insert on notes to readers;
         \\du
         \\dp notes
         ",
    );
    assert!(
        out.contains(
            " alice     | Create DB                                                 +| {readers}"
        ),
        "{out}"
    );
    assert!(out.contains(" readers   | Cannot login "), "{out}");
    assert!(out.contains("3 connections"), "{out}");
    assert!(out.contains("ledger=arwdDxt/ledger+"), "{out}");
    assert!(out.contains("readers=ar/ledger"), "{out}");
}
