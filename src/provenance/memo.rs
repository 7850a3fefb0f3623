//! The process's memo of the Ed25519 checks that passed: what `Keyring::remember_checks`
//! is given for every keyring a host requires (`HostBuilder::require_signed`).
//!
//! A check's answer is a pure function of the public key, the signature and the signed
//! message (a library's statement holds its image's length and digest, its name, version and
//! serial), and the memo knows a check by a SHA-256 digest of all of them
//! (`dylease_sign::CheckMemo`): no rewrite of a file can make a remembered answer wrong, because
//! the digest of the file's bytes is computed again at every load and compared with the
//! statement's. Only passed checks are remembered, the last [`CAPACITY`] of them, for the
//! whole process (every host and keyring: the answer does not depend on either).

use std::collections::{HashSet, VecDeque};

use dylease_sign::{CheckMemo, Keyring};

use crate::sync::Mutex;

/// How many passed checks are remembered: a plugin and its libraries need one each, so this
/// covers the directories of a few hosts; the oldest is forgotten first.
const CAPACITY: usize = 256;

/// The checks that passed, oldest first, and the same as a set.
type Passed = (VecDeque<[u8; 32]>, HashSet<[u8; 32]>);

/// The process's memo.
#[derive(Debug, Default)]
struct Memo {
    passed: Mutex<Passed>,
}

impl CheckMemo for Memo {
    fn passed(&self, check: &[u8; 32]) -> bool {
        self.passed.lock().1.contains(check)
    }

    fn remember(&self, check: [u8; 32]) {
        let mut passed = self.passed.lock();
        let (order, set) = &mut *passed;
        if !set.insert(check) {
            return;
        }
        order.push_back(check);
        if order.len() > CAPACITY
            && let Some(oldest) = order.pop_front()
        {
            set.remove(&oldest);
        }
    }
}

crate::sync::lazy_static! {
    /// The memo of this process. `dylease_sign` holds a memo by a `std::sync::Arc`, which is
    /// why this one is not the shim's (no loom model verifies signatures).
    static MEMO: std::sync::Arc<Memo> = std::sync::Arc::new(Memo::default());
}

/// Makes `keyring` remember its passed checks in the process's memo.
pub(crate) fn remember_checks(keyring: &mut Keyring) {
    keyring.remember_checks(MEMO.clone());
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_memo_forgets_the_oldest_check_past_its_capacity() {
        let memo = Memo::default();
        let check = |n: usize| {
            let mut check = [0; 32];
            check[..8].copy_from_slice(&(n as u64).to_le_bytes());
            check
        };
        for n in 0..=CAPACITY {
            memo.remember(check(n));
            memo.remember(check(n));
        }
        assert!(!memo.passed(&check(0)), "the oldest check outlived the capacity");
        assert!(memo.passed(&check(1)) && memo.passed(&check(CAPACITY)));
        assert_eq!(memo.passed.lock().0.len(), CAPACITY);
    }
}
