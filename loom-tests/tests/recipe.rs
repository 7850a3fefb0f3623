//! The crate docs' recipe "Model-checking your own code with loom", verbatim, so that it is
//! known to compile and pass (the doctest itself cannot run without `--cfg loom`).
#![cfg(loom)]

use dylease::PluginHost;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};

#[test]
fn two_users_share_one_load() {
    loom::model(|| {
        let loads = Arc::new(AtomicUsize::new(0));
        let counter = loads.clone();
        let host = Arc::new(
            PluginHost::builder()
                .static_plugin("p", move |_| {
                    counter.fetch_add(1, SeqCst);
                    Ok(())
                })
                .build()
                .unwrap(),
        );
        let other = {
            let host = host.clone();
            loom::thread::spawn(move || host.acquire().unwrap())
        };
        let mine = host.acquire().unwrap();
        let theirs = other.join().unwrap();
        assert!(dylease::Lease::ptr_eq(&mine, &theirs));
        assert_eq!(loads.load(SeqCst), 1);
    });
}
