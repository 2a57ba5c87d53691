//! Redlock over the masters of one local Redis Cluster (feature `cluster`):
//! the cluster forms, its faults (a master failover, a slot moved) happen
//! as an operator's would, and the lock keeps its promises through them.
#![cfg(all(feature = "testkit", feature = "cluster"))]

use redquorum::testkit::LocalRedisCluster;

#[test]
fn a_local_cluster_forms_and_promotes_a_replica_when_a_master_dies() {
    let cluster = LocalRedisCluster::start(3, 1).expect("cluster");
    assert_eq!(cluster.len(), 6);
    assert_eq!(cluster.masters().len(), 3);
    let owner = cluster.master_of(0).expect("owner of slot 0");
    cluster.kill(owner).expect("kill");
    let promoted = cluster
        .wait_for_owner_other_than(0, owner)
        .expect("promotion");
    assert_ne!(promoted, owner);
    assert_eq!(cluster.masters().len(), 3, "the replica is a master now");
}
