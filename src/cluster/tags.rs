//! The hash tags of a lock's nodes on a Redis Cluster: node `k` of `n`
//! uses the first tag `rq{n}.{k}.{j}` (`j` = 0, 1, ...) that hashes to the
//! middle slot of the `k`-th of `n` equal slot ranges.

use redis::cluster_routing::Slot;

/// The slots of a Redis Cluster.
pub(crate) const SLOTS: usize = 16384;

/// The slot that node `k` of `n` aims at: the middle of the `k`-th of `n`
/// equal slot ranges.
pub(crate) fn target_slot(n: usize, k: usize) -> u16 {
    u16::try_from((2 * k + 1) * SLOTS / (2 * n.max(1))).unwrap_or(0)
}

/// Node `k` of `n`'s hash tag and its slot, or `None` if no tag was found
/// (never: one in about 16384 candidates hits a given slot).
pub(crate) fn tag(n: usize, k: usize) -> Option<(String, u16)> {
    let slot = target_slot(n, k);
    let target = Slot::new(slot)?;
    (0..4 * SLOTS as u32 * 16)
        .map(|j| format!("rq{n}.{k}.{j}"))
        .find(|tag| Slot::for_key(tag) == target)
        .map(|tag| (tag, slot))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_targets_of_three_and_five_nodes_fall_in_distinct_even_ranges() {
        for n in [3, 5] {
            for k in 0..n {
                let slot = usize::from(target_slot(n, k));
                assert_eq!(slot * n / SLOTS, k, "node {k} of {n}: slot {slot}");
            }
        }
    }

    #[test]
    fn each_tag_hashes_to_its_target_slot_in_a_tagged_key() {
        for k in 0..5 {
            let (tag, slot) = tag(5, k).expect("a tag");
            assert_eq!(slot, target_slot(5, k));
            let key = format!("{{{tag}}}redquorum:lock:x");
            assert_eq!(Slot::for_key(key), Slot::new(slot).expect("slot"));
            assert!(!tag.contains(['{', '}']) && !tag.contains("lock:"), "{tag}");
        }
    }

    #[test]
    fn tags_depend_on_the_node_count_and_index_alone() {
        assert_eq!(tag(3, 1), tag(3, 1));
        assert_ne!(tag(3, 1), tag(5, 1));
    }
}
