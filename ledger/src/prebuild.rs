//! Building an INSERT's rows on the session's thread before the command is proposed
//! (`InsertSource::Packed`), and staging one locally, when every value and default evaluates
//! the same anywhere: the one part of applying writes that `server/` calls.

use plan::{
    Catalog, EvalEnv, Expr, Func, InsertPlan, InsertSource, OnConflict, TableDef, WritePlan,
    DEFAULT_MARKER,
};
use sql::{ColumnFill, DataType, Packer, RowShape, SqlError, SqlResult, Value, ValueRows};

use crate::apply::{build_row, check_row, conform_value, eval_values, returning, RowBuilder};
use crate::command::{Staged, WriteOp};
use crate::row::encode_key;

/// Whether an expression can be evaluated on the session's thread for rows that are then
/// recorded in the log: given the statement's parameters and `now()` it gives what the
/// executor would (no subquery, nothing that reads the catalog or a sequence), or draws a
/// random value that the log then carries.
fn evaluates_at_the_session(expr: &Expr) -> bool {
    // (A bulk INSERT's values are mostly these: no walk.)
    if matches!(expr, Expr::Literal(..) | Expr::Param(..)) {
        return true;
    }
    let mut same = true;
    expr.visit(&mut |e| match e {
        Expr::Subquery { .. } | Expr::InSubquery { .. } => same = false,
        Expr::Function { func, .. } => {
            same &= !matches!(
                func,
                Func::NextVal
                    | Func::CurrVal
                    | Func::SetVal
                    | Func::LastVal
                    | Func::GetSerialSequence
                    | Func::FormatType
                    | Func::GetExpr
                    | Func::GetIndexDef
                    | Func::GetConstraintDef
                    | Func::RegClassName
                    | Func::GetFunctionArguments
            ) && !func.reads_storage()
        }
        _ => {}
    });
    same
}

/// An INSERT ... VALUES with its rows built before it is proposed (`InsertSource::Packed`),
/// when the values and the defaults they leave to fill evaluate the same anywhere: the
/// evaluation, defaults and type conformance then run on the session's thread instead of the
/// executor's, which only checks and stores the rows. The rows are exactly what the executor
/// would build (the same `build_row`, with the command's parameters and `now()`), and the
/// plan keeps the table's shape version, so a schema change in between refuses the command.
/// None (propose the plan as it is) when anything is out of reach here, including a value
/// that fails to evaluate: the executor then reports the error as it always has. Rows that
/// draw random values can only be built here, so their error is the answer.
pub fn prebuild_insert(
    plan: &WritePlan,
    catalog: &Catalog,
    params: &[Value],
    now_micros: i64,
) -> Option<SqlResult<WritePlan>> {
    let (p, table, rows) = prebuildable(plan, catalog)?;
    if !column_defaults(table).all(evaluates_at_the_session)
        || !rows.iter().flatten().all(evaluates_at_the_session)
    {
        return None;
    }
    let env = EvalEnv::without_subqueries(params, now_micros).with_random(true);
    let rows_values = rows
        .iter()
        .map(|values| values.iter().map(|e| e.eval(&[], &env)));
    let marked = rows
        .iter()
        .flatten()
        .any(|e| matches!(e, Expr::Literal(Value::Text(t), _) if t == DEFAULT_MARKER));
    match pack_rows(p, table, rows_values, &env, marked) {
        Ok(plan) => Some(Ok(plan)),
        Err(e)
            if column_defaults(table)
                .chain(rows.iter().flatten())
                .any(|e| e.calls(Func::draws_random)) =>
        {
            Some(Err(e))
        }
        Err(_) => None,
    }
}

