//! `CALL hotledger.transfer_leader(id)`: handing leadership to a chosen voter. openraft 0.9
//! has no transfer of its own, so the leader makes room for one: it stops proposing
//! (batches in flight finish), asks the other voters not to campaign for a while, stops its
//! heartbeats and elections, waits until the target has its whole log and the voters'
//! leader lease (`election_timeout_max`) has run out, then has the target campaign. The
//! target's log is the most complete, so it wins; everything is restored whatever happens.
//! A voter told not to campaign resumes by itself after `PAUSE` should the leader fail
//! midway, so no crash leaves the cluster unable to elect.

use std::time::Duration;

use crate::membership::MembershipError;
use crate::network::{matched_index, PeerRequest, PeerResponse};
use crate::peer_link::PeerLinks;
use crate::proposer::Proposer;
use crate::types::{NodeId, Raft};

/// How long the other voters hold their campaigns back.
pub(crate) const PAUSE: Duration = Duration::from_secs(5);
/// The voters' leader lease (`election_timeout_max`) and a margin: after this long without
/// a heartbeat they vote for a candidate again.
const LEASE_RUN_OUT: Duration = Duration::from_millis(750);
/// How long the target gets to win.
const ELECTION: Duration = Duration::from_secs(3);
const CALL_LIMIT: Duration = Duration::from_secs(1);

async fn tell(links: &PeerLinks, addr: &str, request: PeerRequest) -> bool {
    matches!(
        links.call(addr, &request, CALL_LIMIT).await,
        Ok(PeerResponse::Done)
    )
}

/// Runs on the leader. Answers once `target` leads, or why it does not.
pub(crate) async fn transfer_here(
    raft: &Raft,
    proposer: &Proposer,
    links: &PeerLinks,
    target: NodeId,
) -> Result<String, MembershipError> {
    let (me, voters) = {
        let metrics = raft.metrics();
        let metrics = metrics.borrow();
        let membership = metrics.membership_config.membership();
        let voters: Vec<(NodeId, String)> = membership
            .voter_ids()
            .map(|id| {
                let addr = membership.get_node(&id).map(|n| links.addr_of(id, n));
                (id, addr.unwrap_or_default())
            })
            .collect();
        (metrics.id, voters)
    };
    if target == me {
        return Ok(format!("node {target} leads"));
    }
    let Some((_, target_addr)) = voters.iter().find(|(id, _)| *id == target).cloned() else {
        return Err(MembershipError::Invalid(format!(
            "node {target} is not a voter of the cluster"
        )));
    };
    let others: Vec<String> = voters
        .iter()
        .filter(|(id, _)| *id != target && *id != me)
        .map(|(_, addr)| addr.clone())
        .collect();
    let paused = proposer.pause().await;
    for addr in &others {
        tell(links, addr, PeerRequest::PauseElections(PAUSE)).await;
    }
    raft.runtime_config().heartbeat(false);
    raft.runtime_config().elect(false);
    let outcome = hand_over(raft, links, target, &target_addr).await;
    raft.runtime_config().elect(true);
    raft.runtime_config().heartbeat(true);
    for addr in &others {
        tell(links, addr, PeerRequest::ResumeElections).await;
    }
    drop(paused);
    outcome
}

async fn hand_over(
    raft: &Raft,
    links: &PeerLinks,
    target: NodeId,
    target_addr: &str,
) -> Result<String, MembershipError> {
    // The target must hold the whole log to win (and to lose nothing).
    let caught_up = raft
        .wait(Some(ELECTION))
        .metrics(
            |m| matched_index(m, target) >= m.last_log_index,
            "the target has the whole log",
        )
        .await;
    if caught_up.is_err() {
        return Err(MembershipError::Failed(format!(
            "node {target} did not catch up with the leader's log in time; the leader is unchanged"
        )));
    }
    tokio::time::sleep(LEASE_RUN_OUT).await;
    if !tell(links, target_addr, PeerRequest::Campaign).await {
        return Err(MembershipError::Failed(format!(
            "node {target} could not be asked to campaign; the leader is unchanged"
        )));
    }
    let won = raft
        .wait(Some(ELECTION))
        .metrics(|m| m.current_leader == Some(target), "the target leads")
        .await;
    match won {
        Ok(_) => Ok(format!("node {target} leads")),
        Err(_) => Err(MembershipError::Failed(format!(
            "node {target} did not win the election in time: check hotledger.cluster"
        ))),
    }
}

/// A voter's side: hold campaigns back for `pause` (resuming by itself), resume them, or
/// campaign now.
pub(crate) fn pause_elections(raft: &Raft, pause: Duration) {
    raft.runtime_config().elect(false);
    let raft = raft.clone();
    tokio::spawn(async move {
        tokio::time::sleep(pause).await;
        raft.runtime_config().elect(true);
    });
}
