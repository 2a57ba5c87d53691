//! The kinds of lock and, per kind, its scripts: the one place where a
//! kind is chosen (from the options when a lock is taken, from its value
//! when it is released or extended) and where its scripts are picked.
//!
//! Every kind runs the same steps: acquire (with or without the restart
//! guard), release, extend (with or without it). A new kind is a new
//! variant with its own [`Scripts`] and the arms below; the requests
//! (`node::commands`), the rounds and the script registry take it from
//! there.

use super::reentrant::{REENTRANT_ACQUIRE, REENTRANT_EXTEND, REENTRANT_RELEASE};
use super::request::Grant;
use super::restart_guard::{
    GUARDED_ACQUIRE_ALL, GUARDED_EXTEND, GUARDED_FENCED_ACQUIRE, GUARDED_REENTRANT_ACQUIRE,
    GUARDED_REENTRANT_EXTEND,
};
use super::script::{Lua, Registered, entry};
use super::scripts::{ACQUIRE_ALL, EXTEND, FENCED_ACQUIRE, RELEASE};
use crate::value;

/// A kind of lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One owner, a fresh random value per acquisition.
    Plain,
    /// A plain lock whose acquisition also raises fencing counters (its
    /// release and extension are the plain ones; the write-back is its
    /// own second phase).
    Fenced,
    /// Holds of one caller-chosen owner on a hash (`node::reentrant`).
    Reentrant,
}

/// One kind's scripts. Every acquire script takes `ARGV`: the owner (a
/// kind with one), the value, the TTL in milliseconds; release takes the
/// value; extend takes the value and the TTL.
pub(crate) struct Scripts {
    /// Takes the lock.
    pub(crate) acquire: Registered,
    /// [`acquire`](Self::acquire) behind the restart guard.
    pub(crate) guarded_acquire: Registered,
    /// Which replies of the acquire scripts are a grant.
    pub(crate) grant: Grant,
    /// Compare-and-delete.
    pub(crate) release: Registered,
    /// Whether [`release`](Self::release) takes the clean-up argument
    /// (`ARGV[2]`: mark the lock as awaited) and announces releases.
    pub(crate) announces: bool,
    /// Compare-and-pexpire.
    pub(crate) extend: Registered,
    /// [`extend`](Self::extend) that announces the restart guard's
    /// quarantine first.
    pub(crate) guarded_extend: Registered,
    /// Whether an extension may put the lock back on a node that lost it
    /// (the plain key is recreated; a hash of holds is only extended).
    pub(crate) reseeds: bool,
}

static PLAIN: Scripts = Scripts {
    acquire: entry("acquire_all", &ACQUIRE_ALL, Some(1)),
    guarded_acquire: entry("guarded_acquire_all", &GUARDED_ACQUIRE_ALL, Some(1)),
    grant: Grant::Int(1),
    release: entry("release", &RELEASE, None),
    announces: true,
    extend: entry("extend", &EXTEND, Some(1)),
    guarded_extend: entry("guarded_extend", &GUARDED_EXTEND, Some(1)),
    reseeds: true,
};

static FENCED: Scripts = Scripts {
    acquire: entry("fenced_acquire", &FENCED_ACQUIRE, Some(1)),
    guarded_acquire: entry("guarded_fenced_acquire", &GUARDED_FENCED_ACQUIRE, Some(1)),
    // The counters, or nil.
    grant: Grant::NotNil,
    ..PLAIN
};

static REENTRANT: Scripts = Scripts {
    acquire: entry("reentrant_acquire", &REENTRANT_ACQUIRE, Some(2)),
    guarded_acquire: entry(
        "guarded_reentrant_acquire",
        &GUARDED_REENTRANT_ACQUIRE,
        Some(2),
    ),
    grant: Grant::Int(1),
    release: entry("reentrant_release", &REENTRANT_RELEASE, None),
    announces: false,
    extend: entry("reentrant_extend", &REENTRANT_EXTEND, Some(1)),
    guarded_extend: entry(
        "guarded_reentrant_extend",
        &GUARDED_REENTRANT_EXTEND,
        Some(1),
    ),
    reseeds: false,
};

