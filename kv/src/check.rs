//! A structural checker for B+trees, used by tests and by operators' integrity checks: keys
//! are strictly ordered within and across nodes, every key lies within its parent's separator
//! bounds, and every leaf is at the same depth.

use crate::error::{KvError, KvResult};
use crate::page::Node;
use crate::pager::Pager;

/// The shape of a checked tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeShape {
    pub keys: usize,
    /// Levels including the leaves (a lone root leaf is depth 1).
    pub depth: usize,
    /// Inner and leaf pages (not overflow pages).
    pub pages: usize,
}

/// Walks the tree under `root`; returns its shape or the first violation found.
pub fn check_tree(pager: &mut Pager, root: u64) -> KvResult<TreeShape> {
    let mut leaf_depth = None;
    let mut shape = TreeShape {
        keys: 0,
        depth: 0,
        pages: 0,
    };
    check_node(pager, root, None, None, 0, &mut leaf_depth, &mut shape)?;
    shape.depth = leaf_depth.unwrap_or(0) + 1;
    Ok(shape)
}

fn violation(page_id: u64, what: String) -> KvError {
    KvError::Poisoned(format!("B+tree check failed at page {page_id}: {what}"))
}

fn check_node(
    pager: &mut Pager,
    page_id: u64,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
    depth: usize,
    leaf_depth: &mut Option<usize>,
    shape: &mut TreeShape,
) -> KvResult<()> {
    shape.pages += 1;
    let (leaf, keys, children) = {
        let node = Node::new(pager.read(page_id)?);
        let prefix = node.prefix_len();
        if !node.is_leaf() && !node.cut_prefix().is_empty() {
            return Err(violation(
                page_id,
                "an internal node cuts its prefix".into(),
            ));
        }
        let keys: Vec<Vec<u8>> = (0..node.len()).map(|i| node.key_to_vec(i)).collect();
        for (index, key) in keys.iter().enumerate() {
            if key.len() < prefix || key[..prefix] != keys[0][..prefix] {
                return Err(violation(
                    page_id,
                    format!("key {index} lacks the node's shared prefix"),
                ));
            }
            if node.hint(index) != crate::page::hint_of(key, prefix) {
                return Err(violation(
                    page_id,
                    format!("slot {index} holds a stale key hint"),
                ));
            }
        }
        let children: Vec<u64> = if node.is_leaf() {
            Vec::new()
        } else {
            (0..=node.len()).map(|slot| node.child(slot)).collect()
        };
        (node.is_leaf(), keys, children)
    };
    for pair in keys.windows(2) {
        if pair[0] >= pair[1] {
            return Err(violation(page_id, "keys out of order".into()));
        }
    }
    if let (Some(lower), Some(first)) = (lower, keys.first()) {
        if first.as_slice() < lower {
            return Err(violation(page_id, "key below its separator".into()));
        }
    }
    if let (Some(upper), Some(last)) = (upper, keys.last()) {
        if last.as_slice() >= upper {
            return Err(violation(
                page_id,
                "key at or above the next separator".into(),
            ));
        }
    }
    if leaf {
        if *leaf_depth.get_or_insert(depth) != depth {
            return Err(violation(
                page_id,
                format!("leaf at depth {depth}, others deeper or shallower"),
            ));
        }
        shape.keys += keys.len();
        return Ok(());
    }
    for (slot, child) in children.iter().enumerate() {
        let child_lower = if slot == 0 {
            lower
        } else {
            Some(keys[slot - 1].as_slice())
        };
        let child_upper = keys.get(slot).map(Vec::as_slice).or(upper);
        check_node(
            pager,
            *child,
            child_lower,
            child_upper,
            depth + 1,
            leaf_depth,
            shape,
        )?;
    }
    Ok(())
}
