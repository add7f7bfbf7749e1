//! Binding sequence statements and columns: CREATE SEQUENCE, DROP SEQUENCE, and the
//! sequences SERIAL and identity columns make for CREATE TABLE.

use sql::ast;
use sql::{DataType, ErrorKind, SqlError, SqlResult, Value};

use crate::bind::*;
use crate::bind_expr::data_type_of;
use crate::catalog::ColumnDef;
use crate::expr::{EvalEnv, Expr, Func};
use crate::plan::*;
use crate::scope::Scope;
use crate::sequence::{Identity, SequenceDef, SequenceOptions, SequenceOwner};

/// The integer type a SERIAL type name stands for.
pub(crate) fn serial_type(t: &ast::DataType) -> Option<DataType> {
    match t.to_string().to_ascii_lowercase().as_str() {
        "smallserial" | "serial2" => Some(DataType::Int2),
        "serial" | "serial4" => Some(DataType::Int4),
        "bigserial" | "serial8" => Some(DataType::Int8),
        _ => None,
    }
}

/// `nextval('name')`, as a SERIAL or identity column's default calls it.
fn nextval_of(sequence: &str) -> Expr {
    Expr::Function {
        func: Func::NextVal,
        args: vec![Expr::Literal(
            Value::Text(sequence.to_string()),
            DataType::Text,
        )],
        ty: DataType::Int8,
    }
}

impl Binder<'_> {
    pub(crate) fn create_sequence(
        &mut self,
        if_not_exists: bool,
        name: &ast::ObjectName,
        data_type: Option<&ast::DataType>,
        options: &[ast::SequenceOptions],
        owned_by: Option<&ast::ObjectName>,
    ) -> SqlResult<Plan> {
        let (schema, name) = object_name(name)?;
        if schema.as_deref().is_some_and(|s| s != "public") {
            return Err(SqlError::feature_not_supported(format!(
                "schema \"{}\"",
                schema.unwrap_or_default()
            )));
        }
        let mut parsed = self.sequence_options(options)?;
        if let Some(t) = data_type {
            parsed.ty = Some(data_type_of(t).map_err(|_| {
                SqlError::new(
                    ErrorKind::InvalidParameterValue,
                    "sequence type must be smallint, integer, or bigint",
                )
            })?);
        }
        let owner = match owned_by {
            None => None,
            Some(o) if o.to_string().eq_ignore_ascii_case("none") => None,
            Some(o) => Some(self.sequence_owner(o)?),
        };
        let sequence = SequenceDef::new(name, &parsed, owner)?;
        Ok(Plan::Ddl(DdlPlan::CreateSequence {
            sequence,
            if_not_exists,
        }))
    }

    /// `OWNED BY table.column`: the table must exist and have the column.
    fn sequence_owner(&mut self, name: &ast::ObjectName) -> SqlResult<SequenceOwner> {
        let parts: Vec<String> = name.0.iter().map(|p| p.to_string()).collect();
        let [table, column] = parts.as_slice() else {
            return Err(SqlError::syntax(
                "invalid OWNED BY option: specify OWNED BY table.column or OWNED BY NONE",
            ));
        };
        let table = self.user_table(table.trim_matches('"'))?;
        let column = column.trim_matches('"');
        if table.column_index(column).is_none() {
            return Err(SqlError::undefined_column(&format!(
                "{column}\" of relation \"{}",
                table.name
            )));
        }
        Ok(SequenceOwner {
            table: table.id,
            column: column.to_string(),
            identity: None,
        })
    }

    fn sequence_options(&mut self, options: &[ast::SequenceOptions]) -> SqlResult<SequenceOptions> {
        let mut out = SequenceOptions::default();
        for option in options {
            match option {
                ast::SequenceOptions::IncrementBy(e, _) => {
                    out.increment = Some(self.option_int(e)?)
                }
                ast::SequenceOptions::MinValue(e) => {
                    out.min = Some(e.as_ref().map(|e| self.option_int(e)).transpose()?)
                }
                ast::SequenceOptions::MaxValue(e) => {
                    out.max = Some(e.as_ref().map(|e| self.option_int(e)).transpose()?)
                }
                ast::SequenceOptions::StartWith(e, _) => out.start = Some(self.option_int(e)?),
                ast::SequenceOptions::Cache(e) => out.cache = Some(self.option_int(e)?),
                // sqlparser's flag is true for NO CYCLE.
                ast::SequenceOptions::Cycle(no) => out.cycle = Some(!no),
            }
        }
        Ok(out)
    }

    /// A sequence option's number.
    fn option_int(&mut self, e: &ast::Expr) -> SqlResult<i64> {
        let bound = self.expr(e, &Scope::default(), Some(DataType::Int8))?;
        match bound.eval(&[], &EvalEnv::without_subqueries(&[], 0))? {
            Value::Int(v) => Ok(v),
            other => Err(SqlError::new(
                ErrorKind::InvalidParameterValue,
                format!(
                    "a sequence option must be an integer, not {}",
                    other.natural_type().pg_name()
                ),
            )),
        }
    }

    /// Makes column `def` of table `table` a SERIAL (identity None) or identity column: a
    /// sequence named as PostgreSQL names it, the column's default calling it, NOT NULL.
    /// Returns the sequence, owned by the column (its table's id filled in when created).
    pub(crate) fn sequence_column(
        &mut self,
        table: &str,
        def: &mut ColumnDef,
        identity: Option<Identity>,
        options: &[ast::SequenceOptions],
        taken: &[SequenceDef],
    ) -> SqlResult<SequenceDef> {
        if !matches!(def.ty, DataType::Int2 | DataType::Int4 | DataType::Int8) {
            return Err(SqlError::new(
                ErrorKind::InvalidParameterValue,
                "identity column type must be smallint, integer, or bigint",
            ));
        }
        let base = format!("{table}_{}_seq", def.name);
        let mut name = base.clone();
        let mut n = 0;
        while self.catalog.relation_exists(&name)
            || name == table
            || taken.iter().any(|s| s.name == name)
        {
            n += 1;
            name = format!("{base}{n}");
        }
        let mut parsed = self.sequence_options(options)?;
        parsed.ty = Some(def.ty);
        let owner = SequenceOwner {
            table: 0,
            column: def.name.clone(),
            identity,
        };
        let sequence = SequenceDef::new(name, &parsed, Some(owner))?;
        def.default = Some(self.assign(nextval_of(&sequence.name), def.ty)?);
        def.default_sql = identity
            .is_none()
            .then(|| format!("nextval('{}'::regclass)", sequence.name));
        def.nullable = false;
        Ok(sequence)
    }
}
