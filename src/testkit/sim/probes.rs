//! Probes of the final phase: on healed nodes, a state set up exactly
//! (a lock value planted on chosen nodes, a key deleted behind a holder's
//! back, one link cut) and the one answer the docs promise for it. The
//! random workload meets these states by chance, or never: a failed call
//! that cannot wait, a release with exactly N − quorum refusals, a
//! trusted node's status.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::checks::Record;
use super::node::Persistence;
use super::run::NODES;
use super::workload::Client;
use super::world::{self, LinkMode, Process, Shared};
use crate::{Error, LockOptions, NodeProblem, Wait};

/// Runs every probe; `guarded`: the clients run the restart guard (one
/// quarantine, all of it served).
pub(super) async fn run(
    world: &Shared,
    record: &Arc<Mutex<Record>>,
    clients: &[Arc<Client>],
    guarded: bool,
) {
    // Each probe counts on the order of its calls' answers: FIFO links.
    let windows: Vec<Duration> = {
        let mut world = world::lock(world);
        clients
            .iter()
            .map(|c| {
                let window = world.unordered(c.index);
                world.set_unordered(c.index, Duration::ZERO);
                window
            })
            .collect()
    };
    if let Some(waiter) = clients.get(1) {
        marks(world, record, waiter).await;
    }
    if let Some(holder) = clients.first() {
        for extra in [0, 1] {
            release_verdict(world, record, holder, extra).await;
        }
        if guarded {
            trust(record, holder).await;
        }
    }
    for client in clients {
        reseed(world, record, client).await;
    }
    wake(world, record, clients).await;
    rewake(world, record, clients).await;
    super::handed::handed(world, record, clients).await;
    if let Some(client) = clients.iter().find(|c| !c.plan.config.fencing()) {
        super::late_vote::late_vote(world, record, client).await;
    }
    if let Some(client) = clients.iter().find(|c| c.plan.config.strict_checks()) {
        super::strict::strict(world, record, client).await;
    }
    if let Some(client) = clients.first() {
        cancelled(world, record, client).await;
        dropped(world, record, client).await;
        refused(world, record, client).await;
        found_gone(world, record, client).await;
        checked(world, record, client).await;
        // Its NOSCRIPT back within the round's deadline, then after it.
        forgotten(world, record, client, 0.125).await;
        forgotten(world, record, client, 0.7).await;
        lowered(world, record, client).await;
        follow(world, record, client).await;
        super::batched::batched(world, record, client).await;
        if guarded {
            quarantine(world, record, client).await;
        }
    }
    let mut world = world::lock(world);
    for (client, window) in clients.iter().zip(windows) {
        world.set_unordered(client.index, window);
    }
}

/// A failed attempt marks the lock it lost as awaited (`+` after the
/// holder's value, so that the release announces itself) only when its
/// call may wait for it: release notifications on and a retry or a
/// deadline left. A call that cannot wait marks nothing (a marked lock
/// costs its release a `PUBLISH`).
async fn marks(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client) {
    let resource = "probe-marks";
    let key = crate::keys::lock_key(client.plan.config.key_prefix(), resource);
    let planted = format!("A{}", "0".repeat(39));
    let marked_value = format!("{planted}+");
    let ttl = client.plan.max_ttl;
    let up = plant(world, &key, &planted);
    let marked = || nodes_holding(world, &key, &marked_value);
    let got = client.redlock.try_lock(resource, ttl).await;
    if got.is_ok() {
        violation(record, client, "try_lock got a lock held on every node");
        return;
    }
    settle(world, client).await;
    let after_try = marked();
    if !after_try.is_empty() {
        violation(
            record,
            client,
            &format!(
                "a failed try_lock marked the lock it lost as awaited on nodes {after_try:?}: a \
                 call that cannot wait must not"
            ),
        );
    }
    let options = LockOptions::new().wait(Wait::Retries(1));
    if client
        .redlock
        .lock_with(resource, ttl, &options)
        .await
        .is_ok()
    {
        violation(record, client, "lock_with got a lock held on every node");
        return;
    }
    settle(world, client).await;
    let after_wait = marked();
    let notifies = client.plan.config.release_notifications();
    if notifies && after_wait != up {
        violation(
            record,
            client,
            &format!(
                "a failed lock_with(Wait::Retries(1)) with release notifications on marked the \
                 lock it waits for on nodes {after_wait:?}, not on every node that holds it \
                 ({up:?})"
            ),
        );
    } else if !notifies && !after_wait.is_empty() {
        violation(
            record,
            client,
            &format!(
                "a failed lock_with(Wait::Retries(1)) with release notifications off marked the \
                 lock it lost as awaited on nodes {after_wait:?}"
            ),
        );
    }
    unplant(world, &key);
}

