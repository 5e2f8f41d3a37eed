//! The world of a process subject: a scratch directory holding the
//! program's working directory (a fresh copy of the template), the lives'
//! logs and the world's service; and the directory trees it is copied from
//! and described by.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::service;

/// The world of a [`Process`](super::Process): a scratch directory holding the program's
/// working directory (a fresh copy of the template) and the logs of its
/// lives, removed when dropped.
#[derive(Debug)]
pub struct ProcessWorld {
    pub(super) lives: u32,
    /// Hits the programs of this world reported, over all lives.
    pub(super) hits: u64,
    pub(super) ends: Vec<String>,
    /// Each I/O point passed, with the thread or process after the first
    /// that made its call (`thread 2`), or `None` for the first.
    pub(super) makers: Vec<(String, Option<String>)>,
    /// The service of this world, if the subject has one, killed when the
    /// world is dropped.
    pub(super) service: Option<service::Service>,
    // Last: removed after the service is killed.
    pub(super) root: tempfile::TempDir,
}

impl ProcessWorld {
    /// The program's working directory.
    pub fn dir(&self) -> PathBuf {
        self.root.path().join("world")
    }

    pub(super) fn log(&self, life: u32, stream: &str) -> PathBuf {
        self.root.path().join(format!("logs/life-{life}.{stream}"))
    }

    /// How many lives have started on this world.
    pub fn lives(&self) -> u32 {
        self.lives
    }

    /// The logs of the lives: `life-N.out` and `life-N.err`, N from 1.
    pub fn logs(&self) -> PathBuf {
        self.root.path().join("logs")
    }

    /// The URL of this world's service, if the subject has one.
    pub fn service_url(&self) -> Option<&str> {
        self.service.as_ref().map(service::Service::url)
    }

    /// `arg` with `{service}` replaced by the service's URL.
    pub(super) fn expand(&self, arg: &OsStr) -> OsString {
        match (self.service_url(), arg.to_str()) {
            (Some(url), Some(s)) if s.contains("{service}") => {
                OsString::from(s.replace("{service}", url))
            }
            _ => arg.to_owned(),
        }
    }
}

/// Copy a directory tree (files with their permissions, symbolic links as
/// links).
pub(super) fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

pub(super) fn list_tree(dir: &Path, prefix: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let rel = prefix.join(e.file_name());
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            list_tree(&e.path(), &rel, out);
        } else {
            let len = e.metadata().map_or(0, |m| m.len());
            out.push(format!("{} ({len} B)", rel.display()));
        }
    }
}
