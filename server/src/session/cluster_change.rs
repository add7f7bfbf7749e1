//! `CALL hotledger.add_node(id, raft_addr)`, `remove_node(id)` and `transfer_leader(id)`:
//! changes to the cluster's membership, made through Raft by the leader (`raft::Membership`)
//! rather than logged as commands. Each answers one row saying what was done.

use std::net::SocketAddr;
use std::time::Duration;

use plan::{ClusterAction, ClusterChangeCall, EvalEnv};
use raft::{MembershipChange, MembershipError};
use sql::{ErrorKind, SqlError, SqlResult, Value};

use super::{now_micros, Session, StatementResult};

/// How long a change may take when `statement_timeout` sets no limit: adding a node waits
/// for it to catch up.
const DEFAULT_LIMIT: Duration = Duration::from_secs(120);
const MARGIN: Duration = Duration::from_millis(250);

fn membership_error(e: MembershipError) -> SqlError {
    let kind = match &e {
        MembershipError::Invalid(_) => ErrorKind::InvalidParameterValue,
        MembershipError::NoLeader(_) => ErrorKind::SerializationFailure,
        MembershipError::TimedOut(_) => ErrorKind::QueryCanceled,
        MembershipError::Failed(_) => ErrorKind::ObjectNotInPrerequisiteState,
    };
    SqlError::new(kind, e.to_string())
}

impl Session {
    pub(super) async fn cluster_change(
        &mut self,
        call: &ClusterChangeCall,
        params: &[Value],
    ) -> SqlResult<StatementResult> {
        let procedure = match call.action {
            ClusterAction::AddNode => "hotledger.add_node",
            ClusterAction::RemoveNode => "hotledger.remove_node",
            ClusterAction::TransferLeader => "hotledger.transfer_leader",
        };
        if self.transaction.is_some() {
            return Err(SqlError::new(
                ErrorKind::ActiveTransaction,
                format!("{procedure} cannot run inside a transaction block"),
            ));
        }
        if !self.shared.read_barrier.in_cluster() {
            return Err(SqlError::feature_not_supported(format!(
                "{procedure} on a single node (start the nodes with --peers to form a cluster)"
            )));
        }
        let change = membership_change(call, params)?;
        // A little inside the statement's own limit, so the change's account of what it
        // did (a learner that has not caught up) is what the client hears.
        let limit = self
            .timeout("statement_timeout")
            .map_or(DEFAULT_LIMIT, |t| t.saturating_sub(MARGIN).max(MARGIN));
        let changing = self.shared.membership.change(change, limit);
        tokio::pin!(changing);
        let done = loop {
            tokio::select! {
                done = &mut changing => break done.map_err(membership_error)?,
                _ = tokio::time::sleep(Duration::from_millis(20)) => {
                    if let Err(mut stop) = self.interrupt.check() {
                        stop.message.push_str(" (the membership change may still complete: see hotledger.cluster)");
                        return Err(stop);
                    }
                }
            }
        };
        Ok(StatementResult::Rows {
            columns: plan::Plan::ClusterChange(call.clone()).output_columns(),
            rows: vec![vec![Value::Text(done)]],
            tag: "CALL".into(),
        })
    }
}

/// The call's arguments evaluated: the node id, and for `add_node` its Raft address.
fn membership_change(call: &ClusterChangeCall, params: &[Value]) -> SqlResult<MembershipChange> {
    let env = EvalEnv::without_subqueries(params, now_micros());
    let mut values = call
        .args
        .iter()
        .map(|e| e.eval(&[], &env))
        .collect::<SqlResult<Vec<Value>>>()?
        .into_iter();
    let id = match values.next() {
        Some(Value::Int(id)) if id > 0 => id as u64,
        _ => {
            return Err(SqlError::new(
                ErrorKind::InvalidParameterValue,
                "a node id is a positive integer",
            ))
        }
    };
    match call.action {
        ClusterAction::AddNode => {
            let raft_addr = match values.next() {
                Some(Value::Text(addr)) if addr.parse::<SocketAddr>().is_ok() => addr,
                _ => {
                    return Err(SqlError::new(
                        ErrorKind::InvalidParameterValue,
                        "raft_addr is the node's --raft-listen address, IP:PORT",
                    ))
                }
            };
            Ok(MembershipChange::AddNode { id, raft_addr })
        }
        ClusterAction::RemoveNode => Ok(MembershipChange::RemoveNode { id }),
        ClusterAction::TransferLeader => Ok(MembershipChange::TransferLeader { id }),
    }
}
