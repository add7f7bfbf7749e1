//! Window functions (`Rel::Window`): for each call, the rows are sorted by partition and
//! the call's ORDER BY, and every row gets the call's value from the rows of its partition
//! (ranks from its peers, `lag`/`lead` from its neighbours, aggregates and
//! `first_value`-style functions from its frame). The output is the input rows, each
//! followed by one value per call, in the order of the last call's sort.

use std::borrow::Cow;
use std::cmp::Ordering;

use plan::{AggCall, EvalEnv, FrameBound, WindowCall, WindowFrame, WindowFunc};
use sql::{ErrorKind, SqlError, SqlResult, Value};

use crate::accumulator::Accumulator;
use crate::query::{compare_keys, joined, sort_interruptibly, RowKey};
use crate::row::Row;

pub(crate) fn window_rows(
    rows: Vec<Row>,
    calls: &[WindowCall],
    outer: &[Value],
    env: &EvalEnv<'_>,
) -> SqlResult<Vec<Row>> {
    let mut values: Vec<Vec<Value>> = vec![Vec::with_capacity(calls.len()); rows.len()];
    let mut order: Vec<usize> = (0..rows.len()).collect();
    // The input rows with the outer row before each, as expressions see them.
    {
        let full: Vec<Cow<'_, [Value]>> = rows.iter().map(|r| joined(outer, r)).collect();
        for call in calls {
            let partitions = full
                .iter()
                .map(|r| {
                    let values = call.partition_by.iter().map(|e| e.eval(r, env));
                    values.collect::<SqlResult<_>>().map(RowKey)
                })
                .collect::<SqlResult<Vec<_>>>()?;
            let keys = full
                .iter()
                .map(|r| call.order_by.iter().map(|k| k.expr.eval(r, env)).collect())
                .collect::<SqlResult<Vec<Vec<Value>>>>()?;
            // Each call sorts the rows afresh (stable, from their input order).
            order = (0..rows.len()).collect();
            sort_interruptibly(&mut order, env.interrupt, |&a, &b| {
                partitions[a]
                    .cmp(&partitions[b])
                    .then_with(|| compare_keys(&keys[a], &keys[b], &call.order_by))
            })?;
            for rows in order.chunk_by(|&a, &b| partitions[a] == partitions[b]) {
                let partition = Partition {
                    rows,
                    full: &full,
                    keys: &keys,
                    call,
                    env,
                };
                for (row, value) in rows.iter().zip(partition.values()?) {
                    values[*row].push(value);
                }
            }
        }
    }
    let mut rows: Vec<Option<Row>> = rows.into_iter().map(Some).collect();
    Ok(order
        .iter()
        .map(|&i| {
            let mut row = rows[i].take().unwrap_or_default();
            row.append(&mut values[i]);
            row
        })
        .collect())
}

/// One partition of one call: its rows (indexes into `full`, in window order).
struct Partition<'a> {
    rows: &'a [usize],
    full: &'a [Cow<'a, [Value]>],
    keys: &'a [Vec<Value>],
    call: &'a WindowCall,
    env: &'a EvalEnv<'a>,
}