/// A release with `N − quorum + extra` of its nodes answering "not ours"
/// and one more hung: with `extra` 0 a quorum could still have held it,
/// so the release is unconfirmed; with `extra` 1 it cannot have, so the
/// lock had expired.
async fn release_verdict(
    world: &Shared,
    record: &Arc<Mutex<Record>>,
    client: &Client,
    extra: usize,
) {
    let resource = format!("probe-release-{extra}");
    let refusing = NODES - client.redlock.quorum() + extra;
    if refusing >= NODES {
        return;
    }
    let key = crate::keys::lock_key(client.plan.config.key_prefix(), &resource);
    let Ok(guard) = client
        .redlock
        .lock(resource.as_str(), client.plan.max_ttl)
        .await
    else {
        // Liveness on healed nodes is checked by the phase after.
        return;
    };
    // Every SET has landed (a link's latency is under a millisecond).
    tokio::time::sleep(Duration::from_millis(5)).await;
    let held = {
        let world = world::lock(world);
        let now = world.elapsed();
        (0..NODES)
            .filter(|&n| {
                world
                    .server(n)
                    .value(now, &world.stored_key(n, &key))
                    .is_some()
            })
            .count()
    };
    if held < NODES {
        let _ = guard.release().await;
        return;
    }
    let hung = refusing;
    {
        let mut world = world::lock(world);
        let now = world.elapsed();
        for node in 0..refusing {
            let del = [b"DEL".to_vec(), stored_bytes(&world, node, &key)];
            world.server_mut(node).execute(now, &del);
        }
        world.set_link(client.index, hung, LinkMode::Blackhole);
    }
    let got = guard.release().await;
    // The hung call's node timeout ends before the link is mended.
    settle(world, client).await;
    world::lock(world).set_link(client.index, hung, LinkMode::Pass);
    let right = matches!(
        (&got, extra),
        (Err(Error::ReleaseUnconfirmed(_)), 0) | (Err(Error::Expired), 1)
    );
    if !right {
        let expected = if extra == 0 {
            "ReleaseUnconfirmed"
        } else {
            "Expired"
        };
        violation(
            record,
            client,
            &format!(
                "a release with {refusing} of {NODES} nodes answering \"not ours\" and one hung \
                 (quorum {}) returned {got:?}, not {expected}",
                client.redlock.quorum()
            ),
        );
    }
}

/// An extension that reached a quorum puts the key back on a node that
/// had lost it when re-seeding is on (and on no other node), and never
/// creates a key when it is off.
async fn reseed(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client) {
    if client.redlock.quorum() >= NODES {
        return;
    }
    let resource = format!("probe-reseed-{}", client.index);
    let key = crate::keys::lock_key(client.plan.config.key_prefix(), &resource);
    let ttl = client.plan.max_ttl;
    let Ok(mut guard) = client.redlock.lock(resource.as_str(), ttl).await else {
        return;
    };
    // Every SET of the acquisition has landed (lock() returns at its
    // quorum): the key is deleted after the last one.
    tokio::time::sleep(Duration::from_millis(5)).await;
    drain(world, client).await;
    let lost = 0;
    let value = {
        let mut world = world::lock(world);
        let now = world.elapsed();
        let value = world
            .server(NODES - 1)
            .value(now, &world.stored_key(NODES - 1, &key));
        let del = [b"DEL".to_vec(), stored_bytes(&world, lost, &key)];
        world.server_mut(lost).execute(now, &del);
        value
    };
    let Some(value) = value else {
        let _ = guard.release().await;
        return;
    };
    // The round keeps only the answers that precede its decision: the
    // node that lost the key answers first, the others 0.6 node timeouts
    // later.
    let others = (0..NODES).filter(|&n| n != lost);
    let late = client.plan.config.node_timeout().mul_f64(0.3);
    set_links(world, client.index, others.clone(), LinkMode::Slow(late));
    let refused = "not re-seeded: another owner holds the key";
    let warned = super::traced::warnings(refused);
    let extended = guard.extend(ttl).await;
    set_links(world, client.index, others, LinkMode::Pass);
    let back = {
        let world = world::lock(world);
        let now = world.elapsed();
        world.server(lost).value(now, &world.stored_key(lost, &key))
    };
    let reseeds = client.plan.config.reseed_restarted_nodes();
    let wrong: Option<String> = match (&extended, reseeds) {
        // A node restarted by the faults may load its scripts again first:
        // a round that timed out says nothing of re-seeding.
        (Err(_), _) => None,
        (Ok(()), true) if back.as_ref() != Some(&value) => {
            Some("with re-seeding on did not put the key back on the node that had lost it".into())
        }
        (Ok(()), false) if back.is_some() => {
            Some("with re-seeding off created the key on a node that had lost it".into())
        }
        // Re-seeded, and logged as refused by another owner.
        (Ok(()), true) if super::traced::warnings(refused) > warned => Some(format!(
            "put the key back on node {lost} and warned {refused:?}"
        )),
        _ => None,
    };
    if let Some(wrong) = wrong {
        violation(
            record,
            client,
            &format!(
                "an extension of {resource} on healed nodes, its key deleted on node {lost}, {wrong}"
            ),
        );
    }
    let _ = guard.release().await;
}

