//! Installing a snapshot: its stream is read into fresh data files in a staging directory
//! beside the data file (`stage`, on the caller's thread), then the executor closes its
//! engines and swaps the staged files in (`StagedInstall::swap_in`) and opens them again.
//!
//! Crash safety: the staging directory becomes the truth only when its `READY` marker is
//! durable, written just before the swap. A start that finds the marker finishes the swap
//! (renames are idempotent: a file already moved is simply absent from staging); one that
//! finds a staging directory without it removes it. So after a crash the data directory
//! holds either the old state or the snapshot's whole, never a mix of partitions.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

use kv::{Engine, EngineOptions, IoMode, LogPosition};
use sql::{ErrorKind, SqlError, SqlResult};

use crate::error::kv_error;
use crate::partition::{partition_file, CommitRecord, MAX_PARTITIONS};
use crate::state_snapshot::{damaged, Record, SnapshotHeader, SnapshotReader};

const READY: &str = "READY";

/// Pool of each engine while a snapshot is loaded: the load checkpoints whenever it fills.
const STAGING_POOL_BYTES: usize = 64 << 20;

/// A snapshot read into data files in the staging directory, not yet swapped in.
pub struct StagedInstall {
    dir: PathBuf,
    pub header: SnapshotHeader,
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> SqlError {
    SqlError::new(
        ErrorKind::Io,
        format!("cannot {what} {}: {e}", path.display()),
    )
}

/// The staging directory of the data directory whose partition 0 is `data_file`.
fn staging_dir(data_file: &Path) -> PathBuf {
    let mut name = data_file.as_os_str().to_owned();
    name.push(".install");
    PathBuf::from(name)
}

fn sync_dir(dir: &Path) -> SqlResult<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error("sync", dir, e))
}

/// Reads the snapshot stream `input` into data files staged beside `data_file`: one engine
/// per partition, every table and pair as the stream has them, each checkpointed at the
/// snapshot's position, and a commit record naming it. Verifies the stream's checksum; on
/// any failure the staging directory is removed and the live files are untouched.
pub fn stage(input: impl Read, data_file: &Path, io_mode: IoMode) -> SqlResult<StagedInstall> {
    let dir = staging_dir(data_file);
    remove_dir(&dir)?;
    fs::create_dir_all(&dir).map_err(|e| io_error("create", &dir, e))?;
    let staged = load(input, &dir, data_file, io_mode);
    if staged.is_err() {
        let _ = fs::remove_dir_all(&dir);
    }
    staged
}

fn load(
    input: impl Read,
    dir: &Path,
    data_file: &Path,
    io_mode: IoMode,
) -> SqlResult<StagedInstall> {
    let (mut reader, header) = SnapshotReader::open(input)?;
    let partitions = header.partitions as usize;
    if partitions == 0 || partitions > MAX_PARTITIONS {
        return Err(damaged(format!("it names {partitions} partitions")));
    }
    let name = data_file
        .file_name()
        .ok_or_else(|| SqlError::internal("the data file has no name"))?;
    let staged_data_file = dir.join(name);
    let position = header.position();
    let options = EngineOptions {
        page_size: header.page_size,
        pool_bytes: STAGING_POOL_BYTES,
        io_mode,
        ..EngineOptions::default()
    };
    let mut engine: Option<Engine> = None;
    let mut table = None;
    let mut next_partition = 0usize;
    loop {
        match reader.next_record()? {
            Record::Partition(index) => {
                if index as usize != next_partition || next_partition >= partitions {
                    return Err(damaged(format!("partition {index} out of order")));
                }
                if let Some(done) = engine.take() {
                    finish_engine(done, position)?;
                }
                let path = partition_file(&staged_data_file, next_partition);
                let (opened, _) = Engine::open(&path, options.clone()).map_err(kv_error)?;
                engine = Some(opened);
                table = None;
                next_partition += 1;
            }
            Record::Table(name, buffered) => {
                let engine = engine
                    .as_mut()
                    .ok_or_else(|| damaged("a table before any partition"))?;
                table = Some(crate::ddl::create_kv_table(engine, &name, buffered)?);
            }
            Record::Pair(key, value) => {
                let (Some(engine), Some(table)) = (engine.as_mut(), table) else {
                    return Err(damaged("a pair outside any table"));
                };
                engine.put(table, &key, &value).map_err(kv_error)?;
                // No page may leave the pool before a checkpoint writes it.
                if engine.needs_checkpoint() {
                    engine.checkpoint(position).map_err(kv_error)?;
                }
            }
            Record::End => break,
        }
    }
    if next_partition != partitions {
        return Err(damaged(format!(
            "it holds {next_partition} of its {partitions} partitions"
        )));
    }
    if let Some(done) = engine.take() {
        finish_engine(done, position)?;
    }
    let mut record = CommitRecord::for_data_file(&staged_data_file);
    record.partitions = partitions;
    record.write(position)?;
    sync_dir(dir)?;
    Ok(StagedInstall {
        dir: dir.to_path_buf(),
        header,
    })
}

