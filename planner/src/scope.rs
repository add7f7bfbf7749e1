//! Name resolution: the columns visible to an expression, outer columns first.

use sql::{DataType, ErrorKind, SqlError, SqlResult};

#[derive(Clone, Debug)]
pub struct ScopeColumn {
    /// The table name or alias that qualifies the column.
    pub qualifier: Option<String>,
    pub name: String,
    pub ty: DataType,
    pub table_oid: u32,
    pub column_number: i16,
}

/// Columns an expression may reference. Positions `0..outer_len` belong to enclosing
/// queries (correlated and lateral references); the rest to the current row.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    pub columns: Vec<ScopeColumn>,
    pub outer_len: usize,
}

impl Scope {
    /// A scope for a subquery nested in `self`: all of `self` becomes outer.
    pub fn nested(&self) -> Scope {
        Scope {
            columns: self.columns.clone(),
            outer_len: self.columns.len(),
        }
    }

    /// The current row's column at `position`, if that is one (not an outer column, not a
    /// window function's value).
    pub fn own_column(&self, position: usize) -> Option<&ScopeColumn> {
        self.columns
            .get(position)
            .filter(|_| position >= self.outer_len)
    }

    pub fn own(&self) -> &[ScopeColumn] {
        &self.columns[self.outer_len..]
    }

    /// Resolves `name` or `qualifier.name`, searching the current row before outer rows.
    pub fn resolve(&self, qualifier: Option<&str>, name: &str) -> SqlResult<(usize, DataType)> {
        let matches = |c: &ScopeColumn| {
            c.name == name && qualifier.is_none_or(|q| c.qualifier.as_deref() == Some(q))
        };
        let own: Vec<usize> = (self.outer_len..self.columns.len())
            .filter(|&i| matches(&self.columns[i]))
            .collect();
        match own.len() {
            1 => return Ok((own[0], self.columns[own[0]].ty)),
            0 => {}
            _ => {
                return Err(SqlError::new(
                    ErrorKind::AmbiguousColumn,
                    format!("column reference \"{name}\" is ambiguous"),
                ))
            }
        }
        // Outer scopes: the innermost enclosing query wins, so search from the end.
        if let Some(i) = (0..self.outer_len)
            .rev()
            .find(|&i| matches(&self.columns[i]))
        {
            return Ok((i, self.columns[i].ty));
        }
        Err(match qualifier {
            Some(q)
                if !self
                    .columns
                    .iter()
                    .any(|c| c.qualifier.as_deref() == Some(q)) =>
            {
                SqlError::new(
                    ErrorKind::UndefinedTable,
                    format!("missing FROM-clause entry for table \"{q}\""),
                )
            }
            Some(q) => SqlError::undefined_column(&format!("{q}.{name}")),
            None => SqlError::undefined_column(name),
        })
    }

    /// The current row's columns under `qualifier` (or all of them), for `*` and `t.*`.
    pub fn wildcard(&self, qualifier: Option<&str>) -> SqlResult<Vec<usize>> {
        let cols: Vec<usize> = (self.outer_len..self.columns.len())
            .filter(|&i| qualifier.is_none_or(|q| self.columns[i].qualifier.as_deref() == Some(q)))
            .collect();
        if let (Some(q), true) = (qualifier, cols.is_empty()) {
            return Err(SqlError::new(
                ErrorKind::UndefinedTable,
                format!("missing FROM-clause entry for table \"{q}\""),
            ));
        }
        Ok(cols)
    }
}