/// A waiter with release notifications on is woken by the release of
/// the lock it waits for, not by its retry timer, and sends its `SET` to
/// each node once that node has announced the release: with pauses of at
/// least 60 ms, it holds the lock within 20 ms of the release (a few round
/// trips on quiet links, the release reaching some nodes 5 ms late).
async fn wake(world: &Shared, record: &Arc<Mutex<Record>>, clients: &[Arc<Client>]) {
    let Some(holder) = clients.first() else {
        return;
    };
    let shortest_pause = |c: &Client| {
        let config = &c.plan.config;
        config.retry_delay().saturating_sub(config.retry_jitter())
    };
    // A fenced client may be refused after restarts (fence counters not
    // known intact): not this probe's subject.
    let waiter = clients.iter().skip(1).find(|c| {
        let config = &c.plan.config;
        config.release_notifications()
            && !config.fencing()
            && shortest_pause(c) >= Duration::from_millis(60)
    });
    let Some(waiter) = waiter.cloned() else {
        return;
    };
    let resource = "probe-wake";
    let Ok(guard) = holder.redlock.lock(resource, holder.plan.max_ttl).await else {
        return;
    };
    let ttl = waiter.plan.max_ttl;
    let waiting = Arc::clone(&waiter);
    let task = tokio::spawn(async move {
        let options = LockOptions::new().wait(Wait::Retries(3));
        let got = waiting.redlock.lock_with(resource, ttl, &options).await;
        (got, tokio::time::Instant::now())
    });
    // Its first attempt fails and it subscribes (a few round trips).
    tokio::time::sleep(Duration::from_millis(20)).await;
    // The release reaches N - quorum + 1 nodes 5 ms late: a waiter that
    // sent its SET there before hearing the release there would be
    // refused by enough nodes to fail.
    let late: Vec<usize> = (0..=NODES - waiter.redlock.quorum()).collect();
    let slow = LinkMode::Slow(Duration::from_millis(5));
    set_links(world, holder.index, late.iter().copied(), slow);
    let released = tokio::time::Instant::now();
    let release = guard.release().await;
    set_links(world, holder.index, late.iter().copied(), LinkMode::Pass);
    if release.is_err() {
        return;
    }
    let Ok((got, at)) = task.await else {
        return;
    };
    let took = at.saturating_duration_since(released);
    match got {
        Ok(guard) => {
            if took > Duration::from_millis(20) {
                violation(
                    record,
                    &waiter,
                    &format!(
                        "a waiter with release notifications on got the lock {took:?} after its \
                         release began (pauses of at least {:?}): woken by its timer, not by \
                         the release",
                        shortest_pause(&waiter)
                    ),
                );
            }
            let _ = guard.release().await;
        }
        Err(e) => violation(
            record,
            &waiter,
            &format!("a waiter did not get the lock after its holder released it: {e}"),
        ),
    }
}