impl Partition<'_> {
    fn arg(&self, position: usize, arg: usize) -> SqlResult<Value> {
        match self.call.args.get(arg) {
            Some(e) => e.eval(&self.full[self.rows[position]], self.env),
            None => Ok(Value::Null),
        }
    }

    fn int_arg(&self, position: usize, arg: usize) -> SqlResult<Option<i64>> {
        match self.arg(position, arg)? {
            Value::Null => Ok(None),
            Value::Int(n) => Ok(Some(n)),
            other => Err(SqlError::mismatch(format!(
                "a window function argument must be an integer, not {}",
                other.natural_type()
            ))),
        }
    }

    /// For each position, where its peers (rows equal under ORDER BY; all rows without
    /// one) start and end.
    fn peers(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::with_capacity(self.rows.len());
        let same = |&a: &usize, &b: &usize| {
            compare_keys(&self.keys[a], &self.keys[b], &self.call.order_by) == Ordering::Equal
        };
        for run in self.rows.chunk_by(same) {
            let start = out.len();
            out.extend(std::iter::repeat_n((start, start + run.len()), run.len()));
        }
        out
    }

    fn values(&self) -> SqlResult<Vec<Value>> {
        let n = self.rows.len();
        let peers = self.peers();
        let frames = || (0..n).map(|j| frame(self.call.frame, j, n, peers[j]));
        let mut out = Vec::with_capacity(n);
        match &self.call.func {
            WindowFunc::RowNumber => out.extend((1..=n).map(|r| Value::Int(r as i64))),
            WindowFunc::Rank => out.extend(peers.iter().map(|p| Value::Int(p.0 as i64 + 1))),
            WindowFunc::DenseRank => {
                let mut rank = 0;
                for (j, p) in peers.iter().enumerate() {
                    if p.0 == j {
                        rank += 1;
                    }
                    out.push(Value::Int(rank));
                }
            }
            WindowFunc::PercentRank => out.extend(peers.iter().map(|p| {
                Value::Float(if n > 1 {
                    p.0 as f64 / (n - 1) as f64
                } else {
                    0.0
                })
            })),
            WindowFunc::CumeDist => {
                out.extend(peers.iter().map(|p| Value::Float(p.1 as f64 / n as f64)))
            }
            WindowFunc::Ntile => {
                for j in 0..n {
                    out.push(match self.int_arg(j, 0)? {
                        None => Value::Null,
                        Some(b) if b <= 0 => {
                            return Err(SqlError::new(
                                ErrorKind::InvalidNtileArgument,
                                "argument of ntile must be greater than zero",
                            ))
                        }
                        Some(b) => Value::Int(ntile(j, n, b as usize) as i64),
                    });
                }
            }
            WindowFunc::Lag | WindowFunc::Lead => {
                let sign = if matches!(self.call.func, WindowFunc::Lag) {
                    -1
                } else {
                    1
                };
                for j in 0..n {
                    let offset = if self.call.args.len() >= 2 {
                        self.int_arg(j, 1)?
                    } else {
                        Some(1)
                    };
                    let Some(offset) = offset else {
                        out.push(Value::Null);
                        continue;
                    };
                    let target = (j as i64).checked_add(offset.saturating_mul(sign));
                    out.push(match target {
                        Some(t) if t >= 0 && (t as usize) < n => self.arg(t as usize, 0)?,
                        _ => self.arg(j, 2)?,
                    });
                }
            }
            WindowFunc::FirstValue | WindowFunc::LastValue | WindowFunc::NthValue => {
                for (j, (lo, hi)) in frames().enumerate() {
                    let at = match self.call.func {
                        WindowFunc::FirstValue => Some(lo),
                        WindowFunc::LastValue => hi.checked_sub(1),
                        _ => match self.int_arg(j, 1)? {
                            None => None,
                            Some(k) if k <= 0 => {
                                return Err(SqlError::new(
                                    ErrorKind::InvalidNthValueArgument,
                                    "argument of nth_value must be greater than zero",
                                ))
                            }
                            Some(k) => lo.checked_add(k as usize - 1),
                        },
                    };
                    out.push(match at {
                        Some(at) if at >= lo && at < hi => self.arg(at, 0)?,
                        _ => Value::Null,
                    });
                }
            }
            WindowFunc::Aggregate(call) => {
                let args = self
                    .rows
                    .iter()
                    .map(|&r| {
                        call.args
                            .iter()
                            .map(|e| e.eval(&self.full[r], self.env))
                            .collect::<SqlResult<Vec<_>>>()
                    })
                    .collect::<SqlResult<Vec<_>>>()?;
                self.aggregate(call, &args, frames(), &mut out)?;
            }
        }
        Ok(out)
    }

    /// An aggregate over each row's frame. Frames that all start at the partition's first
    /// row (running totals, whole partitions) share one accumulator fed row by row; others
    /// are summed afresh.
    fn aggregate(
        &self,
        call: &AggCall,
        args: &[Vec<Value>],
        frames: impl Iterator<Item = (usize, usize)>,
        out: &mut Vec<Value>,
    ) -> SqlResult<()> {
        let running = self.call.frame.start == FrameBound::UnboundedPreceding;
        let mut acc = Accumulator::new(call);
        let mut added = 0;
        for (lo, hi) in frames {
            if running {
                while added < hi {
                    acc.add(call, args[added].clone())?;
                    added += 1;
                }
                out.push(acc.clone().finish(call)?);
            } else {
                let mut fresh = Accumulator::new(call);
                for a in args.iter().take(hi).skip(lo) {
                    fresh.add(call, a.clone())?;
                }
                out.push(fresh.finish(call)?);
            }
        }
        Ok(())
    }
}

