//! COPY FROM STDIN: the data as it arrives, parsed into rows, and the rows written when it ends.

use super::*;

pub(super) struct CopyState {
    pub(super) plan: CopyPlan,
    pub(super) partial: Vec<u8>,
    pub(super) rows: Vec<Row>,
    pub(super) bytes: usize,
    pub(super) header_pending: bool,
    pub(super) error: Option<SqlError>,
}

/// The most COPY data accepted in one statement; it becomes one log command.
pub(super) const COPY_BYTES_MAX: usize = 48 << 20;

impl Session {
    pub fn copy_data(&mut self, data: &[u8]) {
        let Some(copy) = &mut self.copy else { return };
        if copy.error.is_some() {
            return;
        }
        copy.bytes += data.len();
        if copy.bytes > COPY_BYTES_MAX {
            copy.error = Some(SqlError::new(
                ErrorKind::ProgramLimitExceeded,
                format!(
                    "not supported yet: COPY of more than {} MiB in one statement; split the data",
                    COPY_BYTES_MAX >> 20
                ),
            ));
            return;
        }
        copy.partial.extend_from_slice(data);
        let mut start = 0;
        while let Some(nl) = copy.partial[start..].iter().position(|&b| b == b'\n') {
            let line = copy.partial[start..start + nl].to_vec();
            start += nl + 1;
            if let Err(e) = copy_line(copy, &line) {
                copy.error = Some(e);
                return;
            }
        }
        copy.partial.drain(..start);
    }

    pub fn copy_fail(&mut self) {
        self.copy = None;
    }

    /// Finishes COPY: all rows become one command (or staged writes in a transaction).
    pub async fn copy_done(&mut self) -> SqlResult<u64> {
        let Some(mut copy) = self.copy.take() else {
            return Err(SqlError::new(
                ErrorKind::ProtocolViolation,
                "no COPY in progress",
            ));
        };
        if !copy.partial.is_empty() && copy.error.is_none() {
            let line = std::mem::take(&mut copy.partial);
            if let Err(e) = copy_line(&mut copy, &line) {
                copy.error = Some(e);
            }
        }
        if let Some(e) = copy.error {
            if self.transaction.is_some() {
                self.failed = true;
            }
            return Err(e);
        }
        let count = copy.rows.len() as u64;
        let table = copy.plan.table.reference();
        // Rows whose defaults draw random values are inserted as an INSERT ... VALUES is,
        // which draws them once, before the rows are proposed or staged.
        let defaults_draw_random = copy.plan.table.columns.iter().enumerate().any(|(i, c)| {
            !copy.plan.columns.contains(&i)
                && c.default
                    .as_ref()
                    .is_some_and(|d| d.calls(Func::draws_random))
        });
        if self.transaction.is_some() || defaults_draw_random {
            let rows = copy
                .rows
                .into_iter()
                .map(|r| {
                    r.into_iter()
                        .map(|v| Expr::Literal(v, DataType::Unknown))
                        .collect()
                })
                .collect();
            let plan = WritePlan::Insert(InsertPlan {
                table,
                source: InsertSource::Values(rows),
                target_columns: copy.plan.columns.clone(),
                on_conflict: None,
                returning: None,
                call: false,
            });
            if self.transaction.is_none() {
                return Ok(self.write_alone(&Arc::new(plan), &[]).await?.0);
            }
            if let Err(e) = self.stage(Arc::new(plan), &[]).await {
                self.failed = true;
                return Err(e);
            }
            return Ok(count);
        }
        self.propose(&Command::Copy {
            table,
            columns: copy.plan.columns.clone(),
            rows: copy.rows,
            now_micros: now_micros(),
        })
        .await?;
        Ok(count)
    }
}

/// Parses one line of COPY input into a row.
pub(super) fn copy_line(copy: &mut CopyState, line: &[u8]) -> SqlResult<()> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line == b"\\." {
        return Ok(());
    }
    if copy.header_pending {
        copy.header_pending = false;
        return Ok(());
    }
    let text = std::str::from_utf8(line)
        .map_err(|_| SqlError::invalid_text("invalid UTF-8 in COPY data"))?;
    let format = &copy.plan.format;
    let fields: Vec<Option<String>> = if format.csv {
        csv_fields(text, format.delimiter, &format.null)
    } else {
        text_fields(text, format.delimiter, &format.null)
    };
    let table = &copy.plan.table;
    if fields.len() != copy.plan.columns.len() {
        let what = if fields.len() < copy.plan.columns.len() {
            "missing data for a column"
        } else {
            "extra data after last expected column"
        };
        return Err(SqlError::new(
            ErrorKind::InvalidText,
            format!("{what} (COPY {}, line {})", table.name, copy.rows.len() + 1),
        ));
    }
    let mut row = Vec::with_capacity(fields.len());
    for ((f, &c), labels) in fields
        .into_iter()
        .zip(&copy.plan.columns)
        .zip(&copy.plan.enums)
    {
        row.push(match (f, labels) {
            (None, _) => Value::Null,
            (Some(s), Some(def)) => def.value(s)?,
            (Some(s), None) => Value::parse_text(&s, table.columns[c].ty)?,
        });
    }
    copy.rows.push(row);
    Ok(())
}
