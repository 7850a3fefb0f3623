//! Typed passes: `Lease::get` hands out a pass only under the interface it was registered
//! with, tells a missing, an untyped and an other-interface pass apart, and `passes_of` yields
//! passes in an order that link order does not change.

use std::ffi::c_void;

use dylease::{Error, Interface, LookupFailure, Origin, PluginHost, Registrar};

use crate::support::TestDir;

/// `int (*)(int)`, what the C fixtures register under "test.int_op/1".
struct IntOp;
// SAFETY: every pass the fixtures and static plugins of this module register under
// "test.int_op/1" is an `extern "C" fn(i32) -> i32` (`int (*)(int)`).
unsafe impl Interface for IntOp {
    const ID: &'static str = "test.int_op/1";
    type Fn = unsafe extern "C" fn(i32) -> i32;
}

/// An interface no pass of the fixtures is registered under with this name's passes.
struct OtherOp;
// SAFETY: as for `IntOp`; "test.other_op/1" is `int (*)(int)` too.
unsafe impl Interface for OtherOp {
    const ID: &'static str = "test.other_op/1";
    type Fn = unsafe extern "C" fn(i32) -> i32;
}

extern "C" fn static_half(x: i32) -> i32 {
    x / 2
}
extern "C" fn static_untyped(x: i32) -> i32 {
    x + 100
}

fn static_plugin(reg: &mut dylease::StaticRegistrar) -> Result<(), dylease::RegisterError> {
    reg.add_typed_pass::<IntOp>("half", static_half, std::ptr::null_mut())?;
    reg.add_typed_pass::<IntOp>("aardvark", static_half, std::ptr::null_mut())?;
    reg.add_pass(
        "static_untyped",
        static_untyped as extern "C" fn(i32) -> i32,
        std::ptr::null_mut(),
    )
}

fn host_over(fixture: &str, with_static: bool) -> (TestDir, PluginHost) {
    let dir = TestDir::new(&format!("typed-{fixture}"));
    let lib = dir.add(fixture, "libtyped.so");
    // SAFETY: the library is this suite's own fixture, whose initialisation code is sound.
    let mut builder = unsafe { PluginHost::builder().file(&lib) };
    if with_static {
        builder = builder.static_plugin("builtin", static_plugin);
    }
    (dir, builder.build().unwrap())
}

#[test]
fn get_returns_the_registered_function_of_each_typed_pass() {
    let (_dir, host) = host_over("typed_ab", true);
    let lease = host.acquire().unwrap();
    for (name, input, output) in [
        ("zeta", 4, 40),
        ("alpha", 4, 5),
        ("mid", 4, 12),
        ("Beta", 4, 16),
        ("half", 8, 4),
        ("aardvark", 10, 5),
    ] {
        let pass = lease.get::<IntOp>(name).unwrap();
        // SAFETY: the lease this pass came from is alive, and the fixture passes take any `i32`.
        assert_eq!(unsafe { pass(input) }, output, "pass {name}");
        assert_eq!(pass.name(), name);
        assert_eq!(pass.info().interface(), Some(IntOp::ID));
    }
    let negate = lease.get::<OtherOp>("negate").unwrap();
    // SAFETY: the lease this pass came from is alive, and the fixture passes take any `i32`.
    assert_eq!(unsafe { negate(5) }, -5);

    let beta = lease.get::<IntOp>("Beta").unwrap();
    // SAFETY: typed_b.c attaches a pointer to an `int` holding 7.
    assert_eq!(unsafe { *beta.user_data().cast::<i32>() }, 7);
    assert_eq!(
        lease.get::<IntOp>("zeta").unwrap().user_data(),
        std::ptr::null_mut::<c_void>()
    );

    let owned = lease.get::<IntOp>("mid").map(|pass| pass.to_owned_pass()).unwrap();
    drop(lease);
    assert!(host.is_loaded(), "the OwnedPass keeps its set loaded");
    // SAFETY: the owned pass carries a lease, and the fixture passes take any `i32`.
    assert_eq!(unsafe { owned(5) }, 15);
    drop(owned);
    assert!(!host.is_loaded());
}

