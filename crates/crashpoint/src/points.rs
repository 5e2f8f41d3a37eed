//! Every point compiled into the program, known at link time: a point that
//! no clean run passes (dead code, a feature not enabled, a branch the job
//! never takes) is swept by nobody, and this list is how a sweep can say so.
//!
//! Each `point!("literal")` also places a [`Site`] (its name, module, file
//! and line) in a [`linkme`] distributed slice; [`linked`] reads the slice
//! the linker assembled from every crate linked into the binary.
//!
//! Why `linkme` rather than `inventory`: a distributed slice is a static
//! array that the linker puts together, so nothing runs before `main` (no
//! constructors, which `inventory` relies on), nothing is allocated or
//! locked, and passing a point costs nothing more than before. It is only
//! compiled with the `enabled` feature: without it `point!` still compiles
//! to nothing, registers nothing, and [`linked`] is empty.
//!
//! Only points named by a literal are listed: a name computed at run time
//! (`point!(name)` with a variable or a constant) cannot be known at link
//! time. A crate's module that the linker drops as unused takes its points
//! with it.

/// One point as compiled: its name and where it is in the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Site {
    /// The module it is in (`module_path!()`), crate first.
    pub module: &'static str,
    /// The point's name.
    pub name: &'static str,
    /// The source file (`file!()`).
    pub file: &'static str,
    /// The line (`line!()`).
    pub line: u32,
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}:{})", self.name, self.file, self.line)
    }
}

#[cfg(feature = "enabled")]
#[doc(hidden)]
pub use linkme as __linkme;

/// The slice the linker assembles: one [`Site`] per `point!("literal")`.
#[cfg(feature = "enabled")]
#[doc(hidden)]
#[linkme::distributed_slice]
pub static __SITES: [Site];

/// Every point named by a literal in the crates linked into this program,
/// sorted by module, name and line, each place once; empty without the
/// `enabled` feature.
pub fn linked() -> Vec<Site> {
    #[cfg(feature = "enabled")]
    let mut sites: Vec<Site> = __SITES.to_vec();
    #[cfg(not(feature = "enabled"))]
    let mut sites: Vec<Site> = Vec::new();
    sites.sort();
    sites.dedup();
    sites
}

/// The points of [`linked`] that a run which passed `passed` (its
/// [`Handle::sites`](crate::scope::Handle::sites)) left out, in the
/// modules it went through: a module with one point passed is code the run
/// reached, and its other points are places no crash will land. Modules
/// none of whose points were passed are left out (another program's code
/// linked into the same binary, a test binary's other subjects).
pub fn never_passed(passed: &[&'static Site]) -> Vec<Site> {
    let reached: std::collections::BTreeSet<&str> = passed.iter().map(|s| s.module).collect();
    linked()
        .into_iter()
        .filter(|s| reached.contains(s.module) && !passed.iter().any(|p| **p == *s))
        .collect()
}
