//! The seccomp-bpf filter a traced child installs before `execve`: it stops
//! the child (`SECCOMP_RET_TRACE`) only at the calls that may be I/O
//! points, and lets every other call run at full speed.
//!
//! Built with rust-vmm's seccompiler (pure Rust, used by Firecracker), so
//! no libseccomp is needed; installed with two raw calls (`prctl`,
//! `seccomp`) between fork and exec, where nothing may allocate.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// A compiled filter.
pub(super) type Prog = BpfProgram;

/// The calls the filter stops at (x86_64 numbers).
pub(super) const TRACED: [i64; 33] = [
    libc::SYS_open,
    libc::SYS_creat,
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_write,
    libc::SYS_pwrite64,
    libc::SYS_writev,
    libc::SYS_pwritev,
    libc::SYS_pwritev2,
    libc::SYS_truncate,
    libc::SYS_ftruncate,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_unlink,
    libc::SYS_unlinkat,
    libc::SYS_mkdir,
    libc::SYS_mkdirat,
    libc::SYS_rmdir,
    libc::SYS_link,
    libc::SYS_linkat,
    libc::SYS_symlink,
    libc::SYS_symlinkat,
    libc::SYS_connect,
    libc::SYS_sendto,
    libc::SYS_sendmsg,
    // For the disk record of a power-cut sweep: barriers, a size change,
    // and what it cannot model (a writable shared mapping, io_uring).
    libc::SYS_fallocate,
    libc::SYS_sync,
    libc::SYS_syncfs,
    libc::SYS_mmap,
    libc::SYS_io_uring_setup,
];

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conds).map_err(|e| e.to_string())
}

/// The filter: the calls above stop the child (an `open` only when it may
/// create or truncate); the rest run. Writes to descriptors 0 to 2 stop
/// too: a shell's `echo x > file` writes the world through its standard
/// output.
pub(super) fn program() -> Result<BpfProgram, String> {
    let creates = |arg: u8| -> Result<Vec<SeccompRule>, String> {
        Ok(vec![
            rule(vec![cond(
                arg,
                SeccompCmpOp::MaskedEq(libc::O_CREAT as u64),
                libc::O_CREAT as u64,
            )?])?,
            rule(vec![cond(
                arg,
                SeccompCmpOp::MaskedEq(libc::O_TRUNC as u64),
                libc::O_TRUNC as u64,
            )?])?,
        ])
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in TRACED {
        let r = match nr {
            libc::SYS_open => creates(1)?,
            libc::SYS_openat => creates(2)?,
            // Only a writable shared mapping.
            libc::SYS_mmap => vec![rule(vec![
                cond(
                    2,
                    SeccompCmpOp::MaskedEq(libc::PROT_WRITE as u64),
                    libc::PROT_WRITE as u64,
                )?,
                cond(
                    3,
                    SeccompCmpOp::MaskedEq(libc::MAP_SHARED as u64),
                    libc::MAP_SHARED as u64,
                )?,
            ])?],
            _ => Vec::new(),
        };
        rules.insert(nr, r);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Trace(0),
        TargetArch::x86_64,
    )
    .map_err(|e| e.to_string())?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

/// `prog` as the kernel lays it out (8 bytes an instruction, native byte
/// order): what a fork request of point protocol 3 carries to the life
/// that installs it.
pub(super) fn bytes(prog: &BpfProgram) -> Vec<u8> {
    let mut out = Vec::with_capacity(prog.len() * 8);
    for i in prog {
        out.extend_from_slice(&i.code.to_ne_bytes());
        out.push(i.jt);
        out.push(i.jf);
        out.extend_from_slice(&i.k.to_ne_bytes());
    }
    out
}

/// Install `prog` on the calling thread: `PR_SET_NO_NEW_PRIVS`, then the
/// filter. Async-signal-safe (no allocation): for `pre_exec`.
pub(super) fn install(prog: &BpfProgram) -> std::io::Result<()> {
    // SAFETY: prctl with constant arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        // seccompiler's sock_filter has libc's layout (code, jt, jf, k).
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: the kernel copies the program from `fprog`, which outlives
    // the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles() {
        let p = program().unwrap();
        assert!(p.len() > TRACED.len(), "{} instructions", p.len());
        assert!(p.len() < 4096);
    }

    /// The bytes a fork request carries are the instructions as `libc`
    /// lays them out: read back as `sock_filter`s, they are the program.
    #[test]
    fn the_filter_s_bytes_are_its_instructions() {
        let p = program().unwrap();
        let b = bytes(&p);
        assert_eq!(b.len(), p.len() * 8);
        assert_eq!(std::mem::size_of::<libc::sock_filter>(), 8);
        for (raw, i) in b.chunks_exact(8).zip(&p) {
            // SAFETY: 8 bytes read as one plain-data sock_filter.
            let back: libc::sock_filter = unsafe { std::ptr::read_unaligned(raw.as_ptr().cast()) };
            assert_eq!(
                (back.code, back.jt, back.jf, back.k),
                (i.code, i.jt, i.jf, i.k)
            );
        }
    }
}
