//! Binding sequence statements and columns: CREATE, ALTER and DROP SEQUENCE, and the
//! sequences SERIAL and identity columns make for CREATE TABLE.

use plan::*;
use sql::{ast, AlterSequence};
use sql::{DataType, ErrorKind, SqlError, SqlResult, Value};

use crate::bind::*;
use crate::bind_expr::data_type_of;
use crate::scope::Scope;

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
        let name = public_name(name)?;
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

    pub(crate) fn alter_sequence(&mut self, a: &AlterSequence) -> SqlResult<Plan> {
        let (_, name) = object_name(&a.name)?;
        let Some(old) = self.catalog.sequences.get(&name).cloned() else {
            if self.catalog.relation_exists(&name) {
                return Err(not_a_sequence(&name));
            }
            if a.if_exists {
                return Ok(Plan::NoOp("ALTER SEQUENCE"));
            }
            return Err(SqlError::undefined_table(&name));
        };
        if a.rename_to.is_some() {
            return Err(SqlError::feature_not_supported(
                "ALTER SEQUENCE ... RENAME TO (column defaults name their sequence)",
            ));
        }
        let given = self.sequence_options(&a.options)?;
        let ty = match &a.data_type {
            Some(t) => data_type_of(t).map_err(|_| {
                SqlError::new(
                    ErrorKind::InvalidParameterValue,
                    "sequence type must be smallint, integer, or bigint",
                )
            })?,
            None => old.ty,
        };
        // A bound that was the old type's own limit follows the type; any other stays.
        let (old_min, old_max) = plan::type_range(old.ty);
        let keep = |bound: i64, limit: i64| (ty == old.ty || bound != limit).then_some(bound);
        let merged = SequenceOptions {
            ty: Some(ty),
            increment: given.increment.or(Some(old.increment)),
            min: given.min.or(Some(keep(old.min, old_min))),
            max: given.max.or(Some(keep(old.max, old_max))),
            start: given.start.or(Some(old.start)),
            cache: given.cache.or(Some(old.cache)),
            cycle: given.cycle.or(Some(old.cycle)),
        };
        let owner = match &a.owned_by {
            None => old.owner.clone(),
            Some(_) if old.identity().is_some() => {
                return Err(SqlError::feature_not_supported(
                    "changing the owner of an identity sequence",
                )
                .with_detail(format!(
                    "Sequence \"{name}\" belongs to an identity column."
                )))
            }
            Some(o) if o.to_string().eq_ignore_ascii_case("none") => None,
            Some(o) => Some(self.sequence_owner(o)?),
        };
        let mut sequence = SequenceDef::new(name, &merged, owner)?;
        sequence.id = old.id;
        let restart = match &a.restart {
            None => None,
            Some(None) => Some(sequence.start),
            Some(Some(e)) => Some(self.option_int(e)?),
        };
        if let Some(value) = restart {
            sequence.check_restart(value)?;
        }
        Ok(Plan::Ddl(DdlPlan::AlterSequence { sequence, restart }))
    }

    /// `OWNED BY table.column`: the table must exist and have the column.
    fn sequence_owner(&mut self, name: &ast::ObjectName) -> SqlResult<SequenceOwner> {
        let parts: Vec<String> = name.0.iter().map(|p| p.to_string()).collect();
        // `public.table.column` names the same column.
        let parts = match parts.as_slice() {
            [schema, rest @ ..] if rest.len() == 2 && schema == "public" => rest,
            all => all,
        };
        let [table, column] = parts else {
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

    /// A default as `\\d` and information_schema show it: as written, except a bare
    /// `nextval` of a sequence, shown as PostgreSQL shows it (`nextval('s'::regclass)`).
    pub(crate) fn default_text(&self, bound: Option<&Expr>, written: &ast::Expr) -> String {
        let call = match bound {
            Some(Expr::Cast { expr, .. }) => expr.as_ref(),
            Some(e) => e,
            None => return written.to_string(),
        };
        if let Expr::Function {
            func: Func::NextVal,
            args,
            ..
        } = call
        {
            if let [Expr::Literal(arg, _)] = args.as_slice() {
                if let Ok(sequence) = self.catalog.sequence_named(arg) {
                    return format!("nextval('{}'::regclass)", sequence.name);
                }
            }
        }
        written.to_string()
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
        let name = match self.sequence_names.pop_front() {
            Some(given) => public_name(&ast::ObjectName::from(
                given
                    .split('.')
                    .map(|p| ast::Ident::with_quote('"', p.trim_matches('"')))
                    .collect::<Vec<_>>(),
            ))?,
            None => {
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
                name
            }
        };
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
