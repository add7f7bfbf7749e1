//! `batch-load`: the ledger's batch workload — `INSERT INTO transfers` of many rows per
//! statement from several connections — with a load generator light enough to leave the
//! machine to the server.
//!
//! pgbench can only make a 1,000-row statement distinct by substituting a variable into every
//! row (tools/bench/workloads.py writes `:base` twice per row), and it does that substitution
//! by moving the rest of the statement for each of the 2,000 occurrences: on a 2-core machine
//! it took about half a core at 100k transfers/s (~5 µs per transfer, more than half of what
//! the server's executor spends). This tool
//! sends the same rows (the same ids and accounts for the same `base`, as literals) through
//! tokio-postgres's simple query protocol, as pgbench `-M simple` does, and spends a few
//! microseconds per statement building them.
//!
//! It prints one line: `transfers_per_s=… statements=… p50_ms=… p99_ms=… max_ms=…`, counting
//! the statements acknowledged within the duration. Any error ends the run with exit code 1.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use hdrhistogram::Histogram;
use rand::Rng;
use tokio_postgres::NoTls;

#[derive(Parser, Debug)]
#[command(about = "Multi-row INSERT INTO transfers from N connections, as fast as they go")]
struct Args {
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long)]
    port: u16,
    #[arg(long, default_value = "ledger")]
    user: String,
    /// Defaults to $PGPASSWORD.
    #[arg(long)]
    password: Option<String>,
    #[arg(long, default_value = "ledger")]
    dbname: String,
    /// Connections, each sending one statement at a time.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Transfers per statement.
    #[arg(long, default_value_t = 1000)]
    rows: usize,
    #[arg(long, default_value_t = 10.0)]
    duration_s: f64,
    /// Debit accounts are 2..=accounts+1; every transfer credits account 1 (the hot one).
    #[arg(long, default_value_t = 100_000)]
    accounts: i64,
    /// Sends the statement prepared once per connection, its values as binary parameters
    /// (`$1`…, six per row), through the extended protocol, instead of as literals.
    #[arg(long)]
    prepared: bool,
}

/// What one connection did.
struct Outcome {
    statements: u64,
    latencies_us: Histogram<u64>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    if args.clients == 0 || args.rows == 0 || args.accounts < 1 || args.duration_s <= 0.0 {
        eprintln!("batch-load: --clients, --rows, --accounts and --duration-s must be positive");
        return ExitCode::from(2);
    }
    match run(Arc::new(args)).await {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("batch-load: {e}");
            ExitCode::from(1)
        }
    }
}

async fn run(args: Arc<Args>) -> Result<String, String> {
    let mut config = tokio_postgres::Config::new();
    config
        .host(&args.host)
        .port(args.port)
        .user(&args.user)
        .dbname(&args.dbname);
    if let Some(password) = args
        .password
        .clone()
        .or_else(|| std::env::var("PGPASSWORD").ok())
    {
        config.password(password);
    }
    let mut clients = Vec::new();
    for _ in 0..args.clients {
        let (client, connection) = config
            .connect(NoTls)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        tokio::spawn(connection);
        clients.push(client);
    }
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.duration_s);
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|client| {
            let args = args.clone();
            tokio::spawn(async move { load(&client, &args, deadline).await })
        })
        .collect();
    let mut statements = 0;
    let mut latencies_us = Histogram::<u64>::new(3).expect("3 significant figures is valid");
    for task in tasks {
        let outcome = task.await.map_err(|e| format!("client task: {e}"))??;
        statements += outcome.statements;
        latencies_us
            .add(&outcome.latencies_us)
            .map_err(|e| format!("histogram: {e}"))?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let ms = |q: f64| latencies_us.value_at_quantile(q) as f64 / 1000.0;
    Ok(format!(
        "transfers_per_s={:.0} statements={statements} p50_ms={:.1} p99_ms={:.1} max_ms={:.1}",
        (statements * args.rows as u64) as f64 / elapsed,
        ms(0.5),
        ms(0.99),
        latencies_us.max() as f64 / 1000.0
    ))
}

