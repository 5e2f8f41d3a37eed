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
    /// How this world was made: a hash of each life's number and how it
    /// ended (see `restart`), 0 for a fresh world.
    pub(super) lineage: u64,
    /// Whether its last life ran to its end (no crash killed it).
    pub(super) finished: bool,
    /// The service of this world, if the subject has one, killed when the
    /// world is dropped.
    pub(super) service: Option<service::Service>,
    /// The record of what the lives asked of the world's disk, when power
    /// cuts are swept (see `disk`).
    pub(super) disk: Option<std::sync::Arc<std::sync::Mutex<super::disk::DiskRecord>>>,
    /// How many disks the last power cut could leave (an enumerating
    /// state's count).
    pub(super) crash_disks: Option<u32>,
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

    /// Copy the world directory, the service's directory (if there is a
    /// service) and the logs into `to` as `world/`, `service/` and `logs/`
    /// (replacing any there).
    pub(super) fn keep(&self, to: &Path) -> std::io::Result<()> {
        let root = self.root.path();
        let mut parts = vec!["world", "logs"];
        if self.service.is_some() {
            parts.push("service");
        }
        for part in parts {
            let from = root.join(part);
            let into = to.join(part);
            // An artifacts directory used again: this run's copy replaces
            // the last one's.
            if into.exists() {
                std::fs::remove_dir_all(&into)?;
            }
            copy_tree(&from, &into)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", from.display())))?;
        }
        Ok(())
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

/// Whether `arg` holds `{service}`, which [`ProcessWorld::expand`]
/// replaces with each world's URL: a command a fork server starts once
/// cannot hold it.
pub(super) fn per_world(arg: &str) -> bool {
    arg.contains("{service}")
}

/// Copy a directory tree (files with their permissions, symbolic links as
/// links). Files are cloned (`FICLONE`: they share their blocks until one
/// is written) where the file system can, else copied. Never hard links: a
/// program may change a file in place.
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
            copy_file(&entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Copy one file: a clone where the file system has them, else its bytes.
fn copy_file(from: &Path, to: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::PermissionsExt;
        let src = std::fs::File::open(from)?;
        let mode = src.metadata()?.permissions().mode();
        let dst = std::fs::File::create(to)?;
        // SAFETY: ioctl(FICLONE) on two descriptors this function owns; it
        // reads no memory of ours.
        let cloned = unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) } == 0;
        if cloned {
            dst.set_permissions(std::fs::Permissions::from_mode(mode))?;
            return Ok(());
        }
        drop(dst);
    }
    std::fs::copy(from, to).map(|_| ())
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
