//! Linux, the process's user and rights: its effective user (`geteuid`) and whether its
//! executable gave it elevated rights (`getauxval(AT_SECURE)`).

/// This process's effective user.
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether this process runs with elevated rights given by its executable (set-user-ID,
/// set-group-ID, file capabilities): the platform loader's `AT_SECURE`.
pub(crate) fn secure_execution() -> bool {
    // SAFETY: `getauxval` only reads the auxiliary vector the kernel gave the process.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}
