//! Redlock over the masters of one Redis Cluster (feature `cluster`).
//!
//! The N nodes of a lock are N hash tags ([`tags`]), each aimed at its own
//! slot, spread evenly over the slot space so that a cluster whose slots
//! are split evenly among at least N masters serves them from N distinct
//! masters. The tags depend on N alone: every client of the lock agrees
//! on them whatever it knows of the cluster. Each node talks to the
//! master that serves its tag's slot, with every key tagged
//! ([`crate::node::tagged`]); the [`placement`] is read from the cluster
//! (`CLUSTER SLOTS`), read again when a node meets a redirection or loses
//! its master, and an acquisition whose tags would share a master is
//! refused.

pub(crate) mod layout;
pub(crate) mod placement;
pub(crate) mod tags;
