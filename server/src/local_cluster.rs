//! `hotledger cluster`: a local cluster of separate `hotledger serve` processes on one
//! machine, for trying replication out, and the `--peers` list every node is given.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args;

/// `--peers`: voter ids and their peer addresses.
#[derive(Clone, Debug)]
pub struct Peers(pub BTreeMap<u64, String>);

pub fn peer_list(text: &str) -> Result<Peers, String> {
    let mut peers = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (id, addr) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?} is not ID=HOST:PORT"))?;
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| format!("{id:?} is not a node id (a positive integer)"))?;
        if id == 0 {
            return Err("node ids start at 1".into());
        }
        let addr = addr.trim();
        if addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
            .is_none()
        {
            return Err(format!("{addr:?} is not HOST:PORT"));
        }
        if peers.insert(id, addr.to_string()).is_some() {
            return Err(format!("node {id} is named twice"));
        }
    }
    if peers.is_empty() {
        return Err("no peers given".into());
    }
    Ok(Peers(peers))
}

#[derive(Args)]
pub struct ClusterArgs {
    /// How many voters: 3 or 5.
    #[arg(long, default_value_t = 3, value_parser = node_count)]
    nodes: u16,
    /// Where the nodes keep their data: DIR/node1, DIR/node2, …
    #[arg(long, default_value = "./hotledger-cluster")]
    data_dir: PathBuf,
    /// Node N listens for clients on P+N-1, for its peers on P+100+N-1, and serves its
    /// console on P+200+N-1.
    #[arg(long, default_value_t = 5433, value_parser = clap::value_parser!(u16).range(1..=65000))]
    base_port: u16,
    /// Buffer pool of each node, in MiB.
    #[arg(long, default_value_t = 256)]
    pool_mb: u64,
    /// Executor partitions of each node. Default: the machine's cores shared among the
    /// nodes, at least one each — they all run here, and more partition threads than cores
    /// cost hand-offs between threads waiting for a core (3 nodes on 2 cores: about 15%
    /// fewer hot-account transfers with 2 partitions each than with 1; docs/benchmarks.md).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    partitions: Option<u16>,
}

/// Each node's partitions when `--partitions` is not given: the cores shared among them.
fn partitions_each(nodes: u16) -> u16 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / usize::from(nodes)).clamp(1, 64) as u16
}

fn node_count(text: &str) -> Result<u16, String> {
    match text {
        "3" => Ok(3),
        "5" => Ok(5),
        _ => Err("a cluster has 3 or 5 voters".into()),
    }
}

struct Node {
    id: u16,
    client_port: u16,
    peer_port: u16,
    http_port: u16,
    data_dir: PathBuf,
}

fn nodes(args: &ClusterArgs) -> Vec<Node> {
    (1..=args.nodes)
        .map(|id| Node {
            id,
            client_port: args.base_port + id - 1,
            peer_port: args.base_port + 100 + id - 1,
            http_port: args.base_port + 200 + id - 1,
            data_dir: args.data_dir.join(format!("node{id}")),
        })
        .collect()
}

/// Starts every node, prints how to reach each, and waits for Ctrl-C or SIGTERM, then
/// stops them all (each finishes its checkpoint).
pub fn run(args: ClusterArgs) -> Result<(), String> {
    let binary = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let nodes = nodes(&args);
    let peers = nodes
        .iter()
        .map(|n| format!("{}=127.0.0.1:{}", n.id, n.peer_port))
        .collect::<Vec<_>>()
        .join(",");
    let partitions = args
        .partitions
        .unwrap_or_else(|| partitions_each(args.nodes));
    let mut children: Vec<(u16, Child)> = Vec::new();
    for node in &nodes {
        std::fs::create_dir_all(&node.data_dir)
            .map_err(|e| format!("cannot create {}: {e}", node.data_dir.display()))?;
        let child = Command::new(&binary)
            .arg("serve")
            .args(["--node-id", &node.id.to_string()])
            .arg("--data-dir")
            .arg(&node.data_dir)
            .args(["--listen", &format!("127.0.0.1:{}", node.client_port)])
            .args(["--raft-listen", &format!("127.0.0.1:{}", node.peer_port)])
            .args(["--http", &format!("127.0.0.1:{}", node.http_port)])
            .args(["--peers", &peers])
            .args(["--pool-mb", &args.pool_mb.to_string()])
            .args(["--partitions", &partitions.to_string()])
            .spawn();
        match child {
            Ok(child) => children.push((node.id, child)),
            Err(e) => {
                stop(&mut children);
                return Err(format!("cannot start node {}: {e}", node.id));
            }
        }
    }
    for node in &nodes {
        println!(
            "node {}: psql -h 127.0.0.1 -p {} -U ledger   console http://127.0.0.1:{}/   (peers on 127.0.0.1:{}, data in {})",
            node.id,
            node.client_port,
            node.http_port,
            node.peer_port,
            node.data_dir.display()
        );
    }
    println!("{} nodes started; Ctrl-C stops them all", nodes.len());
    wait_for_stop(&mut children);
    stop(&mut children);
    Ok(())
}

/// Set by SIGINT or SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Blocks until SIGINT or SIGTERM (reporting nodes that exit meanwhile).
fn wait_for_stop(children: &mut [(u16, Child)]) {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(signal, on_signal as *const () as libc::sighandler_t) };
    }
    let mut exited = vec![false; children.len()];
    while !STOP.load(Ordering::SeqCst) {
        for ((id, child), seen) in children.iter_mut().zip(exited.iter_mut()) {
            if !*seen {
                if let Ok(Some(status)) = child.try_wait() {
                    eprintln!("hotledger cluster: node {id} exited ({status})");
                    *seen = true;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGTERM to every node still running, then waits for each.
fn stop(children: &mut Vec<(u16, Child)>) {
    for (_, child) in children.iter() {
        // SAFETY: a signal to our own child process.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    }
    for (id, mut child) in children.drain(..) {
        match child.wait() {
            Ok(status) if status.success() => {}
            Ok(status) => eprintln!("hotledger cluster: node {id} stopped with {status}"),
            Err(e) => eprintln!("hotledger cluster: node {id}: {e}"),
        }
    }
}
