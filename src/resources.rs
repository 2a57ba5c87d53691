//! [`Resources`]: what one lock covers, one resource or several taken
//! together, so that one call serves both.

/// What a lock covers: one resource (`&str`, `&String`) or several locked
/// together, all or none (a slice, an array, a reference to an array or
/// to a `Vec`, of `&str`, `String` or anything else that is
/// `AsRef<str>`). Several resources are taken
/// in one round per attempt, so two callers locking overlapping sets can
/// never each hold part of them; a name given twice counts once.
///
/// ```no_run
/// use std::time::Duration;
///
/// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
/// let ttl = Duration::from_secs(10);
/// let one = redlock.lock("account:1", ttl).await?;
/// one.release().await?;
/// let both = redlock.lock(&["account:1", "account:2"], ttl).await?;
/// assert_eq!(both.resources().len(), 2);
/// both.release().await?;
/// # Ok(()) }
/// ```
///
/// The trait is sealed: these are the only implementations.
pub trait Resources: sealed::Sealed {
    /// The resource names, in the order given.
    #[doc(hidden)]
    fn names(&self) -> Vec<&str>;
}

mod sealed {
    pub trait Sealed {}
}

impl sealed::Sealed for &str {}
impl Resources for &str {
    fn names(&self) -> Vec<&str> {
        vec![self]
    }
}

impl sealed::Sealed for &String {}
impl Resources for &String {
    fn names(&self) -> Vec<&str> {
        vec![self.as_str()]
    }
}

impl<S: AsRef<str>> sealed::Sealed for &[S] {}
impl<S: AsRef<str>> Resources for &[S] {
    fn names(&self) -> Vec<&str> {
        self.iter().map(AsRef::as_ref).collect()
    }
}

impl<S: AsRef<str>, const N: usize> sealed::Sealed for [S; N] {}
impl<S: AsRef<str>, const N: usize> Resources for [S; N] {
    fn names(&self) -> Vec<&str> {
        self.iter().map(AsRef::as_ref).collect()
    }
}

impl<S: AsRef<str>, const N: usize> sealed::Sealed for &[S; N] {}
impl<S: AsRef<str>, const N: usize> Resources for &[S; N] {
    fn names(&self) -> Vec<&str> {
        self.iter().map(AsRef::as_ref).collect()
    }
}

impl<S: AsRef<str>> sealed::Sealed for &Vec<S> {}
impl<S: AsRef<str>> Resources for &Vec<S> {
    fn names(&self) -> Vec<&str> {
        self.iter().map(AsRef::as_ref).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_gives_its_names_in_order() {
        let owned = vec!["a".to_owned(), "b".to_owned()];
        let refs = vec!["a", "b"];
        assert_eq!("a".names(), ["a"]);
        assert_eq!((&owned[0]).names(), ["a"]);
        assert_eq!((&refs[..]).names(), ["a", "b"]);
        assert_eq!(["a", "b"].names(), ["a", "b"]);
        assert_eq!(<&[&str; 2] as Resources>::names(&&["a", "b"]), ["a", "b"]);
        assert_eq!((&refs).names(), ["a", "b"]);
        assert_eq!((&owned[..]).names(), ["a", "b"]);
        assert_eq!((&owned).names(), ["a", "b"]);
    }
}