impl Kind {
    /// Every kind.
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) const ALL: [Kind; 3] = [Kind::Plain, Kind::Fenced, Kind::Reentrant];

    /// The kind an acquisition asked for: reentrant with an owner, else
    /// fenced with fencing on, else plain.
    pub(crate) fn chosen(owner: Option<&str>, fencing: bool) -> Kind {
        match (owner, fencing) {
            (Some(_), _) => Kind::Reentrant,
            (None, true) => Kind::Fenced,
            (None, false) => Kind::Plain,
        }
    }

    /// The kind whose release and extend scripts fit a held `value`: a
    /// reentrant hold id (it starts with the hold id mark), else plain (a
    /// fenced lock is released and extended as a plain one).
    pub(crate) fn of_value(value: &str) -> Kind {
        if value::is_hold_id(value) {
            Kind::Reentrant
        } else {
            Kind::Plain
        }
    }

    /// This kind's scripts.
    pub(crate) fn scripts(self) -> &'static Scripts {
        match self {
            Kind::Plain => &PLAIN,
            Kind::Fenced => &FENCED,
            Kind::Reentrant => &REENTRANT,
        }
    }

    /// A fresh value for one acquisition, carrying `label` where the kind
    /// keeps one (a reentrant hold id carries none: its owner names it).
    pub(crate) fn fresh_value(self, label: Option<&str>) -> String {
        match self {
            Kind::Reentrant => value::hold_id(),
            Kind::Plain | Kind::Fenced => value::fresh_labelled(label),
        }
    }
}

impl Scripts {
    /// The acquire scripts, plain and guarded.
    pub(crate) fn acquire(&self) -> (&'static Lua, &'static Lua) {
        (self.acquire.script, self.guarded_acquire.script)
    }

    /// The extend scripts, plain and guarded.
    pub(crate) fn extend(&self) -> (&'static Lua, &'static Lua) {
        (self.extend.script, self.guarded_extend.script)
    }

    /// Every script of this kind, as the registry lists them.
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn all(&'static self) -> [&'static Registered; 5] {
        [
            &self.acquire,
            &self.guarded_acquire,
            &self.release,
            &self.extend,
            &self.guarded_extend,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_value_picks_its_kinds_release_and_extend_scripts() {
        let id = Kind::Reentrant.fresh_value(Some("ignored"));
        let reentrant = Kind::of_value(&id).scripts();
        assert!(std::ptr::eq(reentrant.release.script, &REENTRANT_RELEASE));
        assert!(std::ptr::eq(reentrant.extend.script, &REENTRANT_EXTEND));
        for kind in [Kind::Plain, Kind::Fenced] {
            let value = kind.fresh_value(Some("worker"));
            assert_eq!(Kind::of_value(&value), Kind::Plain, "{value}");
            let plain = Kind::of_value(&value).scripts();
            assert!(std::ptr::eq(plain.release.script, &RELEASE));
            assert!(std::ptr::eq(plain.extend.script, &EXTEND));
        }
    }

    #[test]
    fn the_options_choose_the_kind_an_owner_first() {
        assert_eq!(Kind::chosen(None, false), Kind::Plain);
        assert_eq!(Kind::chosen(None, true), Kind::Fenced);
        assert_eq!(Kind::chosen(Some("job-7"), false), Kind::Reentrant);
        assert_eq!(Kind::chosen(Some("job-7"), true), Kind::Reentrant);
    }

    #[test]
    fn each_kinds_acquire_ttl_argument_follows_its_owner_and_value() {
        for kind in Kind::ALL {
            let scripts = kind.scripts();
            let ttl = if kind == Kind::Reentrant { 2 } else { 1 };
            assert_eq!(scripts.acquire.ttl_argv, Some(ttl), "{kind:?}");
            assert_eq!(scripts.guarded_acquire.ttl_argv, Some(ttl), "{kind:?}");
            assert_eq!(scripts.extend.ttl_argv, Some(1), "{kind:?}");
            assert_eq!(scripts.release.ttl_argv, None, "{kind:?}");
        }
    }
}
