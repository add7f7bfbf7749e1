//! `Accumulator`: the running state of one aggregate in one group — what `Reader::aggregate`
//! and window aggregates fold each row's arguments into, and the bound on what one
//! aggregate may hold.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use plan::{arithmetic, AggCall, AggFunc, BinaryOp};
use sql::{DataType, SqlError, SqlResult, Value};

use crate::query::RowKey;

/// The running state of one aggregate in one group.
#[derive(Clone)]
pub(crate) struct Accumulator {
    count: i64,
    value: Option<Value>,
    text: Option<String>,
    items: Vec<Value>,
    /// DISTINCT string_agg's separator.
    separator: Option<String>,
    seen: Option<BTreeSet<RowKey>>,
    /// The bytes its text, items or set hold, bounded by `MAX_AGGREGATE_BYTES`.
    bytes: usize,
}

/// The most bytes one aggregate's state may hold (`string_agg`'s text, `array_agg`'s
/// items, a DISTINCT aggregate's set): past it the statement fails with 54000 before it
/// takes the server's memory.
const MAX_AGGREGATE_BYTES: usize = 256 << 20;

fn aggregate_too_large(call: &AggCall) -> SqlError {
    SqlError::new(
        sql::ErrorKind::ProgramLimitExceeded,
        format!(
            "{} result too large: one aggregate may hold at most {} MiB",
            call.func.name(),
            MAX_AGGREGATE_BYTES >> 20
        ),
    )
}

impl Accumulator {
    pub(crate) fn new(call: &AggCall) -> Accumulator {
        Accumulator {
            count: 0,
            value: None,
            text: None,
            items: Vec::new(),
            separator: None,
            bytes: 0,
            seen: if call.distinct {
                Some(BTreeSet::new())
            } else {
                None
            },
        }
    }

    pub(crate) fn add(&mut self, call: &AggCall, args: Vec<Value>) -> SqlResult<()> {
        if call.func == AggFunc::CountStar {
            self.count += 1;
            return Ok(());
        }
        let v = args.first().cloned().unwrap_or(Value::Null);
        if matches!(call.func, AggFunc::ArrayAgg | AggFunc::StringAgg) || self.seen.is_some() {
            self.bytes += v.memory_bytes();
            if self.bytes > MAX_AGGREGATE_BYTES {
                return Err(aggregate_too_large(call));
            }
        }
        if call.func == AggFunc::ArrayAgg {
            // DISTINCT: the set is the result, in its order (finish).
            match &mut self.seen {
                Some(seen) => {
                    seen.insert(RowKey(vec![v]));
                }
                None => self.items.push(v),
            }
            return Ok(());
        }
        if v.is_null() {
            return Ok(());
        }
        if let Some(seen) = &mut self.seen {
            if !seen.insert(RowKey(vec![v.clone()])) {
                return Ok(());
            }
        }
        self.count += 1;
        match call.func {
            AggFunc::CountStar | AggFunc::Count => {}
            AggFunc::Sum | AggFunc::Avg => {
                let ty = if call.func == AggFunc::Avg && call.ty != DataType::Float8 {
                    DataType::UNCONSTRAINED_NUMERIC
                } else {
                    call.ty
                };
                self.value = Some(match self.value.take() {
                    None => v.cast(ty)?,
                    Some(acc) => arithmetic(BinaryOp::Add, acc, v, ty)?,
                });
            }
            AggFunc::Min | AggFunc::Max => {
                let replace = match &self.value {
                    None => true,
                    Some(cur) => {
                        let o = v.sort_cmp(cur);
                        if call.func == AggFunc::Min {
                            o == Ordering::Less
                        } else {
                            o == Ordering::Greater
                        }
                    }
                };
                if replace {
                    self.value = Some(v);
                }
            }
            AggFunc::BoolAnd | AggFunc::BoolOr => {
                let b = v.is_true();
                let cur = matches!(self.value, Some(Value::Bool(true)));
                let next = match (&self.value, call.func) {
                    (None, _) => b,
                    (_, AggFunc::BoolAnd) => cur && b,
                    _ => cur || b,
                };
                self.value = Some(Value::Bool(next));
            }
            AggFunc::ArrayAgg => {}
            AggFunc::StringAgg => {
                let sep = args
                    .get(1)
                    .and_then(|s| s.to_pg_text(DataType::Text))
                    .unwrap_or_default();
                if self.seen.is_some() {
                    // DISTINCT: joined in the set's order when it finishes.
                    self.separator = Some(sep);
                    return Ok(());
                }
                let piece = v.to_pg_text(v.natural_type()).unwrap_or_default();
                self.bytes += sep.len() + piece.len();
                if self.bytes > MAX_AGGREGATE_BYTES {
                    return Err(aggregate_too_large(call));
                }
                self.text = Some(match self.text.take() {
                    None => piece,
                    Some(t) => t + &sep + &piece,
                });
            }
        }
        Ok(())
    }

    pub(crate) fn finish(self, call: &AggCall) -> SqlResult<Value> {
        Ok(match call.func {
            AggFunc::CountStar | AggFunc::Count => Value::Int(self.count),
            AggFunc::Avg => match self.value {
                None => Value::Null,
                Some(sum) => arithmetic(BinaryOp::Div, sum, Value::Int(self.count), call.ty)?,
            },
            // DISTINCT aggregates see their values sorted, as in PostgreSQL.
            AggFunc::StringAgg | AggFunc::ArrayAgg if self.seen.is_some() => {
                let values = self.seen.unwrap_or_default().into_iter().map(|k| k.0);
                let values: Vec<Value> = values.flatten().collect();
                match (call.func, values.is_empty()) {
                    (_, true) => Value::Null,
                    (AggFunc::ArrayAgg, false) => Value::Array(values),
                    _ => Value::Text(
                        values
                            .iter()
                            .map(|v| v.to_pg_text(v.natural_type()).unwrap_or_default())
                            .collect::<Vec<_>>()
                            .join(&self.separator.unwrap_or_default()),
                    ),
                }
            }
            AggFunc::StringAgg => self.text.map(Value::Text).unwrap_or(Value::Null),
            AggFunc::ArrayAgg if self.items.is_empty() => Value::Null,
            AggFunc::ArrayAgg => Value::Array(self.items),
            _ => self.value.unwrap_or(Value::Null),
        })
    }
}
