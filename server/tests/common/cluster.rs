//! Clusters of real `hotledger serve` processes on 127.0.0.1 for a test: start, kill -9,
//! restart, and psql against any node.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use super::proxy::LinkProxy;
use super::{binary, free_port, output_within, stdout, PASSWORD, PSQL_LIMIT};

/// How long after the others the last node behind proxies starts: time for them to elect.
const LATE_START: Duration = Duration::from_millis(2_000);

/// The proxies of a cluster started behind them, by (from, to) node.
#[derive(Default)]
pub struct Links(pub BTreeMap<(usize, usize), LinkProxy>);

impl Links {
    /// Cuts node `id` off from every other node, both ways.
    pub fn isolate(&self, id: usize) {
        for ((from, to), proxy) in &self.0 {
            if *from == id || *to == id {
                proxy.cut();
            }
        }
    }

    pub fn heal_all(&self) {
        for proxy in self.0.values() {
            proxy.heal();
        }
    }
}

pub struct Node {
    pub id: usize,
    pub port: u16,
    pub peer_port: u16,
    pub dir: PathBuf,
    pub child: Option<Child>,
    /// Started with `--join` (added by `hotledger.add_node`), not `--peers`.
    pub joins: bool,
    /// This node's own `--peers` list, when it reaches the others through proxies.
    pub own_peers: Option<String>,
    /// Its console's port (`--http`), when the cluster was started with consoles.
    pub http_port: Option<u16>,
}

pub struct Cluster {
    pub nodes: Vec<Node>,
    /// Given to every node's `serve` after the common arguments.
    extra_args: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    pub fn start(voters: usize) -> Cluster {
        Cluster::start_with(voters, &[])
    }

    /// A cluster of `voters` whose nodes are also given `extra_args`.
    pub fn start_with(voters: usize, extra_args: &[&str]) -> Cluster {
        Cluster::launch_all(voters, extra_args, None, false)
    }

    /// A cluster whose nodes each serve a console (`Node::http_port`).
    pub fn start_with_consoles(voters: usize) -> Cluster {
        Cluster::launch_all(voters, &[], None, true)
    }

    /// A cluster whose nodes reach each other only through proxies, one per direction of
    /// every link (node i's `--peers` names, for each other node j, the proxy i→j), so a
    /// test can cut any link. The last node starts once the others have had time to elect
    /// a leader, so its first membership is likely the one the leader replicates to it —
    /// another node's list — and it must still reach its peers at its own.
    pub fn start_behind_proxies(voters: usize) -> (Cluster, Links) {
        let mut links = Links::default();
        let cluster = Cluster::launch_all(voters, &[], Some(&mut links), false);
        (cluster, links)
    }

