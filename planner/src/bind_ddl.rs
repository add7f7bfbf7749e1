//! Binding schema statements: CREATE TABLE, CREATE INDEX, ALTER TABLE, and COPY FROM.

use std::sync::Arc;

use plan::*;
use sql::ast;
use sql::{DataType, ErrorKind, SqlError, SqlResult};

use crate::bind::*;
use crate::bind_expr::*;
use crate::scope::Scope;

impl Binder<'_> {
    pub(crate) fn create_table(&mut self, create: &ast::CreateTable) -> SqlResult<Plan> {
        if create.temporary {
            return Err(SqlError::feature_not_supported("temporary tables"));
        }
        if create.query.is_some() {
            return Err(SqlError::feature_not_supported("CREATE TABLE AS"));
        }
        let name = public_name(&create.name)?;
        if create.columns.is_empty() {
            return Err(SqlError::feature_not_supported("tables without columns"));
        }
        let mut columns: Vec<ColumnDef> = Vec::new();
        let mut primary_key: Vec<usize> = Vec::new();
        let mut primary_key_name = None;
        let mut check_asts: Vec<(Option<String>, ast::Expr)> = Vec::new();
        let mut uniques: Vec<(Option<String>, Vec<usize>)> = Vec::new();
        let mut sequences: Vec<SequenceDef> = Vec::new();
        let mut foreign_key_asts: Vec<(Vec<String>, ast::ForeignKeyConstraint)> = Vec::new();
        for (i, c) in create.columns.iter().enumerate() {
            let column_name = ident(&c.name);
            if columns.iter().any(|x| x.name == column_name) {
                return Err(SqlError::new(
                    ErrorKind::DuplicateColumn,
                    format!("column \"{column_name}\" specified more than once"),
                ));
            }
            let serial = crate::bind_sequence::serial_type(&c.data_type);
            let ty = match serial {
                Some(ty) => ty,
                None => self.resolve_type(&c.data_type)?,
            };
            storable_column_type(ty)?;
            let mut def = ColumnDef {
                name: column_name.clone(),
                ty,
                nullable: true,
                default: None,
                default_sql: None,
            };
            let mut generated = None;
            for option in &c.options {
                if self.nullability_or_default(&mut def, &option.option)? {
                    continue;
                }
                match &option.option {
                    ast::ColumnOption::Generated {
                        generated_as: how @ (ast::GeneratedAs::Always | ast::GeneratedAs::ByDefault),
                        sequence_options,
                        generation_expr: None,
                        ..
                    } => {
                        let identity = if *how == ast::GeneratedAs::Always {
                            Identity::Always
                        } else {
                            Identity::ByDefault
                        };
                        if generated.is_some() {
                            return Err(SqlError::syntax(format!(
                                "multiple identity specifications for column \"{column_name}\" of table \"{name}\""
                            )));
                        }
                        generated = Some((identity, sequence_options.clone().unwrap_or_default()));
                    }
                    ast::ColumnOption::PrimaryKey(_) => {
                        if !primary_key.is_empty() {
                            return Err(SqlError::new(
                                ErrorKind::InvalidPrimaryKey,
                                format!(
                                    "multiple primary keys for table \"{name}\" are not allowed"
                                ),
                            ));
                        }
                        primary_key = vec![i];
                        primary_key_name = option.name.as_ref().map(ident);
                    }
                    ast::ColumnOption::Check(check) => {
                        check_asts.push((option.name.as_ref().map(ident), (*check.expr).clone()))
                    }
                    ast::ColumnOption::Unique(_) => {
                        uniques.push((option.name.as_ref().map(ident), vec![i]))
                    }
                    ast::ColumnOption::ForeignKey(fk) => {
                        let mut fk = fk.clone();
                        fk.name = fk.name.or_else(|| option.name.clone());
                        foreign_key_asts.push((vec![column_name.clone()], fk))
                    }
                    other => {
                        return Err(SqlError::feature_not_supported(format!(
                            "column option {other}"
                        )))
                    }
                }
            }
            if serial.is_some() || generated.is_some() {
                if def.default.is_some() {
                    let what = if serial.is_some() {
                        "serial"
                    } else {
                        "identity"
                    };
                    return Err(SqlError::syntax(format!(
                        "multiple default values specified for column \"{column_name}\" of table \"{name}\" ({what})"
                    )));
                }
                let (identity, options) = match generated {
                    Some((identity, options)) => (Some(identity), options),
                    None => (None, Vec::new()),
                };
                let sequence =
                    self.sequence_column(&name, &mut def, identity, &options, &sequences)?;
                sequences.push(sequence);
            }
            columns.push(def);
        }
        for constraint in &create.constraints {
            match constraint {
                ast::TableConstraint::PrimaryKey(pk) => {
                    if !primary_key.is_empty() {
                        return Err(SqlError::new(
                            ErrorKind::InvalidPrimaryKey,
                            format!("multiple primary keys for table \"{name}\" are not allowed"),
                        ));
                    }
                    primary_key = self.key_columns(&columns, &pk.columns)?;
                    primary_key_name = pk.name.as_ref().map(ident);
                }
                ast::TableConstraint::Check(check) => {
                    check_asts.push((check.name.as_ref().map(ident), (*check.expr).clone()))
                }
                ast::TableConstraint::Unique(u) => {
                    let cols = self.key_columns(&columns, &u.columns)?;
                    uniques.push((u.name.as_ref().map(ident), cols));
                }
                ast::TableConstraint::ForeignKey(fk) => {
                    let names = named_columns(&columns, &fk.columns)?;
                    foreign_key_asts.push((names, fk.clone()))
                }
                other => {
                    return Err(SqlError::feature_not_supported(format!(
                        "table constraint {other}"
                    )))
                }
            }
        }
        for &k in &primary_key {
            columns[k].nullable = false;
            if matches!(columns[k].ty, DataType::Float4) || !indexable(columns[k].ty) {
                return Err(SqlError::feature_not_supported(format!(
                    "a primary key column of type {}",
                    columns[k].ty.pg_name()
                )));
            }
        }
        let mut table = TableDef {
            id: 0,
            name: name.clone(),
            columns,
            primary_key,
            primary_key_name,
            checks: Vec::new(),
            indexes: Vec::new(),
            shape_version: 0,
            storage: String::new(),
            ledger: None,
        };
        for (index_name, cols) in uniques {
            if cols == table.primary_key {
                continue;
            }
            let default = format!(
                "{name}_{}_key",
                cols.iter()
                    .map(|&c| table.columns[c].name.as_str())
                    .collect::<Vec<_>>()
                    .join("_")
            );
            let index_name = index_name.unwrap_or(default);
            if table.indexes.iter().any(|i| i.name == index_name) {
                return Err(SqlError::new(
                    ErrorKind::DuplicateTable,
                    format!("relation \"{index_name}\" already exists"),
                ));
            }
            table.indexes.push(IndexDef {
                id: 0,
                name: index_name,
                columns: cols,
                unique: true,
                storage: String::new(),
            });
        }
        for (n, (check_name, e)) in check_asts.into_iter().enumerate() {
            let check =
                self.bind_check(&table, check_name, &e, &format!("{name}_check{}", n + 1))?;
            table.checks.push(check);
        }
        table.ledger = ledger_role_option(&create.table_options)?;
        if let Some(role) = table.ledger {
            let exists = self.catalog.table(&name).is_some();
            if !(exists && create.if_not_exists) {
                plan::validate_table(self.catalog, role, &table)?;
            }
        }
        if !self.params.is_empty() {
            return Err(SqlError::feature_not_supported(
                "parameters in CREATE TABLE",
            ));
        }
        if !sequences.is_empty() && table.ledger.is_some() {
            return Err(SqlError::feature_not_supported(
                "SERIAL or identity columns in the ledger's tables",
            ));
        }
        let foreign_keys = foreign_key_asts
            .iter()
            .map(|(columns, fk)| self.foreign_key(&table, columns.clone(), fk, true))
            .collect::<SqlResult<Vec<_>>>()?;
        let create_table = DdlPlan::CreateTable {
            table,
            if_not_exists: create.if_not_exists,
        };
        let ddl = DdlPlan::with_sequences(create_table, sequences);
        if foreign_keys.is_empty() {
            return Ok(Plan::Ddl(ddl));
        }
        Ok(Plan::Ddl(DdlPlan::WithForeignKeys {
            ddl: Box::new(ddl),
            foreign_keys,
        }))
    }

    /// A foreign key of `table` (being created when `creating`, so it may reference itself)
    /// on its columns `columns`, as declared.
    pub(crate) fn foreign_key(
        &self,
        table: &TableDef,
        columns: Vec<String>,
        fk: &ast::ForeignKeyConstraint,
        creating: bool,
    ) -> SqlResult<ForeignKeyDef> {
        let parent_name = public_name(&fk.foreign_table)?;
        let (parent, parent_id) = if creating && parent_name == table.name {
            (table, SELF_REFERENCE)
        } else {
            let parent = self
                .catalog
                .table(&parent_name)
                .ok_or_else(|| SqlError::undefined_table(&parent_name))?;
            (parent.as_ref(), parent.id)
        };
        if table.ledger.is_some() || parent.ledger.is_some() {
            return Err(SqlError::feature_not_supported(
                "foreign keys from or to the ledger's tables",
            ));
        }
        let parent_columns: Vec<String> = if fk.referred_columns.is_empty() {
            if !parent.has_primary_key() {
                return Err(SqlError::new(
                    ErrorKind::InvalidForeignKey,
                    format!("there is no primary key for referenced table \"{parent_name}\""),
                ));
            }
            parent
                .primary_key
                .iter()
                .map(|&c| parent.columns[c].name.clone())
                .collect()
        } else {
            named_columns(&parent.columns, &fk.referred_columns)?
        };
        if parent_columns.len() != columns.len() {
            return Err(SqlError::new(
                ErrorKind::InvalidForeignKey,
                "number of referencing and referenced columns for foreign key disagree",
            ));
        }
        let name = fk
            .name
            .as_ref()
            .map(ident)
            .unwrap_or_else(|| format!("{}_{}_fkey", table.name, columns.join("_")));
        let positions = ForeignKeyDef::positions(parent, &parent_columns)?;
        if !unique_on(parent, &positions) {
            return Err(plan::no_unique_key(&parent_name));
        }
        for (c, &p) in columns.iter().zip(&positions) {
            let child_ty = table.columns[table.column_index(c).unwrap_or(0)].ty;
            let parent_ty = parent.columns[p].ty;
            let comparable = child_ty == parent_ty
                || (child_ty.is_integer() && parent_ty.is_integer())
                || (child_ty.is_text_family() && parent_ty.is_text_family())
                || (child_ty.is_numeric_family() && parent_ty.is_numeric_family());
            if !comparable {
                return Err(SqlError::new(
                    ErrorKind::DatatypeMismatch,
                    format!("foreign key constraint \"{name}\" cannot be implemented"),
                )
                .with_detail(format!(
                    "Key columns \"{c}\" and \"{}\" are of incompatible types: {} and {}.",
                    parent.columns[p].name,
                    child_ty.pg_name(),
                    parent_ty.pg_name()
                )));
            }
        }
        let action = |a: &Option<ast::ReferentialAction>, what: &str| match a {
            None | Some(ast::ReferentialAction::NoAction) => Ok(ReferentialAction::NoAction),
            Some(ast::ReferentialAction::Restrict) => Ok(ReferentialAction::Restrict),
            Some(ast::ReferentialAction::Cascade) => Ok(ReferentialAction::Cascade),
            Some(ast::ReferentialAction::SetNull) => Ok(ReferentialAction::SetNull),
            Some(ast::ReferentialAction::SetDefault) => Err(SqlError::feature_not_supported(
                format!("{what} SET DEFAULT in a foreign key"),
            )),
        };
        if matches!(
            fk.match_kind,
            Some(
                ast::ConstraintReferenceMatchKind::Full
                    | ast::ConstraintReferenceMatchKind::Partial
            )
        ) {
            return Err(SqlError::feature_not_supported(
                "MATCH FULL or MATCH PARTIAL in a foreign key",
            ));
        }
        let characteristics = fk.characteristics.unwrap_or_default();
        if characteristics.enforced == Some(false) {
            return Err(SqlError::feature_not_supported("NOT ENFORCED foreign keys"));
        }
        let initially_deferred =
            characteristics.initially == Some(ast::DeferrableInitial::Deferred);
        Ok(ForeignKeyDef {
            id: 0,
            name,
            table: table.id,
            columns,
            parent: parent_id,
            parent_columns,
            on_delete: action(&fk.on_delete, "ON DELETE")?,
            on_update: action(&fk.on_update, "ON UPDATE")?,
            deferrable: characteristics.deferrable.unwrap_or(false) || initially_deferred,
            initially_deferred,
        })
    }

    /// A CHECK constraint over `table`'s row. Unnamed, it is `table_column_check` when it
    /// tests one column's value, else `fallback`.
    pub(crate) fn bind_check(
        &mut self,
        table: &TableDef,
        name: Option<String>,
        e: &ast::Expr,
        fallback: &str,
    ) -> SqlResult<CheckDef> {
        let scope = Scope {
            columns: table_scope(table, &table.name),
            outer_len: 0,
        };
        let expr = self.expr(e, &scope, Some(DataType::Bool))?;
        if expr.ty() != DataType::Bool {
            return Err(SqlError::mismatch("argument of CHECK must be type boolean"));
        }
        let name = name.unwrap_or_else(|| match &expr {
            Expr::Binary { left, .. } => match left.as_ref() {
                Expr::Column(i, _) => format!("{}_{}_check", table.name, table.columns[*i].name),
                _ => fallback.to_string(),
            },
            _ => fallback.to_string(),
        });
        Ok(CheckDef {
            name,
            expr,
            sql: e.to_string(),
        })
    }

    /// A column's NULL, NOT NULL or DEFAULT option, applied to `def`; false for any other
    /// option (left to the caller).
    pub(crate) fn nullability_or_default(
        &mut self,
        def: &mut ColumnDef,
        option: &ast::ColumnOption,
    ) -> SqlResult<bool> {
        match option {
            ast::ColumnOption::Null => def.nullable = true,
            ast::ColumnOption::NotNull => def.nullable = false,
            ast::ColumnOption::Default(e) => {
                let b = self.expr(e, &Scope::default(), Some(def.ty))?;
                def.default = Some(self.assign(b, def.ty)?);
                def.default_sql = Some(self.default_text(def.default.as_ref(), e));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    pub(crate) fn create_index(&mut self, index: &ast::CreateIndex) -> SqlResult<Plan> {
        if !index.include.is_empty() {
            return Err(SqlError::feature_not_supported("INCLUDE columns"));
        }
        if let Some(using) = &index.using {
            if !using.to_string().eq_ignore_ascii_case("btree") {
                return Err(SqlError::feature_not_supported(format!(
                    "index method {using}"
                )));
            }
        }
        let (_, table_name) = object_name(&index.table_name)?;
        let table = self.user_table(&table_name)?;
        let plain = index
            .columns
            .iter()
            .all(|c| matches!(c.column.expr, ast::Expr::Identifier(_)));
        // An expression index keys by its expressions; its columns are those they read.
        let (columns, keys) = if plain {
            (
                self.key_columns(&table.columns, &index.columns)?,
                Vec::new(),
            )
        } else {
            let mut columns = Vec::new();
            let mut keys = Vec::new();
            for c in &index.columns {
                let key = self.derived_expr(&table, &c.column.expr, None, "index expression")?;
                if !indexable(key.expr.ty()) {
                    return Err(SqlError::feature_not_supported(format!(
                        "an index key of type {}",
                        key.expr.ty().pg_name()
                    )));
                }
                key.expr.visit(&mut |e| {
                    if let Expr::Column(i, _) = e {
                        if !columns.contains(i) {
                            columns.push(*i);
                        }
                    }
                });
                keys.push(key);
            }
            (columns, keys)
        };
        let name = match &index.name {
            Some(n) => object_name(n)?.1,
            None => {
                let parts: Vec<String> = if plain {
                    columns
                        .iter()
                        .map(|&c| table.columns[c].name.clone())
                        .collect()
                } else {
                    index
                        .columns
                        .iter()
                        .map(|c| key_name(&c.column.expr))
                        .collect()
                };
                format!(
                    "{}_{}_{}",
                    table.name,
                    parts.join("_"),
                    if index.unique { "key" } else { "idx" }
                )
            }
        };
        let predicate = match &index.predicate {
            Some(p) => {
                Some(self.derived_expr(&table, p, Some(DataType::Bool), "index predicate")?)
            }
            None => None,
        };
        if predicate.is_some() || !keys.is_empty() {
            return Ok(Plan::Ddl(DdlPlan::CreateDerivedIndex {
                table: table.reference(),
                name,
                columns,
                unique: index.unique,
                if_not_exists: index.if_not_exists,
                derivation: Box::new(IndexDerivation { predicate, keys }),
            }));
        }
        Ok(Plan::Ddl(DdlPlan::CreateIndex {
            table: table.reference(),
            name,
            columns,
            unique: index.unique,
            if_not_exists: index.if_not_exists,
        }))
    }

    /// An index's key expression or (`expected` boolean) its WHERE: over the table's
    /// columns, and computed from them alone (no subqueries, nothing that changes between
    /// evaluations), as PostgreSQL requires of both.
    fn derived_expr(
        &mut self,
        table: &TableDef,
        e: &ast::Expr,
        expected: Option<DataType>,
        what: &str,
    ) -> SqlResult<IndexExpr> {
        let scope = Scope {
            columns: table_scope(table, &table.name),
            outer_len: 0,
        };
        let e = match e {
            ast::Expr::Nested(inner) => inner.as_ref(),
            other => other,
        };
        let expr = self.expr(e, &scope, expected)?;
        if expected == Some(DataType::Bool) && expr.ty() != DataType::Bool {
            return Err(SqlError::mismatch("argument of WHERE must be type boolean"));
        }
        if expr.has_subquery() || expr.calls(Func::is_volatile) {
            return Err(SqlError::new(
                ErrorKind::InvalidObjectDefinition,
                format!("functions in {what} must be marked IMMUTABLE"),
            ));
        }
        Ok(IndexExpr {
            expr,
            sql: e.to_string(),
        })
    }

    pub(crate) fn key_columns(
        &self,
        columns: &[ColumnDef],
        index_columns: &[ast::IndexColumn],
    ) -> SqlResult<Vec<usize>> {
        let mut out = Vec::new();
        for c in index_columns {
            let ast::Expr::Identifier(i) = &c.column.expr else {
                return Err(SqlError::feature_not_supported("expressions in a key"));
            };
            let n = ident(i);
            let position = columns
                .iter()
                .position(|c| c.name == n)
                .ok_or_else(|| SqlError::undefined_column(&format!("{n}\" named in key")))?;
            if !indexable(columns[position].ty) {
                return Err(SqlError::feature_not_supported(format!(
                    "a key or index on a column of type {}",
                    columns[position].ty.pg_name()
                )));
            }
            out.push(position);
        }
        Ok(out)
    }

    pub(crate) fn alter_table(&mut self, alter: &ast::AlterTable) -> SqlResult<Plan> {
        let (_, name) = object_name(&alter.name)?;
        let table = self.user_table(&name)?;
        match alter.operations.as_slice() {
            // A UNIQUE constraint is its unique index here (as Django adds them).
            [ast::AlterTableOperation::AddConstraint {
                constraint: ast::TableConstraint::Unique(unique),
                ..
            }] => {
                if table.ledger.is_some() {
                    return Err(SqlError::feature_not_supported(
                        "a unique constraint on the ledger's tables",
                    ));
                }
                if unique.nulls_distinct == ast::NullsDistinctOption::NotDistinct {
                    return Err(SqlError::feature_not_supported("UNIQUE NULLS NOT DISTINCT"));
                }
                let columns = self.key_columns(&table.columns, &unique.columns)?;
                let name = unique.name.as_ref().map(ident).unwrap_or_else(|| {
                    let cols = columns
                        .iter()
                        .map(|&c| table.columns[c].name.as_str())
                        .collect::<Vec<_>>()
                        .join("_");
                    format!("{}_{cols}_key", table.name)
                });
                Ok(Plan::Ddl(DdlPlan::AddUniqueConstraint {
                    table: table.reference(),
                    name,
                    columns,
                }))
            }
            [ast::AlterTableOperation::AddConstraint {
                constraint: ast::TableConstraint::PrimaryKey(pk),
                ..
            }] => {
                if table.has_primary_key() {
                    return Err(SqlError::new(
                        ErrorKind::InvalidPrimaryKey,
                        format!("multiple primary keys for table \"{name}\" are not allowed"),
                    ));
                }
                let columns = self.key_columns(&table.columns, &pk.columns)?;
                let key_name = pk
                    .name
                    .as_ref()
                    .map(ident)
                    .unwrap_or_else(|| format!("{name}_pkey"));
                Ok(Plan::Ddl(DdlPlan::AddPrimaryKey {
                    table: table.reference(),
                    columns,
                    name: key_name,
                }))
            }
            operations => self.alter_table_columns(&table, operations),
        }
    }

    /// `COPY table [(columns)] TO STDOUT` and `COPY (query) TO STDOUT`: a query whose rows
    /// the session writes out.
    pub(crate) fn copy_to(
        &mut self,
        source: &ast::CopySource,
        options: &[ast::CopyOption],
        legacy: &[ast::CopyLegacyOption],
    ) -> SqlResult<Plan> {
        let query = match source {
            ast::CopySource::Query(q) => self.query(q, &Scope::default())?,
            ast::CopySource::Table {
                table_name,
                columns,
            } => {
                let (_, name) = object_name(table_name)?;
                let table = self.user_table(&name)?;
                self.need(
                    ObjectId::Relation(table.id),
                    Privileges::SELECT,
                    ObjectKind::Table,
                    &name,
                );
                let positions = copy_columns(&table, columns)?;
                let columns = positions
                    .iter()
                    .map(|&i| OutputColumn::computed(&table.columns[i].name, table.columns[i].ty))
                    .collect();
                let exprs = positions
                    .iter()
                    .map(|&i| Expr::Column(i, table.columns[i].ty))
                    .collect();
                SelectPlan {
                    rel: Rel::Project {
                        input: Box::new(Rel::Scan {
                            source: TableSource::User(table),
                            access: Access::Full,
                            filter: None,
                        }),
                        exprs,
                    },
                    columns,
                    reads_user_tables: true,
                }
            }
        };
        Ok(Plan::CopyTo {
            query: Arc::new(query),
            format: copy_format(options, legacy)?,
        })
    }

    pub(crate) fn copy_from(
        &mut self,
        source: &ast::CopySource,
        options: &[ast::CopyOption],
        legacy: &[ast::CopyLegacyOption],
    ) -> SqlResult<Plan> {
        let ast::CopySource::Table {
            table_name,
            columns,
        } = source
        else {
            return Err(SqlError::feature_not_supported("COPY (query) FROM"));
        };
        let (_, name) = object_name(table_name)?;
        let table = self.user_table(&name)?;
        let columns = copy_columns(&table, columns)?;
        plan::check_insert(&table, &columns, false)?;
        let format = copy_format(options, legacy)?;
        let enums = columns
            .iter()
            .map(|&c| self.catalog.enum_of(table.columns[c].ty).cloned())
            .collect();
        Ok(Plan::CopyFrom(CopyPlan {
            table,
            columns,
            format,
            enums,
        }))
    }
}

/// The positions of a COPY's column list (every column when it has none).
fn copy_columns(table: &TableDef, columns: &[ast::Ident]) -> SqlResult<Vec<usize>> {
    if columns.is_empty() {
        return Ok((0..table.columns.len()).collect());
    }
    columns
        .iter()
        .map(|c| {
            table
                .column_index(&ident(c))
                .ok_or_else(|| SqlError::undefined_column(&ident(c)))
        })
        .collect()
}

/// COPY's options: FORMAT text|csv, DELIMITER, NULL, HEADER (FREEZE and ENCODING are
/// accepted and change nothing), also in the old unparenthesized spelling.
fn copy_format(
    options: &[ast::CopyOption],
    legacy: &[ast::CopyLegacyOption],
) -> SqlResult<CopyFormat> {
    let mut format = CopyFormat::default();
    let csv = |format: &mut CopyFormat| {
        format.csv = true;
        format.delimiter = ',';
        format.null = String::new();
    };
    for o in options {
        match o {
            ast::CopyOption::Format(f) => match f.value.to_ascii_lowercase().as_str() {
                "csv" => csv(&mut format),
                "text" => {}
                other => {
                    return Err(SqlError::feature_not_supported(format!(
                        "COPY format {other}"
                    )))
                }
            },
            ast::CopyOption::Freeze(_) | ast::CopyOption::Encoding(_) => {}
            ast::CopyOption::Delimiter(d) => format.delimiter = *d,
            ast::CopyOption::Null(n) => format.null = n.clone(),
            ast::CopyOption::Header(h) => format.header = *h,
            other => {
                return Err(SqlError::feature_not_supported(format!(
                    "COPY option {other}"
                )))
            }
        }
    }
    for o in legacy {
        match o {
            ast::CopyLegacyOption::Csv(csv_options) => {
                csv(&mut format);
                for o in csv_options {
                    match o {
                        ast::CopyLegacyCsvOption::Header => format.header = true,
                        // The defaults, spelled out.
                        ast::CopyLegacyCsvOption::Quote('"')
                        | ast::CopyLegacyCsvOption::Escape('"') => {}
                        other => {
                            return Err(SqlError::feature_not_supported(format!(
                                "COPY option {other}"
                            )))
                        }
                    }
                }
            }
            ast::CopyLegacyOption::Header => format.header = true,
            ast::CopyLegacyOption::Delimiter(d) => format.delimiter = *d,
            ast::CopyLegacyOption::Null(n) => format.null = n.clone(),
            other => {
                return Err(SqlError::feature_not_supported(format!(
                    "COPY option {other}"
                )))
            }
        }
    }
    Ok(format)
}

/// The `ledger_role` storage option of CREATE TABLE (other options, such as `fillfactor`,
/// are accepted and have no effect).
fn ledger_role_option(options: &ast::CreateTableOptions) -> SqlResult<Option<LedgerRole>> {
    let ast::CreateTableOptions::With(options) = options else {
        return Ok(None);
    };
    for option in options {
        let ast::SqlOption::KeyValue { key, value } = option else {
            continue;
        };
        if !key.value.eq_ignore_ascii_case("ledger_role") {
            continue;
        }
        let text = match value {
            ast::Expr::Value(v) => literal_text(&v.value)?,
            other => other.to_string(),
        };
        return LedgerRole::parse(&text).map(Some).ok_or_else(|| {
            SqlError::new(
                ErrorKind::InvalidParameterValue,
                format!("unknown ledger_role \"{text}\"; expected accounts, transfers, pending_transfers, account_balances, transfer_failures or change_events"),
            )
        });
    }
    Ok(None)
}

/// The names of `idents`, each a column of `columns`.
pub(crate) fn named_columns(
    columns: &[ColumnDef],
    idents: &[ast::Ident],
) -> SqlResult<Vec<String>> {
    idents
        .iter()
        .map(|i| {
            let n = ident(i);
            if columns.iter().any(|c| c.name == n) {
                Ok(n)
            } else {
                Err(SqlError::new(
                    ErrorKind::UndefinedColumn,
                    format!("column \"{n}\" referenced in foreign key constraint does not exist"),
                ))
            }
        })
        .collect()
}

/// Refuses column types that exist only for the catalogs (`int2vector`).
pub(crate) fn storable_column_type(ty: DataType) -> SqlResult<()> {
    if matches!(ty, DataType::Int2Vector) {
        return Err(SqlError::feature_not_supported(format!(
            "columns of type {}",
            ty.pg_name()
        )));
    }
    Ok(())
}

/// The part an expression index's key gives its default name, as PostgreSQL names it: a
/// call's function, a column's name, else `expr`.
fn key_name(e: &ast::Expr) -> String {
    match e {
        ast::Expr::Nested(inner) => key_name(inner),
        ast::Expr::Function(f) => crate::bind_expr::function_name(&f.name),
        ast::Expr::Identifier(i) => ident(i),
        _ => "expr".into(),
    }
}

/// Whether a column of this type may be in a key or an index: its values have an
/// order-preserving key encoding (`ledger::row`); JSON, arrays and intervals do not yet.
fn indexable(ty: DataType) -> bool {
    !matches!(ty, DataType::Json | DataType::Jsonb | DataType::Interval) && ty.element().is_none()
}
