//! `include/dylease.h` from C++: a plugin whose passes come from two translation units.

use dylease::PluginHost;

use crate::support::{TestDir, assert_unloaded};

type IntPass = extern "C" fn(i32) -> i32;

#[test]
fn a_cpp_plugin_registers_passes_from_two_translation_units() {
    let dir = TestDir::new("cpp_multi");
    let lib = dir.add("cpp_multi", "libcpp_multi.so");
    let host = PluginHost::builder().file(&lib).build().unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins()[0].name(), "cpp-multi");
    let mut names: Vec<_> = lease.passes().iter().map(|p| p.name()).collect();
    names.sort_unstable();
    assert_eq!(names, ["add_offset", "negate", "square"]);

    // SAFETY: the plugin registers all three as `int (*)(int)`; used while `lease` lives.
    let (square, negate, add_offset) = unsafe {
        (
            lease.pass::<IntPass>("square").unwrap(),
            lease.pass::<IntPass>("negate").unwrap(),
            lease.pass::<IntPass>("add_offset").unwrap(),
        )
    };
    assert_eq!(square(7), 49);
    assert_eq!(negate(7), -7);
    assert_eq!(add_offset(7), 107);
    // The user data is the plugin's own `Offset`, whose first field is 100.
    // SAFETY: `add_offset` was registered with a pointer to a live `struct { int by; }`.
    assert_eq!(unsafe { *add_offset.user_data().cast::<i32>() }, 100);
    drop(lease);
    assert_unloaded(&lib);
}