/// A woken attempt that fails after the pause it interrupted would have
/// ended is followed by a fresh pause, counted against the retries: a
/// `lock()` with one retry gives up as that attempt ends. The
/// holder is a planted value; its "release" is the announcement alone, so
/// the woken attempt is refused; the waiter's links turn slow as it wakes,
/// so that attempt lasts its node timeout, past the pause's end.
async fn rewake(world: &Shared, record: &Arc<Mutex<Record>>, clients: &[Arc<Client>]) {
    let waiter = clients.iter().skip(1).find(|c| {
        let config = &c.plan.config;
        let pause = config.retry_delay().saturating_sub(config.retry_jitter());
        config.release_notifications()
            && !config.fencing()
            && pause >= Duration::from_millis(40)
            && config.node_timeout() >= config.retry_delay() + config.retry_jitter()
    });
    let Some(waiter) = waiter.cloned() else {
        return;
    };
    let resource = "probe-rewake";
    let prefix = waiter.plan.config.key_prefix();
    let key = crate::keys::lock_key(prefix, resource);
    let channel = crate::keys::channel(prefix, resource);
    let planted = format!("B{}", "0".repeat(39));
    plant(world, &key, &planted);
    let ttl = waiter.plan.max_ttl;
    let waiting = Arc::clone(&waiter);
    let task = tokio::spawn(async move {
        let options = LockOptions::new().wait(Wait::Retries(1));
        waiting.redlock.lock_with(resource, ttl, &options).await
    });
    // Its first attempt is refused; it subscribes and pauses.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let timeout = waiter.plan.config.node_timeout();
    {
        let mut world = world::lock(world);
        for node in 0..NODES {
            let publish = [
                b"PUBLISH".to_vec(),
                stored_bytes(&world, node, &channel),
                planted.clone().into_bytes(),
            ];
            let _ = world.deliver(node, &publish);
            world.set_link(waiter.index, node, LinkMode::Slow(timeout));
        }
    }
    let published = tokio::time::Instant::now();
    let got = task.await;
    let took = published.elapsed();
    set_links(world, waiter.index, 0..NODES, LinkMode::Pass);
    // The woken attempt lasts one node timeout (its calls time out), and
    // the call gives up when it ends: its retry was the pause it
    // interrupted.
    let bound = timeout.mul_f64(1.5);
    match got {
        Ok(Err(Error::NotAcquired(_))) if took <= bound => {}
        Err(_) => {}
        Ok(Ok(_)) => violation(record, &waiter, "lock_with got a lock held on every node"),
        Ok(Err(e)) => violation(
            record,
            &waiter,
            &format!(
                "a lock() with one retry, woken by a release while it paused, its woken attempt \
                 refused past the pause's end, returned {took:?} after the release (node \
                 timeout {timeout:?}): {e}; it should give up as that attempt ends"
            ),
        ),
    }
    tokio::time::sleep(timeout * 3).await;
    unplant(world, &key);
}

/// A lock taken again right after its release, by the same client, while
/// the release's delete on a slow node still waits for the first
/// acquisition's call there: the new `SET` follows that delete, so the
/// slow node grants it instead of refusing it behind the old key.
async fn follow(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client) {
    if client.redlock.quorum() >= NODES {
        return;
    }
    let slow = NODES - 1;
    let timeout = client.plan.config.node_timeout();
    // A round trip of 1.2 node timeouts: each call there times out, and
    // its command still lands.
    let by = timeout.mul_f64(0.6);
    let resource = "probe-follow";
    let key = crate::keys::lock_key(client.plan.config.key_prefix(), resource);
    let ttl = client.plan.max_ttl;
    world::lock(world).set_link(client.index, slow, LinkMode::Slow(by));
    let released = match client.redlock.lock(resource, ttl).await {
        Ok(first) => first.release().await.is_ok(),
        Err(_) => false,
    };
    let second = if released {
        client.redlock.lock(resource, ttl).await.ok()
    } else {
        None
    };
    let Some(second) = second else {
        world::lock(world).set_link(client.index, slow, LinkMode::Pass);
        return;
    };
    let mut held = false;
    let until = tokio::time::Instant::now() + timeout * 3;
    while !held && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let world = world::lock(world);
        let now = world.elapsed();
        let stored = world.server(slow).value(now, &world.stored_key(slow, &key));
        held = stored.as_deref() == Some(second.value().as_bytes());
    }
    world::lock(world).set_link(client.index, slow, LinkMode::Pass);
    if !held {
        violation(
            record,
            client,
            &format!(
                "a lock taken again at once after its release never held slow node {slow} \
                 (round trip {:?}, node timeout {timeout:?}): its SET went out before the \
                 release's delete there",
                by * 2
            ),
        );
    }
    settle(world, client).await;
    let _ = second.release().await;
}