/// One connection: statements back to back until the deadline.
async fn load(
    client: &tokio_postgres::Client,
    args: &Args,
    deadline: Instant,
) -> Result<Outcome, String> {
    let mut outcome = Outcome {
        statements: 0,
        latencies_us: Histogram::new(3).expect("3 significant figures is valid"),
    };
    let mut sql = String::new();
    let prepared = if args.prepared {
        let text = parameterized_statement(args.rows);
        let statement = client.prepare(&text).await;
        Some(statement.map_err(|e| format!("PREPARE failed: {e}"))?)
    } else {
        None
    };
    let mut values = Vec::new();
    while Instant::now() < deadline {
        let base = rand::thread_rng().gen_range(2_147_483_648i64..9_000_000_000_000);
        let sent = Instant::now();
        match &prepared {
            Some(prepared) => {
                parameters(&mut values, base, args.rows, args.accounts);
                // ledger and code are int columns: their parameters are i32.
                const ONE: i32 = 1;
                let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = values
                    .chunks(4)
                    .flat_map(|row| {
                        row.iter()
                            .map(|v| v as &(dyn tokio_postgres::types::ToSql + Sync))
                            .chain([&ONE as _, &ONE as _])
                    })
                    .collect();
                client.execute(prepared, &params).await.map(|_| ())
            }
            None => {
                statement(&mut sql, base, args.rows, args.accounts);
                client.simple_query(&sql).await.map(|_| ())
            }
        }
        .map_err(|e| match e.as_db_error() {
            Some(db) => format!("INSERT failed: {} ({})", db.message(), db.code().code()),
            None => format!("INSERT failed: {e}"),
        })?;
        let took = sent.elapsed().as_micros() as u64;
        outcome
            .latencies_us
            .record(took.max(1))
            .map_err(|e| format!("histogram: {e}"))?;
        outcome.statements += 1;
    }
    Ok(outcome)
}

/// The statement tools/bench/workloads.py's batch script makes for `base`, with its
/// arithmetic done here: row k is transfer `base * 1000 + k` from account
/// `2 + (base * 7919 + k * 104729) % accounts` to account 1.
fn statement(sql: &mut String, base: i64, rows: usize, accounts: i64) {
    use std::fmt::Write;
    sql.clear();
    sql.push_str(
        "INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) VALUES\n",
    );
    for k in 0..rows as i64 {
        let (id, debit) = transfer(base, k, accounts);
        let separator = if k + 1 == rows as i64 { ";" } else { ",\n" };
        write!(sql, "({id}, {debit}, 1, 1, 1, 1){separator}").expect("writing to a String");
    }
}

/// The statement `--prepared` sends: `statement`'s rows as parameters, six per row.
fn parameterized_statement(rows: usize) -> String {
    let mut sql = String::from(
        "INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) VALUES\n",
    );
    let rows = (0..rows).map(|k| {
        let p = k * 6;
        format!(
            "(${}, ${}, ${}, ${}, ${}, ${})",
            p + 1,
            p + 2,
            p + 3,
            p + 4,
            p + 5,
            p + 6
        )
    });
    sql.push_str(&rows.collect::<Vec<_>>().join(",\n"));
    sql
}

/// `statement`'s bigint values for `base`, row after row: id, debit and credit account,
/// amount (ledger and code, both 1, are added as the parameters are sent).
fn parameters(values: &mut Vec<i64>, base: i64, rows: usize, accounts: i64) {
    values.clear();
    for k in 0..rows as i64 {
        let (id, debit) = transfer(base, k, accounts);
        values.extend([id, debit, 1, 1]);
    }
}

/// Row `k`'s transfer id and debit account for `base`.
fn transfer(base: i64, k: i64, accounts: i64) -> (i64, i64) {
    (base * 1000 + k, 2 + (base * 7919 + k * 104_729) % accounts)
}

#[cfg(test)]
mod tests {
    use super::{parameterized_statement, parameters, statement};

    #[test]
    fn rows_are_the_pgbench_scripts_rows() {
        let mut sql = String::new();
        statement(&mut sql, 4_000_000_000, 2, 100_000);
        assert_eq!(
            sql,
            "INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) VALUES\n\
             (4000000000000, 2, 1, 1, 1, 1),\n\
             (4000000000001, 4731, 1, 1, 1, 1);"
        );
    }

    #[test]
    fn prepared_rows_are_the_same_rows() {
        assert_eq!(
            parameterized_statement(2),
            "INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) VALUES\n\
             ($1, $2, $3, $4, $5, $6),\n\
             ($7, $8, $9, $10, $11, $12)"
        );
        let mut values = Vec::new();
        parameters(&mut values, 4_000_000_000, 2, 100_000);
        assert_eq!(
            values,
            [4_000_000_000_000, 2, 1, 1, 4_000_000_000_001, 4731, 1, 1]
        );
    }
}
