//! Every saved input — each crash the fuzzers found, and the corpus when one exists — runs
//! through the targets' bodies on the stable toolchain, in CI.

use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut count = 0;
    for dir in [
        root.join("regressions").join(target),
        root.join("corpus").join(target),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("directory entry").path();
            let data = std::fs::read(&path).expect("saved input");
            run(&data);
            count += 1;
        }
    }
    assert!(count > 0, "no saved inputs for {target}");
}

#[test]
fn frames_regressions() {
    replay("frames", hotledger_fuzz::frames_then_decoder);
}

#[test]
fn sql_front_regressions() {
    replay("sql_front", hotledger_fuzz::parse_and_bind);
}