/// `prebuild_insert` for a large INSERT ... VALUES of integer literals straight from the
/// row reader's `rows`, without an expression bound for each value: `plan` is the statement
/// bound with its first row alone (`ValueRows::head`), which checked everything but the
/// other rows. Each value is what binding it would give (`plan::integer_literal_number`),
/// so the rows are the ones `prebuild_insert` builds from the whole statement bound. None
/// (bind the whole statement) when a row has another width, a value is anything but an
/// integer literal in its column's range, or a default cannot be evaluated here (a random
/// draw, a sequence): the whole statement then gives its own answer.
pub fn prebuild_literal_insert(
    plan: &WritePlan,
    catalog: &Catalog,
    rows: &ValueRows,
    now_micros: i64,
) -> Option<WritePlan> {
    let (p, table, _) = prebuildable(plan, catalog)?;
    let types: Vec<DataType> = p
        .target_columns
        .iter()
        .map(|&c| table.columns[c].ty)
        .collect();
    if !column_defaults(table).all(evaluates_at_the_session)
        || (0..rows.len()).any(|i| rows.row(i).len() != types.len())
    {
        return None;
    }
    // (Random draws are not allowed here: a default that draws fails to evaluate.)
    let env = EvalEnv::without_subqueries(&[], now_micros);
    // Every column given is an integer one or a NUMERIC that integer literals fill (a
    // ledger amount): the numbers, each checked against its column's range, are packed
    // as the values binding them gives.
    let (ranges, numeric): (Vec<_>, Vec<bool>) = types
        .iter()
        .map(|&ty| plan::literal_integers(ty))
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .unzip();
    let Some(shape) = row_shape(p, table, &env) else {
        // A default that differs from row to row: each row built whole.
        let rows_values = (0..rows.len()).map(|i| {
            rows.row(i).iter().zip(&types).map(|(&id, &ty)| {
                plan::integer_literal_value(rows, id, ty)
                    .ok_or_else(|| SqlError::internal("not an integer literal"))
            })
        });
        return build_and_pack(p, table, rows_values, &env).ok();
    };
    let number = |id, ty, numeric| {
        let read_as = if numeric { DataType::Int8 } else { ty };
        plan::integer_literal_number(rows, id, read_as)
    };
    let mut packer = Packer::default();
    let mut built = Vec::with_capacity(types.len());
    for i in 0..rows.len() {
        // When every value is an integer literal, the row reader read their numbers with
        // them: only the columns' ranges are left to check.
        let given = match rows.all_integers() {
            true => {
                let given = rows.integer_row(i)?;
                let in_range = given.iter().zip(&ranges).all(|(n, r)| r.contains(n));
                in_range.then_some(given)?
            }
            false => {
                built.clear();
                for ((&id, &ty), &numeric) in rows.row(i).iter().zip(&types).zip(&numeric) {
                    built.push(number(id, ty, numeric)?);
                }
                &built
            }
        };
        packer.push_shaped_ints(&shape, given, &numeric);
        if i == 0 {
            packer.reserve_rows(rows.len() - 1);
        }
    }
    Some(packed_plan(p, table, packer))
}

/// The insert of `plan` with its table and its VALUES rows, when it can be built before it
/// is proposed: the table as the plan saw it, and no ON CONFLICT DO UPDATE drawing random
/// values (the executor applying built rows could not draw them).
fn prebuildable<'a>(
    plan: &'a WritePlan,
    catalog: &'a Catalog,
) -> Option<(&'a InsertPlan, &'a TableDef, &'a [Vec<Expr>])> {
    let WritePlan::Insert(p) = plan else {
        return None;
    };
    let InsertSource::Values(rows) = &p.source else {
        return None;
    };
    let table = catalog
        .table_by_id(p.table.id)
        .filter(|t| t.shape_version == p.table.shape_version)?;
    let conflict_draws = p
        .on_conflict
        .as_ref()
        .and_then(OnConflict::update)
        .is_some_and(|(assignments, _)| {
            assignments.iter().any(|(_, e)| e.calls(Func::draws_random))
        });
    (!conflict_draws).then_some((p, table, rows.as_slice()))
}

fn column_defaults(table: &TableDef) -> impl Iterator<Item = &Expr> {
    table.columns.iter().filter_map(|c| c.default.as_ref())
}

/// `p` with `rows` (each the values of its target columns) built — defaults filled in,
/// values conformed — and packed, row by row. `marked` when a value may be the `DEFAULT`
/// marker, which only `RowBuilder` fills in.
fn pack_rows<V: IntoIterator<Item = SqlResult<Value>>>(
    p: &InsertPlan,
    table: &TableDef,
    rows: impl Iterator<Item = V>,
    env: &EvalEnv<'_>,
    marked: bool,
) -> SqlResult<WritePlan> {
    let Some(shape) = row_shape(p, table, env).filter(|_| !marked) else {
        return build_and_pack(p, table, rows, env);
    };
    let mut packer = Packer::default();
    let mut given = Vec::with_capacity(p.target_columns.len());
    for values in rows {
        given.clear();
        for (value, &column) in values.into_iter().zip(&p.target_columns) {
            let mut value = value?;
            conform_value(&mut value, table.columns[column].ty)?;
            given.push(value);
        }
        packer.push_shaped(&shape, &given);
    }
    Ok(packed_plan(p, table, packer))
}

