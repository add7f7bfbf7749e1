//! The settings every replica of a cluster must share, because they change what a command
//! does: the page size (which keys and rows fit) and the partition count (which files hold
//! what). The first `Command::ClusterSettings` in the log records them in the meta table;
//! every replica checks its own against the record as it applies that command, and one
//! that differs stops applying (its state would no longer follow the others'). A node that
//! proposes other settings than those recorded gets an error, and does not start.

use serde::{Deserialize, Serialize};
use sql::{ErrorKind, SqlError, SqlResult};

use crate::command::CommandResult;
use crate::error::kv_error;
use crate::executor::Executor;
use crate::partition::held;

/// Where the meta table keeps the recorded settings.
const META_CLUSTER_SETTINGS: &[u8] = b"cluster_settings";

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClusterSettings {
    pub page_size: u32,
    pub partitions: u32,
}

impl std::fmt::Display for ClusterSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "--page-size {} --partitions {}",
            self.page_size, self.partitions
        )
    }
}

impl Executor {
    /// This replica's own settings.
    fn own_settings(&mut self) -> SqlResult<ClusterSettings> {
        let partitions = self.shards.len() as u32;
        let page_size = held(&mut self.shards, 0)?.engine.page_size() as u32;
        Ok(ClusterSettings {
            page_size,
            partitions,
        })
    }

    pub(crate) fn apply_cluster_settings(&mut self, proposed: ClusterSettings) -> CommandResult {
        let meta = self.meta;
        let stored = held(&mut self.shards, 0)?
            .engine
            .get(meta, META_CLUSTER_SETTINGS)
            .map_err(kv_error)?;
        let recorded: Option<ClusterSettings> = match stored {
            Some(bytes) => Some(bincode::deserialize(&bytes).map_err(|e| {
                SqlError::internal(format!("the recorded cluster settings are unreadable: {e}"))
            })?),
            None => None,
        };
        let cluster = recorded.unwrap_or(proposed);
        let own = self.own_settings()?;
        if own != cluster {
            let stop = SqlError::new(
                ErrorKind::DataCorrupted,
                format!(
                    "this node's data directory has {own}, the cluster's has {cluster}: commands would apply differently here; restart this node with the cluster's settings on an empty data directory"
                ),
            );
            self.fail(stop.clone());
            return Err(stop);
        }
        if recorded.is_some_and(|r| r != proposed) {
            return Err(SqlError::new(
                ErrorKind::InvalidParameterValue,
                format!(
                    "a node proposed {proposed}, the cluster has {cluster}: start that node with the cluster's settings on an empty data directory"
                ),
            ));
        }
        if recorded.is_none() {
            let bytes =
                bincode::serialize(&proposed).map_err(|e| SqlError::internal(e.to_string()))?;
            self.put_raw(meta, META_CLUSTER_SETTINGS, Some(&bytes))?;
        }
        Ok(Executor::outcome(0, Vec::new()))
    }
}
