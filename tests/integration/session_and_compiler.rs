//! The scenario dylease exists for: a short-lived user finishing must not unload plugins a
//! long-lived user still holds.

use std::sync::atomic::{AtomicI32, Ordering};

use dylease::PluginHost;

use crate::support::{TestDir, assert_loaded, assert_unloaded};

type IntPass = extern "C" fn(i32) -> i32;
type SetCounter = extern "C" fn(*mut i32);

#[test]
fn single_op_users_come_and_go_while_the_session_keeps_its_passes() {
    let dir = TestDir::new("session_and_compiler");
    let lib = dir.add("arith", "libarith.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
    let unloads = AtomicI32::new(0);

    let session = host.acquire().unwrap();
    assert_eq!(session.generation(), 1);
    assert_eq!(session.plugins().len(), 1);
    assert_eq!(session.plugins()[0].name(), "arith");
    assert_eq!(session.plugins()[0].version(), "1.2.3");
    assert_eq!(session.plugins()[0].origin().path(), Some(lib.as_path()));
    // SAFETY: arith.c registers `set_unload_counter` as `void (*)(int *)`.
    let set_counter = unsafe { session.pass::<SetCounter>("set_unload_counter") }.unwrap();
    set_counter(unloads.as_ptr());
    assert_loaded(&lib);

    for i in 0..100 {
        let single_op = host.acquire().unwrap();
        assert!(dylease::Lease::ptr_eq(&session, &single_op), "a second set was loaded");
        // SAFETY: arith.c registers `double` as `int (*)(int)`; used while the lease lives.
        let double = unsafe { single_op.pass::<IntPass>("double") }.unwrap();
        assert_eq!(double(i), 2 * i);
        drop(single_op);

        // The single-op user is gone; the session's passes are untouched.
        assert_loaded(&lib);
        assert_eq!(host.generation(), 1, "the set was reloaded");
        assert_eq!(
            unloads.load(Ordering::SeqCst),
            0,
            "on_unload ran while the session held a lease"
        );
        // SAFETY: as above, under the session's lease.
        let add_one = unsafe { session.pass::<IntPass>("add_one") }.unwrap();
        assert_eq!(add_one(i), i + 1);
    }

    drop(session);
    assert_unloaded(&lib);
    assert_eq!(unloads.load(Ordering::SeqCst), 1, "on_unload must run exactly once");
    assert!(!host.is_loaded());
    assert_eq!(host.generation(), 1);
}

#[test]
fn an_owned_pass_keeps_its_library_loaded_after_the_original_lease_is_gone() {
    struct Compiler {
        double: dylease::OwnedPass<IntPass>,
    }

    let dir = TestDir::new("owned_pass");
    let lib = dir.add("arith", "libarith.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let lease = host.acquire().unwrap();
    let compiler = Compiler {
        // SAFETY: `double` is `int (*)(int)`.
        double: unsafe { lease.pass::<IntPass>("double") }.unwrap().to_owned_pass(),
    };
    drop(lease);

    assert_loaded(&lib);
    let double = compiler.double.clone();
    assert_eq!(std::thread::spawn(move || (*double)(5)).join().unwrap(), 10);
    assert_eq!(compiler.double.name(), "double");
    assert_eq!(compiler.double.info().plugin(), "arith");
    drop(compiler);
    assert_unloaded(&lib);
}

#[test]
fn a_weak_lease_observes_without_keeping_the_set_loaded() {
    let dir = TestDir::new("weak_lease");
    let lib = dir.add("arith", "libarith.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let lease = host.acquire().unwrap();
    let weak = lease.downgrade();
    assert!(dylease::Lease::ptr_eq(&weak.upgrade().unwrap(), &lease));
    drop(lease);
    assert_unloaded(&lib);
    assert!(weak.upgrade().is_none());
}