/// A node restarted empty under the restart guard: the next vote there is
/// refused as quarantined and starts the quarantine; `check_report` then
/// shows it under way.
/// The probe ends once that quarantine is served.
async fn quarantine(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client) {
    // The longest quarantine any client announces: the node keeps one.
    let Some(served) = client.quarantine else {
        return;
    };
    if client.redlock.quorum() >= NODES {
        return;
    }
    // The vote on the restarted node must not queue behind earlier calls.
    settle(world, client).await;
    let node = NODES - 1;
    world::lock(world).restart(node, Persistence::None);
    let started = |checks: &[crate::NodeCheck]| {
        checks
            .iter()
            .flat_map(|c| c.problems())
            .find_map(|p| match p {
                NodeProblem::Quarantined { index, started, .. } if *index == node => Some(*started),
                _ => None,
            })
    };
    // A holder on the other nodes, so that the vote fails and reports
    // every node's answer.
    let resource = "probe-quarantine";
    let key = crate::keys::lock_key(client.plan.config.key_prefix(), resource);
    let others: Vec<usize> = (0..NODES).filter(|&n| n != node).collect();
    plant_on(world, &key, &format!("C{}", "0".repeat(39)), &others);
    // The restarted node answers first (it loads the script), the others
    // after 0.8 node timeouts.
    let by = client.plan.config.node_timeout().mul_f64(0.4);
    set_links(
        world,
        client.index,
        others.iter().copied(),
        LinkMode::Slow(by),
    );
    let got = client.redlock.try_lock(resource, client.plan.max_ttl).await;
    set_links(world, client.index, others.iter().copied(), LinkMode::Pass);
    let outcome = match &got {
        Err(Error::NotAcquired(attempts)) => {
            attempts.nodes().get(node).map(|r| r.outcome().clone())
        }
        _ => None,
    };
    if !matches!(outcome, Some(crate::NodeOutcome::Quarantined { .. })) {
        violation(
            record,
            client,
            &format!(
                "the first vote on node {node}, restarted empty, answered {outcome:?}, not \
                 Quarantined (the call returned {got:?})"
            ),
        );
    }
    let after = started(&client.redlock.check_report().await);
    if after != Some(true) {
        violation(
            record,
            client,
            &format!(
                "check_report on node {node} after its first vote since an empty restart: \
                 quarantine started {after:?}, not Some(true)"
            ),
        );
    }
    settle(world, client).await;
    unplant(world, &key);
    // As an operator warms a restarted node: the phase after must not meet
    // the known late-NOSCRIPT defect because of this probe.
    {
        let mut world = world::lock(world);
        for registered in crate::node::registry::SCRIPTS.iter() {
            let source = registered.script.source().as_bytes().to_vec();
            let load = [b"SCRIPT".to_vec(), b"LOAD".to_vec(), source];
            let _ = world.deliver(node, &load);
        }
    }
    tokio::time::sleep(served + Duration::from_millis(100)).await;
}

/// Once every quarantine is served, every node reports itself trusted to
/// `check_report` and `inspect`; and the fleet, which announces one
/// quarantine (the probes run only then), sees no mismatch.
async fn trust(record: &Arc<Mutex<Record>>, client: &Client) {
    for check in client.redlock.check_report().await {
        for problem in check.problems() {
            if matches!(
                problem,
                NodeProblem::Quarantined { .. } | NodeProblem::QuarantineMismatch { .. }
            ) {
                violation(
                    record,
                    client,
                    &format!("check_report after every quarantine ran out: {problem}"),
                );
            }
        }
    }
    if let Ok(inspection) = client.redlock.inspect("probe-trust").await {
        for view in inspection.nodes() {
            if let Some(left) = view.quarantine() {
                violation(
                    record,
                    client,
                    &format!(
                        "inspect after every quarantine ran out: node {} still in quarantine \
                         for {left:?}",
                        view.node()
                    ),
                );
            }
        }
    }
}