#[test]
fn a_missing_an_untyped_and_an_other_interface_pass_are_distinct_errors() {
    let (dir, host) = host_over("typed_ab", true);
    let lease = host.acquire().unwrap();
    let lib = dir.path().join("libtyped.so");

    let missing = lease.get::<IntOp>("nowhere").unwrap_err();
    let Error::PassLookup {
        pass, expected, cause, ..
    } = &missing
    else {
        panic!("{missing:?}")
    };
    assert_eq!(
        (pass.as_str(), *expected, &**cause),
        ("nowhere", "test.int_op/1", &LookupFailure::Missing)
    );
    assert_eq!(missing.origin(), None);
    assert_eq!(
        missing.to_string(),
        "no plugin registered a pass `nowhere` (looked up as interface `test.int_op/1`)"
    );

    let untyped = lease.get::<IntOp>("untyped").unwrap_err();
    let Error::PassLookup { pass, cause, .. } = &untyped else {
        panic!("{untyped:?}")
    };
    assert_eq!(pass, "untyped");
    assert_eq!(
        **cause,
        LookupFailure::Untyped {
            plugin: Origin::File(lib.clone())
        }
    );
    let message = untyped.to_string();
    assert!(
        message.starts_with(&format!(
            "pass `untyped` of plugin file `{}` was registered without an interface, not as `test.int_op/1`",
            lib.display()
        )),
        "{message}"
    );

    let static_untyped = lease.get::<IntOp>("static_untyped").unwrap_err();
    assert_eq!(static_untyped.origin(), Some(Origin::Static("builtin".into())));

    let other = lease.get::<IntOp>("negate").unwrap_err();
    let Error::PassLookup {
        pass, expected, cause, ..
    } = &other
    else {
        panic!("{other:?}")
    };
    assert_eq!((pass.as_str(), *expected), ("negate", "test.int_op/1"));
    assert_eq!(
        **cause,
        LookupFailure::OtherInterface {
            registered: "test.other_op/1".into(),
            plugin: Origin::File(lib.clone()),
        }
    );
    assert_eq!(
        other.to_string(),
        format!(
            "pass `negate` of plugin file `{}` implements interface `test.other_op/1`, not the expected `test.int_op/1`",
            lib.display()
        )
    );
    // The other way round too: a pass of IntOp asked for as OtherOp.
    let reverse = lease.get::<OtherOp>("zeta").unwrap_err();
    assert!(
        reverse
            .to_string()
            .ends_with("implements interface `test.int_op/1`, not the expected `test.other_op/1`"),
        "{reverse}"
    );
    assert!(matches!(
        lease.get::<IntOp>("negate").map(|pass| pass.to_owned_pass()),
        Err(Error::PassLookup { .. })
    ));
}

/// (plugin, pass, result of calling it with 2) for every `IntOp` pass, in `passes_of` order.
fn int_ops(fixture: &str) -> (Vec<(String, String, i32)>, Vec<String>) {
    let (_dir, host) = host_over(fixture, true);
    let lease = host.acquire().unwrap();
    let ordered = lease
        .passes_of::<IntOp>()
        .unwrap()
        .map(|pass| {
            // SAFETY: as above: the lease is alive, and the passes take any `i32`.
            let value = unsafe { pass(2) };
            (pass.info().plugin().to_owned(), pass.name().to_owned(), value)
        })
        .collect();
    let registered = lease.passes().iter().map(|p| p.name().to_owned()).collect();
    (ordered, registered)
}

#[test]
fn passes_of_is_load_order_then_byte_order_whatever_the_link_order() {
    let (ab, registered_ab) = int_ops("typed_ab");
    let (ba, registered_ba) = int_ops("typed_ba");
    // The precondition that makes this test able to fail: the two link orders really do
    // register the passes in different orders.
    assert_ne!(registered_ab, registered_ba);

    let (_dir, host) = host_over("typed_ab", true);
    let lease = host.acquire().unwrap();
    let plugins: Vec<&str> = lease.plugins().iter().map(|p| p.name()).collect();
    let c_plugin = |pass: &str, value: i32| ("typed-two-units".to_owned(), pass.to_owned(), value);
    let builtin = |pass: &str, value: i32| ("builtin".to_owned(), pass.to_owned(), value);
    let (c_passes, static_passes) = (
        vec![
            c_plugin("Beta", 4),
            c_plugin("alpha", 3),
            c_plugin("mid", 6),
            c_plugin("zeta", 20),
        ],
        vec![builtin("aardvark", 1), builtin("half", 1)],
    );
    let expected: Vec<_> = match plugins.as_slice() {
        ["typed-two-units", "builtin"] => c_passes.into_iter().chain(static_passes).collect(),
        ["builtin", "typed-two-units"] => static_passes.into_iter().chain(c_passes).collect(),
        other => panic!("unexpected plugins {other:?}"),
    };
    assert_eq!(ab, expected);
    assert_eq!(ba, expected);
    assert_eq!(lease.passes_of::<IntOp>().unwrap().len(), 6);
    assert_eq!(
        lease
            .passes_of::<OtherOp>()
            .unwrap()
            .map(|p| p.name())
            .collect::<Vec<_>>(),
        ["negate"]
    );

    struct Unused;
    // SAFETY: no pass is registered under this id, so nothing is ever cast.
    unsafe impl Interface for Unused {
        const ID: &'static str = "test.unused/1";
        type Fn = unsafe fn();
    }
    assert_eq!(lease.passes_of::<Unused>().unwrap().count(), 0);
}
