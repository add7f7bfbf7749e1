//! Binding views: `CREATE [OR REPLACE] VIEW`, `DROP VIEW`, and a view named in FROM, which
//! binds the view's stored query afresh against the catalog in force (as a derived table
//! that sees nothing of the query around it). A view that reads another depends on it:
//! `DROP VIEW` refuses to break it (2BP01) unless CASCADE, which drops it too.

use std::sync::Arc;

use plan::*;
use sql::ast;
use sql::{ErrorKind, SqlError, SqlResult};

use crate::bind::*;
use crate::bind_expr::ident;
use crate::bind_query::{named_query, FromItem};
use crate::scope::Scope;

impl Binder<'_> {
    pub(crate) fn create_view(&mut self, create: &ast::CreateView) -> SqlResult<Plan> {
        if create.materialized {
            return Err(SqlError::feature_not_supported("materialized views"));
        }
        let name = public_name(&create.name)?;
        let plan = self.query(&create.query, &Scope::default())?;
        if !self.params.is_empty() {
            return Err(SqlError::feature_not_supported("parameters in CREATE VIEW"));
        }
        if create.columns.len() > plan.columns.len() {
            return Err(SqlError::syntax(
                "CREATE VIEW specifies more column names than columns",
            ));
        }
        let mut columns: Vec<(String, sql::DataType)> = plan
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.ty))
            .collect();
        for (column, given) in columns.iter_mut().zip(&create.columns) {
            column.0 = ident(&given.name);
        }
        for (i, (n, _)) in columns.iter().enumerate() {
            if columns[..i].iter().any(|(m, _)| m == n) {
                return Err(SqlError::new(
                    ErrorKind::DuplicateColumn,
                    format!("column \"{n}\" specified more than once"),
                ));
            }
        }
        let mut tables = Vec::new();
        visit_read_tables(&plan.rel, &mut |t| {
            if !tables.contains(&t.id) {
                tables.push(t.id);
            }
        });
        Ok(Plan::Ddl(DdlPlan::CreateView {
            view: ViewDef {
                id: 0,
                name,
                sql: create.query.to_string(),
                columns,
                tables,
            },
            or_replace: create.or_replace,
        }))
    }

    /// A view named in FROM: its query, bound now, under the reference's alias.
    pub(crate) fn view_reference(
        &mut self,
        name: &str,
        alias: &Option<ast::TableAlias>,
    ) -> SqlResult<Option<FromItem>> {
        let Some(view) = self.catalog.views.get(name).cloned() else {
            return Ok(None);
        };
        if self.expanding_views.iter().any(|v| v == name) {
            return Err(SqlError::new(
                ErrorKind::InvalidObjectDefinition,
                format!("infinite recursion detected in rules for relation \"{name}\""),
            ));
        }
        let query = parse_query(&view.sql)?;
        self.need(
            ObjectId::Relation(view.id),
            Privileges::SELECT,
            ObjectKind::View,
            name,
        );
        // The view's query sees no WITH query and no column of the statement reading it,
        // and reads with its owner's privileges.
        let ctes = std::mem::take(&mut self.ctes);
        self.expanding_views.push(name.to_string());
        let owner = self
            .catalog
            .authorization
            .owner(&ObjectId::Relation(view.id));
        let checking_as = self.checking_as.replace(owner);
        let bound = self.query(&query, &Scope::default());
        self.checking_as = checking_as;
        self.expanding_views.pop();
        self.ctes = ctes;
        let mut plan = bound.map_err(|mut e| {
            e.message = format!("in view \"{name}\": {}", e.message);
            e
        })?;
        if plan.columns.len() < view.columns.len() {
            return Err(SqlError::new(
                ErrorKind::InvalidObjectDefinition,
                format!("view \"{name}\" no longer has the columns it was created with"),
            ));
        }
        // The view's own column names, the types its query has now.
        plan.columns.truncate(view.columns.len());
        for (column, (name, _)) in plan.columns.iter_mut().zip(&view.columns) {
            *column = OutputColumn {
                name: name.clone(),
                ty: column.ty,
                table_oid: view.oid(),
                column_number: 0,
            };
        }
        named_query(name, plan, 0, alias).map(Some)
    }
}

/// Whether `view`'s query binds against `catalog`.
fn binds(catalog: &Catalog, view: &ViewDef) -> bool {
    let Ok(query) = parse_query(&view.sql) else {
        return false;
    };
    let mut binder = Binder::new(catalog, Vec::new(), Vec::new());
    binder.query(&query, &Scope::default()).is_ok()
}

/// The views that depend on the views `dropped` (directly or through others): those whose
/// query binds with them and does not without them, in the order found.
pub fn dependent_views(catalog: &Catalog, dropped: &[String]) -> Vec<String> {
    let mut without = catalog.clone();
    for name in dropped {
        without.views.remove(name);
    }
    // A view that does not bind even now depends on nothing being dropped.
    let mut candidates: Vec<Arc<ViewDef>> = without
        .views
        .values()
        .filter(|v| binds(catalog, v))
        .cloned()
        .collect();
    let mut dependents = Vec::new();
    loop {
        let (broken, kept): (Vec<_>, Vec<_>) =
            candidates.into_iter().partition(|v| !binds(&without, v));
        if broken.is_empty() {
            return dependents;
        }
        for view in broken {
            without.views.remove(&view.name);
            dependents.push(view.name.clone());
        }
        candidates = kept;
    }
}