/// An acquisition cancelled while its `SET`s are on their way leaves
/// nothing behind: dropping it deletes its keys in the background, each
/// delete sent behind its node's `SET`, so once the client's calls have
/// landed no node holds the key, long before its TTL would have ended it.
async fn cancelled(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client) {
    let own = Own::new(client, "cancel");
    let (resource, key, ttl) = (&own.resource, &own.key, own.ttl);
    let late = client.plan.config.node_timeout() / 2;
    set_links(world, client.index, 0..NODES, LinkMode::Slow(late));
    let lock = client.redlock.lock(resource.as_str(), ttl);
    let got = tokio::time::timeout(late / 4, lock).await;
    set_links(world, client.index, 0..NODES, LinkMode::Pass);
    if let Ok(got) = got {
        if let Ok(guard) = got {
            let _ = guard.release().await;
        }
        return;
    }
    settle(world, client).await;
    // Checked only while the key's TTL would still keep it.
    if !own.kept() {
        return;
    }
    let left = nodes_where(world, key, |stored| stored.is_some());
    if !left.is_empty() {
        violation(
            record,
            client,
            &format!(
                "a lock() of {resource} cancelled while its SETs were on their way left the key \
                 on nodes {left:?} after its calls had landed"
            ),
        );
    }
}

/// A guard dropped without a release releases its lock in the background:
/// once the client's calls have landed, no node holds the key, long before
/// its TTL would have ended it.
async fn dropped(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client) {
    let own = Own::new(client, "dropped");
    let (resource, key, ttl) = (&own.resource, &own.key, own.ttl);
    let Ok(guard) = client.redlock.lock(resource.as_str(), ttl).await else {
        return;
    };
    let value = guard.value().to_owned();
    drop(guard);
    settle(world, client).await;
    // Checked only while the key's TTL would still keep it.
    if !own.kept() {
        return;
    }
    let left = nodes_holding(world, key, &value);
    if !left.is_empty() {
        violation(
            record,
            client,
            &format!(
                "a guard of {resource} dropped without a release left the key on nodes {left:?} \
                 after its calls had landed"
            ),
        );
    }
}

/// A `try_lock` refused by a majority cleans up after itself: the nodes
/// that granted it hold no key of it once the client's calls have landed
/// (another owner's value is planted on N - quorum + 1 nodes).
async fn refused(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client) {
    let own = Own::new(client, "refused");
    let (resource, key, ttl) = (&own.resource, &own.key, own.ttl);
    let foreign = "probe-refused-owner";
    let holders: Vec<usize> = (0..=NODES - client.redlock.quorum()).collect();
    plant_on(world, key, foreign, &holders);
    if let Ok(guard) = client.redlock.try_lock(resource.as_str(), ttl).await {
        let _ = guard.release().await;
        unplant(world, key);
        return;
    }
    settle(world, client).await;
    let left = nodes_where(world, key, |stored| {
        stored.is_some_and(|v| v != foreign.as_bytes())
    });
    unplant(world, key);
    // Checked only while the key's TTL would still keep it.
    if !left.is_empty() && own.kept() {
        violation(
            record,
            client,
            &format!(
                "a try_lock of {resource} refused by {} nodes left its key on nodes {left:?} \
                 after its calls had landed",
                holders.len()
            ),
        );
    }
}

/// An extension that finds the key gone from every node marks the lock
/// lost: `lost()` resolves at once, not at the deadline.
async fn found_gone(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client) {
    let own = Own::new(client, "gone");
    let (resource, key, ttl) = (&own.resource, &own.key, own.ttl);
    let Ok(mut guard) = client.redlock.lock(resource.as_str(), ttl).await else {
        return;
    };
    drain(world, client).await;
    unplant(world, key);
    let extended = guard.extend(ttl).await;
    let lost = futures_util::FutureExt::now_or_never(guard.lost()).is_some();
    if matches!(extended, Err(Error::Expired)) && !lost {
        violation(
            record,
            client,
            &format!(
                "an extension of {resource} found the key gone from every node, yet lost() \
                 waits ({:?} of validity left)",
                guard.remaining()
            ),
        );
    }
    drop(guard);
    settle(world, client).await;
}

/// `check()` fails while more than N - quorum nodes cannot be reached.
async fn checked(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client) {
    let cut = NODES - client.redlock.quorum() + 1;
    set_links(world, client.index, 0..cut, LinkMode::Blackhole);
    let checked = client.redlock.check().await;
    set_links(world, client.index, 0..cut, LinkMode::Pass);
    settle(world, client).await;
    if checked.is_ok() {
        violation(
            record,
            client,
            &format!("check() passed while {cut} of {NODES} nodes could not be reached"),
        );
    }
}