/// `pack_rows` without a row shape: each row built whole by `RowBuilder` (defaults
/// evaluated as each row needs them, `DEFAULT` markers filled in), then packed.
fn build_and_pack<V: IntoIterator<Item = SqlResult<Value>>>(
    p: &InsertPlan,
    table: &TableDef,
    rows: impl Iterator<Item = V>,
    env: &EvalEnv<'_>,
) -> SqlResult<WritePlan> {
    let mut builder = RowBuilder::new(table, &p.target_columns);
    let (mut packer, mut row) = (Packer::default(), Vec::new());
    for values in rows {
        builder.build_into(&mut row, values, env)?;
        packer.push(&row);
    }
    Ok(packed_plan(p, table, packer))
}

/// The shape of `p`'s rows when every column it leaves to its default gets the same value
/// in every row (no volatile call but `now()`, which is the statement's): those defaults
/// evaluated and conformed once. None when one differs from row to row or fails to
/// evaluate (`RowBuilder` then evaluates it as each row needs it, and reports its error
/// where it always has).
fn row_shape(p: &InsertPlan, table: &TableDef, env: &EvalEnv<'_>) -> Option<RowShape> {
    let mut given_at = vec![None; table.columns.len()];
    for (place, &column) in p.target_columns.iter().enumerate() {
        given_at[column] = Some(place);
    }
    let mut fills = Vec::with_capacity(table.columns.len());
    for (column, place) in table.columns.iter().zip(given_at) {
        fills.push(match place {
            Some(place) => ColumnFill::Given(place),
            None => {
                let mut value = match &column.default {
                    None => Value::Null,
                    Some(d) if d.calls(|f| f.is_volatile() && f != Func::Now) => return None,
                    Some(d) => d.eval(&[], env).ok()?,
                };
                conform_value(&mut value, column.ty).ok()?;
                ColumnFill::Fixed(value)
            }
        });
    }
    Some(RowShape::new(fills))
}

/// `p` with the rows `packer` packed, whole rows of `table`.
fn packed_plan(p: &InsertPlan, table: &TableDef, packer: Packer) -> WritePlan {
    WritePlan::Insert(InsertPlan {
        table: p.table.clone(),
        source: InsertSource::Packed(packer.finish()),
        target_columns: (0..table.columns.len()).collect(),
        on_conflict: p.on_conflict.clone(),
        returning: p.returning.clone(),
        call: p.call,
    })
}