fn finish_engine(mut engine: Engine, position: LogPosition) -> SqlResult<()> {
    engine.checkpoint(position).map_err(kv_error)?;
    drop(engine);
    Ok(())
}

fn remove_dir(dir: &Path) -> SqlResult<()> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error("remove", dir, e)),
    }
}

impl StagedInstall {
    /// Makes the staged files the data directory's: marks the staging directory ready
    /// (durably), then moves its files over the live ones. Every engine on the live files
    /// must be closed.
    pub fn swap_in(self, data_file: &Path) -> SqlResult<()> {
        let ready = self.dir.join(READY);
        File::create(&ready)
            .and_then(|f| f.sync_all())
            .map_err(|e| io_error("create", &ready, e))?;
        sync_dir(&self.dir)?;
        finish_swap(&self.dir, data_file)
    }
}

/// Moves a ready staging directory's files into the data directory, removes live partition
/// files the snapshot does not have, and removes the staging directory.
fn finish_swap(dir: &Path, data_file: &Path) -> SqlResult<()> {
    let live_dir = data_file.parent().unwrap_or(Path::new("."));
    let entries = fs::read_dir(dir).map_err(|e| io_error("read", dir, e))?;
    let mut staged = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error("read", dir, e))?;
        if entry.file_name() != READY {
            staged.push(entry.file_name());
        }
    }
    for name in &staged {
        let to = live_dir.join(name);
        fs::rename(dir.join(name), &to).map_err(|e| io_error("move a snapshot file to", &to, e))?;
    }
    // Partitions past the snapshot's count (the snapshot's commit record is in place now).
    let partitions = CommitRecord::for_data_file(data_file)
        .read()?
        .map_or(1, |c| c.partitions);
    for index in partitions..MAX_PARTITIONS {
        let extra = partition_file(data_file, index);
        if extra.exists() {
            fs::remove_file(&extra).map_err(|e| io_error("remove", &extra, e))?;
        }
    }
    for index in 0..MAX_PARTITIONS {
        let journal = kv::journal_path(&partition_file(data_file, index));
        if journal.exists() {
            fs::remove_file(&journal).map_err(|e| io_error("remove", &journal, e))?;
        }
    }
    sync_dir(live_dir)?;
    remove_dir(dir)?;
    sync_dir(live_dir)
}

/// At open: finishes a swap a crash interrupted, or removes an incomplete staging directory.
pub(crate) fn recover_interrupted(data_file: &Path) -> SqlResult<()> {
    let dir = staging_dir(data_file);
    if !dir.exists() {
        return Ok(());
    }
    if dir.join(READY).exists() {
        eprintln!(
            "hotledger: finishing the install of a snapshot a stop interrupted ({})",
            dir.display()
        );
        finish_swap(&dir, data_file)
    } else {
        remove_dir(&dir)
    }
}