/// A release decided by the quick nodes still deletes the key on a node
/// that had forgotten the delete script and is `slow` node timeouts slow
/// each way: the round's calls still in flight are finished in the
/// background, and a delete is kept past the round's deadline, so a
/// `NOSCRIPT` that comes back within two node timeouts is answered with
/// `SCRIPT LOAD` and the second call. The node's other scripts are put
/// back afterwards, for the probes after.
async fn forgotten(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client, slow: f64) {
    if client.redlock.quorum() >= NODES {
        return;
    }
    let own = Own::new(client, "forgotten");
    let (resource, key, ttl) = (&own.resource, &own.key, own.ttl);
    let Ok(guard) = client.redlock.lock(resource.as_str(), ttl).await else {
        return;
    };
    let value = guard.value().to_owned();
    // Every call of the acquisition over (a fenced one's write-back
    // included), so that the delete is sent at once, not chained with a
    // node timeout of its own.
    drain(world, client).await;
    tokio::time::sleep(client.plan.config.node_timeout() * 2).await;
    let node = NODES - 1;
    let known = {
        let mut world = world::lock(world);
        let now = world.elapsed();
        let known = world.server(node).scripts_known();
        let flush = [b"SCRIPT".to_vec(), b"FLUSH".to_vec()];
        world.server_mut(node).execute(now, &flush);
        known
    };
    let by = client.plan.config.node_timeout().mul_f64(slow);
    set_links(
        world,
        client.index,
        std::iter::once(node),
        LinkMode::Slow(by),
    );
    let released = guard.release().await;
    // Slow until every call has landed: a NOSCRIPT read by twice the node
    // timeout starts a reload bounded by twice the node timeout more, whose
    // second delete then takes one trip.
    let timeout = client.plan.config.node_timeout();
    tokio::time::sleep(timeout * 4 + by + Duration::from_millis(10)).await;
    set_links(world, client.index, std::iter::once(node), LinkMode::Pass);
    drain(world, client).await;
    world::lock(world).server_mut(node).know_scripts(&known);
    // Checked only while the key's TTL would still keep it.
    if released.is_err() || !own.kept() {
        return;
    }
    if nodes_holding(world, key, &value).contains(&node) {
        violation(
            record,
            client,
            &format!(
                "a release of {resource}, granted by the quick nodes, left the key on node \
                 {node}, which had forgotten the delete script and was {by:?} slow each way \
                 (node timeout {timeout:?})"
            ),
        );
    }
}

/// An extension to a shorter TTL that fails leaves the deadline lowered
/// (some nodes may hold the shorter TTL), and the watchdog of the
/// auto-extended guard hears of it: it extends before that deadline, not
/// at the time the old one had set. Each way the extension's calls are a
/// node timeout slow, so it fails on timeouts (not refusals).
async fn lowered(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client) {
    let config = &client.plan.config;
    let timeout = config.node_timeout();
    let ttl = client.plan.max_ttl;
    let short = timeout * 2 + Duration::from_millis(50);
    let left = |t: Duration| t.saturating_sub(config.drift_for(t));
    // The old deadline's extension time must come well after the lowered
    // deadline, itself well after the failed round.
    let lead = ttl.mul_f64(config.extend_at());
    if short >= ttl || left(ttl).saturating_sub(lead) < left(short) + Duration::from_millis(20) {
        return;
    }
    let resource = format!("probe-lowered-{}", client.index);
    let Ok(mut guard) = client.redlock.lock(resource.as_str(), ttl).await else {
        return;
    };
    guard.auto_extend();
    // The watchdog reads the deadline and goes to sleep first.
    tokio::time::sleep(Duration::from_millis(1)).await;
    set_links(world, client.index, 0..NODES, LinkMode::Slow(timeout));
    let extended = guard.extend(short).await;
    set_links(world, client.index, 0..NODES, LinkMode::Pass);
    let lowered_to = guard.valid_until();
    if extended.is_ok() || guard.remaining().is_zero() {
        let _ = guard.release().await;
        return;
    }
    tokio::time::sleep_until(lowered_to + Duration::from_millis(5)).await;
    if guard.remaining().is_zero() {
        violation(
            record,
            client,
            &format!(
                "an auto-extended {resource}, after a failed extension to {short:?} (node \
                 timeout {timeout:?}), ran out at its lowered deadline: its watchdog slept on \
                 towards the extension time the old deadline had set"
            ),
        );
    }
    let _ = guard.release().await;
    settle(world, client).await;
}