    fn launch_all(
        voters: usize,
        extra_args: &[&str],
        links: Option<&mut Links>,
        consoles: bool,
    ) -> Cluster {
        let extra_args: Vec<String> = extra_args.iter().map(|a| a.to_string()).collect();
        let dir = tempfile::tempdir().unwrap();
        let mut nodes: Vec<Node> = (1..=voters)
            .map(|id| Node {
                id,
                port: free_port(),
                peer_port: free_port(),
                dir: dir.path().join(format!("node{id}")),
                child: None,
                joins: false,
                own_peers: None,
                http_port: consoles.then(free_port),
            })
            .collect();
        let late = links.is_some().then_some(voters);
        if let Some(links) = links {
            let ports: Vec<u16> = nodes.iter().map(|n| n.peer_port).collect();
            for node in &mut nodes {
                let list: Vec<String> = (1..=voters)
                    .map(|to| {
                        let port = if to == node.id {
                            node.peer_port
                        } else {
                            let proxy = super::proxy::LinkProxy::start(ports[to - 1]);
                            let port = proxy.port;
                            links.0.insert((node.id, to), proxy);
                            port
                        };
                        format!("{to}=127.0.0.1:{port}")
                    })
                    .collect();
                node.own_peers = Some(list.join(","));
            }
        }
        let peers = nodes
            .iter()
            .map(|n| format!("{}=127.0.0.1:{}", n.id, n.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        for node in &mut nodes {
            let peers = node.own_peers.clone().unwrap_or_else(|| peers.clone());
            if late == Some(node.id) {
                std::thread::sleep(LATE_START);
            }
            node.launch(&peers, &extra_args);
        }
        let cluster = Cluster {
            nodes,
            extra_args,
            _dir: dir,
        };
        for node in &cluster.nodes {
            node.wait_ready();
        }
        cluster
    }

    pub fn peers(&self) -> String {
        self.nodes
            .iter()
            .filter(|n| !n.joins)
            .map(|n| format!("{}=127.0.0.1:{}", n.id, n.peer_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn kill9(&mut self, id: usize) {
        let node = &mut self.nodes[id - 1];
        let mut child = node.child.take().expect("running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    pub fn restart(&mut self, id: usize) {
        let peers = self.peers();
        let node = &mut self.nodes[id - 1];
        let peers = node.own_peers.clone().unwrap_or(peers);
        node.launch(&peers, &self.extra_args);
        node.wait_ready();
    }

    /// Starts one more node with `--join`, waiting to be added; returns its id. `extra`
    /// goes after the cluster's own extra arguments.
    pub fn start_joining(&mut self, extra: &[&str]) -> usize {
        let id = self.nodes.len() + 1;
        let root = self.nodes[0]
            .dir
            .parent()
            .expect("a cluster directory")
            .to_path_buf();
        let mut node = Node {
            id,
            port: free_port(),
            peer_port: free_port(),
            dir: root.join(format!("node{id}")),
            child: None,
            joins: true,
            own_peers: None,
            http_port: None,
        };
        let mut args = self.extra_args.clone();
        args.extend(extra.iter().map(|a| a.to_string()));
        node.launch("", &args);
        self.nodes.push(node);
        id
    }

    pub fn node(&self, id: usize) -> &Node {
        &self.nodes[id - 1]
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

impl Node {
    fn launch(&mut self, peers: &str, extra_args: &[String]) {
        std::fs::create_dir_all(&self.dir).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.log"))
            .unwrap();
        let child = Command::new(binary())
            .arg("serve")
            .args(["--node-id", &self.id.to_string()])
            .arg("--data-dir")
            .arg(self.dir.join("data"))
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .args(["--raft-listen", &format!("127.0.0.1:{}", self.peer_port)])
            .args(if self.joins {
                vec!["--join"]
            } else {
                vec!["--peers", peers]
            })
            .args(super::default_unless_given(extra_args, "--pool-mb", "32"))
            .args(["--checkpoint-interval-s", "1"])
            .args(match self.http_port {
                Some(port) => vec!["--http".to_string(), format!("127.0.0.1:{port}")],
                None => vec!["--http".to_string(), "off".to_string()],
            })
            .args(extra_args)
            .env("HOTLEDGER_PASSWORD", PASSWORD)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if self.psql("select 1").status.success() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("node {} did not become ready: {}", self.id, self.log());
    }

    pub fn psql(&self, sql: &str) -> Output {
        psql_at(self.port, sql)
    }

    /// One statement's output, which must succeed.
    pub fn query(&self, sql: &str) -> String {
        let out = self.psql(sql);
        assert!(
            out.status.success(),
            "node {}: {sql}: {}",
            self.id,
            String::from_utf8_lossy(&out.stderr)
        );
        stdout(&out).trim().to_string()
    }
}

pub fn psql_at(port: u16, sql: &str) -> Output {
    let mut command = Command::new("psql");
    command
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "ledger",
            "-d",
            "ledger",
        ])
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .env("PGPASSWORD", PASSWORD)
        .env("PGCONNECT_TIMEOUT", "5");
    output_within(&mut command, PSQL_LIMIT)
}

pub fn ids(text: &str) -> Vec<i64> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// The leader as node `id` sees it, if any.
pub fn leader_seen_by(cluster: &Cluster, id: usize) -> Option<usize> {
    let out = cluster
        .node(id)
        .psql("select node_id from hotledger.cluster where role = 'leader'");
    stdout(&out).trim().parse().ok()
}

pub fn signal(cluster: &Cluster, id: usize, signal: i32) {
    let pid = cluster.node(id).child.as_ref().expect("running").id();
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(pid as i32, signal) };
}
