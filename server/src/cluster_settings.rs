//! At start in a cluster: propose this node's page size and partition count
//! (`ledger::ClusterSettings`). The first recorded are the cluster's; a node started with
//! others is told so and does not start, and a replica whose data directory differs from
//! the record stops as it applies it (see `ledger/src/cluster_settings.rs`).

use std::sync::Arc;
use std::time::Duration;

use ledger::{ClusterSettings, Command, Request};
use sql::{SqlError, SqlResult};

use crate::session::{ask_executor, Shared};

/// Tries before giving up while leadership settles (as the migrations do).
const ATTEMPTS: u32 = 40;

pub async fn record(shared: &Arc<Shared>) -> SqlResult<()> {
    let stats = ask_executor(&shared.executor, |reply| Request::Stats { reply }).await?;
    let settings = ClusterSettings {
        page_size: stats.storage.page_size as u32,
        partitions: stats.partitions as u32,
    };
    let command = ledger::encode_command(&Command::ClusterSettings(settings));
    let mut attempt = 1;
    loop {
        match shared.proposer.propose(command.clone()).await {
            Ok(result) => return ledger::decode_result(&result).map(|_| ()),
            Err(e) if attempt >= ATTEMPTS => {
                return Err(SqlError::internal(format!(
                    "recording the cluster settings: {e}"
                )))
            }
            Err(_) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}