/// A probe's own lock: `probe-{name}-{client}`, of the client's longest
/// TTL, taken from `started`.
pub(super) struct Own {
    pub(super) resource: String,
    pub(super) key: String,
    pub(super) ttl: Duration,
    started: tokio::time::Instant,
}

impl Own {
    pub(super) fn new(client: &Client, name: &str) -> Self {
        let resource = format!("probe-{name}-{}", client.index);
        let key = crate::keys::lock_key(client.plan.config.key_prefix(), &resource);
        Own {
            resource,
            key,
            ttl: client.plan.max_ttl,
            started: tokio::time::Instant::now(),
        }
    }

    /// Whether its key's TTL would still keep it: a key left behind is
    /// seen only then.
    pub(super) fn kept(&self) -> bool {
        self.started.elapsed() + Duration::from_millis(1) < self.ttl
    }
}

/// Sets `key` to `value` on every node that is up; returns those nodes.
pub(super) fn plant(world: &Shared, key: &str, value: &str) -> Vec<usize> {
    let up: Vec<usize> = {
        let world = world::lock(world);
        (0..world.node_count())
            .filter(|&n| world.process(n) == Process::Up)
            .collect()
    };
    plant_on(world, key, value, &up);
    up
}

/// Sets `key` to `value` on `nodes`.
pub(super) fn plant_on(world: &Shared, key: &str, value: &str, nodes: &[usize]) {
    let mut world = world::lock(world);
    let now = world.elapsed();
    for &node in nodes {
        let set = [
            b"SET".to_vec(),
            stored_bytes(&world, node, key),
            value.as_bytes().to_vec(),
            b"PX".to_vec(),
            b"60000".to_vec(),
        ];
        world.server_mut(node).execute(now, &set);
    }
}

/// Deletes `key` on every node.
fn unplant(world: &Shared, key: &str) {
    let mut world = world::lock(world);
    let now = world.elapsed();
    for node in 0..world.node_count() {
        let del = [b"DEL".to_vec(), stored_bytes(&world, node, key)];
        world.server_mut(node).execute(now, &del);
    }
}

/// The nodes where `key` holds `value`.
pub(super) fn nodes_holding(world: &Shared, key: &str, value: &str) -> Vec<usize> {
    nodes_where(world, key, |stored| stored == Some(value.as_bytes()))
}

/// The nodes whose stored value of `key` (`None`: no such key) passes
/// `test`.
fn nodes_where(world: &Shared, key: &str, test: impl Fn(Option<&[u8]>) -> bool) -> Vec<usize> {
    let world = world::lock(world);
    let now = world.elapsed();
    (0..world.node_count())
        .filter(|&n| {
            test(
                world
                    .server(n)
                    .value(now, &world.stored_key(n, key))
                    .as_deref(),
            )
        })
        .collect()
}

/// `key` as stored on `node` (with the node's hash tag, if any), as a
/// command argument.
fn stored_bytes(world: &world::World, node: usize, key: &str) -> Vec<u8> {
    world.stored_key(node, key).as_bytes().to_vec()
}

/// Sets the links from `client` to `nodes` to `mode`.
pub(super) fn set_links(
    world: &Shared,
    client: usize,
    nodes: impl Iterator<Item = usize>,
    mode: LinkMode,
) {
    let mut world = world::lock(world);
    for node in nodes {
        world.set_link(client, node, mode);
    }
}

/// Waits out the client's calls in flight (a failed attempt's clean-up,
/// sent in the background, included): two node timeouts, then [`drain`]
/// (a link slowed by a probe keeps its queue after it passes again).
pub(super) async fn settle(world: &Shared, client: &Client) {
    tokio::time::sleep(client.plan.config.node_timeout() * 2 + Duration::from_millis(10)).await;
    drain(world, client).await;
}

/// Waits until every command the client sent has landed and every reply
/// come back.
pub(super) async fn drain(world: &Shared, client: &Client) {
    let drained = world::lock(world).drained_at(client.index);
    tokio::time::sleep_until(drained + Duration::from_millis(1)).await;
}

pub(super) fn violation(record: &Arc<Mutex<Record>>, client: &Client, what: &str) {
    let line = format!("probe: client {}: {what}", client.index);
    super::run::record::violation(record, line);
}