/// Stages an INSERT ... VALUES without the executor when nothing in storage can change its
/// outcome: a table with no primary key and no index (no duplicate to find), values without
/// subqueries. The session then saves a round trip to the executor; the commit applies the
/// rows exactly as if the executor had staged them. `overlay_len` and `earlier` are the
/// transaction's rows and encoded bytes staged so far (see `Staged::push_op`).
pub fn stage_insert_locally(
    plan: &WritePlan,
    table: &TableDef,
    params: &[Value],
    now_micros: i64,
    (overlay_len, earlier): (usize, usize),
) -> Option<SqlResult<Staged>> {
    let WritePlan::Insert(p) = plan else {
        return None;
    };
    if table.has_primary_key()
        || !table.indexes.is_empty()
        || p.on_conflict.is_some()
        || p.table.shape_version != table.shape_version
        || plan::write_calls(plan, table, Func::uses_sequences)
    {
        return None;
    }
    let InsertSource::Values(rows) = &p.source else {
        return None;
    };
    if rows
        .iter()
        .flatten()
        .chain(p.returning.iter().flatten())
        .any(Expr::has_subquery)
    {
        return None;
    }
    // The rows go into the commit as built here, so they may draw random values.
    let env = EvalEnv::without_subqueries(params, now_micros).with_random(true);
    let stage = || -> SqlResult<Staged> {
        let mut staged = Staged::default();
        for (n, values) in eval_values(rows, &env)?.into_iter().enumerate() {
            let row = build_row(table, &p.target_columns, values, &env)?;
            check_row(table, &row, &env)?;
            let key = encode_key(&[Value::Int(-1 - (overlay_len + n) as i64)])?;
            returning(p.returning.as_ref(), &row, &env, &mut staged.rows)?;
            staged.rows_affected += 1;
            staged.overlay.push(((table.id, key), Some(row.clone())));
            staged.push_op(
                WriteOp::Insert {
                    table: p.table.clone(),
                    row,
                    on_conflict: None,
                },
                earlier,
            )?;
        }
        Ok(staged)
    };
    Some(stage())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use plan::{Catalog, EvalEnv, InsertPlan, InsertSource, Plan, TableDef, WritePlan};
    use planner::{bind, catalog_with_table};
    use sql::{PackedRows, Value};

    use super::{build_row, eval_values, prebuild_insert, RowBuilder};

    fn catalog() -> Catalog {
        catalog_with_table(
            &Catalog::default(),
            "CREATE TABLE t (i INT PRIMARY KEY, b BIGINT DEFAULT 7, ok BOOLEAN NOT NULL \
             DEFAULT false, at TIMESTAMPTZ DEFAULT now(), x TEXT)",
        )
        .unwrap()
    }

    fn write(catalog: &Catalog, text: &str) -> WritePlan {
        let parsed = sql::parse(text).unwrap().remove(0);
        match bind(catalog, &parsed, &[]).unwrap().plan {
            Plan::Write(plan, _) => (*plan).clone(),
            _ => panic!("not a write: {text}"),
        }
    }

    /// The rows `RowBuilder` builds from the VALUES of `plan`, an INSERT into `table`.
    fn built_rows(table: &TableDef, plan: &WritePlan, env: &EvalEnv<'_>) -> Vec<Vec<Value>> {
        let WritePlan::Insert(p) = plan else {
            panic!("not an insert: {plan:?}")
        };
        let InsertSource::Values(values) = &p.source else {
            panic!("not VALUES: {plan:?}")
        };
        eval_values(values, env)
            .unwrap()
            .into_iter()
            .map(|v| build_row(table, &p.target_columns, v, env).unwrap())
            .collect()
    }

    /// The packed rows of a prebuilt INSERT.
    fn packed_rows(plan: &WritePlan) -> &PackedRows {
        match plan {
            WritePlan::Insert(InsertPlan {
                source: InsertSource::Packed(rows),
                ..
            }) => rows,
            _ => panic!("not a prebuilt insert: {plan:?}"),
        }
    }

    #[test]
    fn prebuilt_rows_are_the_rows_the_executor_would_build() {
        let catalog = catalog();
        let table = catalog.tables["t"].clone();
        let now = 1_790_000_000_000_000;
        let plan = write(
            &catalog,
            "INSERT INTO t (i, x, b) VALUES (1, 'a', DEFAULT), (2 * 3, NULL, 2 + 2)",
        );
        let WritePlan::Insert(p) = &plan else {
            unreachable!()
        };
        let env = EvalEnv::without_subqueries(&[], now);
        let expected = built_rows(&table, &plan, &env);
        let Some(Ok(WritePlan::Insert(prebuilt))) = prebuild_insert(&plan, &catalog, &[], now)
        else {
            panic!("constant VALUES are prebuilt");
        };
        let InsertSource::Packed(packed) = &prebuilt.source else {
            panic!("prebuilt plans carry rows");
        };
        let rows = packed.unpack().unwrap();
        // Values compare by their debug form (they have no PartialEq: NULL is not equal to
        // itself in SQL).
        assert_eq!(format!("{rows:?}"), format!("{expected:?}"));
        assert!(matches!(rows[0][1], Value::Int(7)), "the default of b");
        assert!(matches!(rows[1][1], Value::Int(4)));
        assert!(
            matches!(rows[1][3], Value::TimestampTz(t) if t == now),
            "now() is the command's"
        );
        assert_eq!(prebuilt.target_columns, vec![0, 1, 2, 3, 4]);
        assert_eq!(prebuilt.table, p.table);
    }

    /// Rows whose defaults are the statement's are packed through a row shape (the defaults
    /// packed once); the bytes are those of the rows `RowBuilder` builds.
    #[test]
    fn shaped_rows_are_the_rows_the_builder_builds() {
        let catalog = catalog_with_table(
            &Catalog::default(),
            "CREATE TABLE s (a SMALLINT, b INT DEFAULT 2, c BIGINT, d NUMERIC DEFAULT 1.5, \
             e TEXT DEFAULT 'e', at TIMESTAMPTZ DEFAULT now(), ok BOOLEAN DEFAULT true)",
        )
        .unwrap();
        let table = catalog.tables["s"].clone();
        let now = 1_790_000_000_000_000;
        let env = EvalEnv::without_subqueries(&[], now);
        for text in [
            "INSERT INTO s (c, a) VALUES (1, 2), (3 * 4, -5), (NULL, NULL)",
            "INSERT INTO s (e, d, b) VALUES ('x', 2, 3), (NULL, 0.25, '7')",
            "INSERT INTO s VALUES (1, 2, 3, 4, 'five', '2026-11-24 10:00:00+00', false)",
        ] {
            let plan = write(&catalog, text);
            let expected = built_rows(&table, &plan, &env);
            let Some(Ok(prebuilt)) = prebuild_insert(&plan, &catalog, &[], now) else {
                panic!("not prebuilt: {text}");
            };
            assert_eq!(
                packed_rows(&prebuilt).as_bytes(),
                PackedRows::pack(&expected).as_bytes(),
                "{text}"
            );
        }
    }

    #[test]
    fn a_statement_evaluates_fixed_defaults_once_and_random_ones_per_row() {
        let catalog = catalog_with_table(
            &Catalog::default(),
            "CREATE TABLE r (i INT, u UUID DEFAULT gen_random_uuid(), at TIMESTAMPTZ DEFAULT now())",
        )
        .unwrap();
        let table = catalog.tables["r"].clone();
        let now = 1_790_000_000_000_000;
        let env = EvalEnv::without_subqueries(&[], now).with_random(true);
        let mut builder = RowBuilder::new(&table, &[0]);
        let rows: Vec<Vec<Value>> = (0..3)
            .map(|i| {
                let mut row = Vec::new();
                builder
                    .build_into(&mut row, [Ok(Value::Int(i))], &env)
                    .unwrap();
                row
            })
            .collect();
        let uuids: std::collections::HashSet<String> =
            rows.iter().map(|r| format!("{:?}", r[1])).collect();
        assert_eq!(
            uuids.len(),
            3,
            "a random default is drawn for every row: {rows:?}"
        );
        assert!(rows
            .iter()
            .all(|r| matches!(r[2], Value::TimestampTz(t) if t == now)));
        assert!(builder.defaults[1].is_none());
        assert!(matches!(builder.defaults[2], Some(Value::TimestampTz(_))));
    }

    /// The statement `text` bound with its first row alone, and its rows.
    fn head_and_rows(catalog: &Catalog, text: &str) -> (WritePlan, sql::ValueRows) {
        let parsed = sql::parse(text).unwrap().remove(0);
        let sql::Parsed::InsertValues { statement, rows } = parsed.parsed else {
            panic!("not read by the row reader: {text}");
        };
        let head = sql::ParsedStatement {
            parsed: sql::Parsed::InsertValues {
                statement,
                rows: Box::new(rows.head(1)),
            },
            text: String::new(),
        };
        match bind(catalog, &head, &[]).unwrap().plan {
            Plan::Write(plan, _) => ((*plan).clone(), *rows),
            _ => panic!("not a write: {text}"),
        }
    }

    #[test]
    fn literal_rows_build_as_the_whole_statement_bound() {
        // One table per catalog: each numbers its table alike.
        let t = catalog();
        let n = catalog_with_table(
            &Catalog::default(),
            "CREATE TABLE n (a SMALLINT, b INT NOT NULL, c BIGINT DEFAULT 3, \
             at TIMESTAMPTZ DEFAULT now(), x TEXT DEFAULT 'x')",
        )
        .unwrap();
        let m = catalog_with_table(
            &Catalog::default(),
            "CREATE TABLE m (id BIGINT PRIMARY KEY, amount NUMERIC(39,0), fee NUMERIC(20,2))",
        )
        .unwrap();
        let catalog_of = |text: &str| match text {
            t if t.contains(" n ") => &n,
            t if t.contains(" m ") => &m,
            _ => &t,
        };
        let now = 1_790_000_000_000_000;
        for text in [
            "INSERT INTO t (i, b) VALUES (1, 2), (-3, -9223372036854775808), (007, 4)",
            "INSERT INTO t (b, i) VALUES (9223372036854775807, 2147483647), (0, -2147483648)",
            "INSERT INTO n VALUES (-32768, 1, 2), (32767, -1, -2)",
            "INSERT INTO n (c, b) VALUES (1, 2), (3, 4)",
            // NOT NULL is the executor's to check, for both.
            "INSERT INTO n (a, c) VALUES (1, 2), (3, 4)",
            // A ledger amount's NUMERIC(39,0) takes integer literals as they are.
            "INSERT INTO m (id, amount) VALUES (1, 2), (3, -9223372036854775808), (5, 0)",
        ] {
            let catalog = catalog_of(text);
            let whole = write(catalog, text);
            let Some(Ok(expected)) = prebuild_insert(&whole, catalog, &[], now) else {
                panic!("not prebuilt: {text}");
            };
            let (head, rows) = head_and_rows(catalog, text);
            let built = super::prebuild_literal_insert(&head, catalog, &rows, now)
                .unwrap_or_else(|| panic!("not built from literals: {text}"));
            assert_eq!(format!("{built:?}"), format!("{expected:?}"), "{text}");
            assert_eq!(
                packed_rows(&built).as_bytes(),
                packed_rows(&expected).as_bytes(),
                "{text}"
            );
        }
        for text in [
            "INSERT INTO t (i, b) VALUES (1, 2), (2, 3 + 4)",
            "INSERT INTO t (i, x) VALUES (1, 'a'), (2, 'b')",
            "INSERT INTO t (i, b) VALUES (1, 2), (2, NULL)",
            "INSERT INTO n (a, b) VALUES (1, 2), (32768, 3)",
            "INSERT INTO n (a, b) VALUES (1, 2), (-32769, 3)",
            "INSERT INTO n (a, b) VALUES (1, 2), (3)",
            "INSERT INTO t (i, b) VALUES (1, 2), ($1, 3)",
            // A scale to fill, or a number past a bigint: bound as a whole.
            "INSERT INTO m (id, fee) VALUES (1, 2), (3, 4)",
            "INSERT INTO m (id, amount) VALUES (1, 2), (3, 9223372036854775808)",
        ] {
            let catalog = catalog_of(text);
            let (head, rows) = head_and_rows(catalog, text);
            assert!(
                super::prebuild_literal_insert(&head, catalog, &rows, now).is_none(),
                "{text}"
            );
        }
        let random = catalog_with_table(
            &Catalog::default(),
            "CREATE TABLE r (i INT, u UUID DEFAULT gen_random_uuid())",
        )
        .unwrap();
        let (head, rows) = head_and_rows(&random, "INSERT INTO r (i) VALUES (1), (2)");
        assert!(super::prebuild_literal_insert(&head, &random, &rows, now).is_none());
    }

    #[test]
    fn what_might_differ_or_fail_is_left_to_the_executor() {
        let catalog = catalog();
        let text_param = [Value::Text("not a number".into())];
        for (text, params) in [
            ("INSERT INTO t (i, b) VALUES (1, (SELECT 1))", &[][..]),
            ("INSERT INTO t (i) VALUES (2147483647 + 1)", &[]),
            ("INSERT INTO t (i, b) VALUES (1, $1)", &text_param),
            ("INSERT INTO t (i) SELECT 1", &[]),
        ] {
            let plan = write(&catalog, text);
            assert!(
                prebuild_insert(&plan, &catalog, params, 0).is_none(),
                "{text}"
            );
        }
        let plan = write(&catalog, "INSERT INTO t (i) VALUES (1)");
        let mut changed = catalog.clone();
        let mut table = (*changed.tables["t"]).clone();
        table.shape_version += 1;
        changed.tables.insert("t".into(), Arc::new(table));
        assert!(
            prebuild_insert(&plan, &changed, &[], 0).is_none(),
            "planned against another shape"
        );
    }

    #[test]
    fn random_values_are_drawn_once_here_and_their_errors_answered_here() {
        let catalog = catalog();
        let plan = write(
            &catalog,
            "INSERT INTO t (i, b) VALUES (1, (random() * 1000)::int), (2, (random() * 1000)::int)",
        );
        let Some(Ok(WritePlan::Insert(prebuilt))) = prebuild_insert(&plan, &catalog, &[], 0) else {
            panic!("random() in VALUES is prebuilt");
        };
        let InsertSource::Packed(packed) = &prebuilt.source else {
            panic!("prebuilt plans carry rows");
        };
        assert_eq!(packed.unpack().unwrap().len(), 2);
        let plan = write(
            &catalog,
            "INSERT INTO t (i, b) VALUES (2147483647 + 1, (random() * 10)::int)",
        );
        let e = prebuild_insert(&plan, &catalog, &[], 0)
            .expect("answered here")
            .unwrap_err();
        assert_eq!(e.sqlstate(), "22003");
    }
}