/// The frame of position `j` of `n` as the range `lo..hi` of positions (empty when
/// `lo >= hi`), given its peers' range.
fn frame(
    frame: WindowFrame,
    j: usize,
    n: usize,
    (peer_start, peer_end): (usize, usize),
) -> (usize, usize) {
    let lo = match frame.start {
        FrameBound::UnboundedPreceding => 0,
        FrameBound::Preceding(k) => j.saturating_sub(k as usize),
        FrameBound::CurrentRow if frame.rows => j,
        FrameBound::CurrentRow => peer_start,
        FrameBound::Following(k) => j.saturating_add(k as usize).min(n),
        FrameBound::UnboundedFollowing => n,
    };
    let hi = match frame.end {
        FrameBound::UnboundedPreceding => 0,
        FrameBound::Preceding(k) => (j + 1).saturating_sub(k as usize),
        FrameBound::CurrentRow if frame.rows => j + 1,
        FrameBound::CurrentRow => peer_end,
        FrameBound::Following(k) => j.saturating_add(k as usize).saturating_add(1).min(n),
        FrameBound::UnboundedFollowing => n,
    };
    (lo, hi.max(lo))
}

/// `ntile(buckets)` at position `j` of `n`: the first `n % buckets` buckets hold one row
/// more than the others.
fn ntile(j: usize, n: usize, buckets: usize) -> usize {
    let size = n / buckets;
    let larger = n % buckets;
    if size == 0 {
        return j + 1;
    }
    let in_larger = larger * (size + 1);
    if j < in_larger {
        j / (size + 1) + 1
    } else {
        larger + (j - in_larger) / size + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ntile_spreads_the_remainder_over_the_first_buckets() {
        let of = |n, b| (0..n).map(|j| ntile(j, n, b)).collect::<Vec<_>>();
        assert_eq!(of(10, 3), [1, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
        assert_eq!(of(4, 4), [1, 2, 3, 4]);
        assert_eq!(of(2, 5), [1, 2]);
        assert_eq!(of(6, 1), [1; 6]);
    }

    #[test]
    fn frames_clip_to_the_partition() {
        let rows = |start, end| WindowFrame {
            rows: true,
            start,
            end,
        };
        use FrameBound::*;
        assert_eq!(frame(rows(Preceding(2), CurrentRow), 1, 5, (1, 2)), (0, 2));
        assert_eq!(
            frame(rows(Preceding(1), Following(1)), 4, 5, (4, 5)),
            (3, 5)
        );
        assert_eq!(
            frame(rows(Following(2), Following(3)), 3, 5, (3, 4)),
            (5, 5)
        );
        assert_eq!(
            frame(rows(UnboundedPreceding, Preceding(1)), 0, 5, (0, 1)),
            (0, 0)
        );
        // RANGE takes the peers along.
        assert_eq!(frame(WindowFrame::DEFAULT, 1, 5, (0, 3)), (0, 3));
    }
}
