//! [`Lease::call`], which calls a message pass in either kind of set, and what a set tells
//! of its worker.

use crate::error::{Error, LookupFailure};
use crate::host::Lease;
#[cfg(feature = "isolate")]
use crate::host::PluginSet;
use dylease_plugin::abi::DYLEASE_MESSAGE_INTERFACE;

impl Lease {
    /// Calls the message pass `pass` with `input` and returns its output: in an ordinary set
    /// directly, in an isolated set (`HostBuilder::isolated`, crate feature `isolate`: see
    /// [`docs::isolation`](crate::docs::isolation)) through the set's worker process. A message pass is registered under the interface
    /// `dylease.message/1` (`DYLEASE_MESSAGE_PASS` in C, [`MessagePass`](crate::MessagePass)
    /// in Rust); the same plugin file serves both kinds of set.
    ///
    /// Safe: a pass registered under `dylease.message/1` has the message signature (the
    /// interface's promise), and the lease keeps its plugin loaded during the call. Any number
    /// of threads may call passes of one lease at once; in an isolated set the worker runs up
    /// to four calls at a time and queues the others.
    ///
    /// # Errors
    ///
    /// - [`Error::PassLookup`] if no plugin registered `pass`, or registered it as another kind
    ///   of pass than a message pass.
    /// - [`Error::PassFailed`] if the pass returned a non-zero status (its own).
    /// - [`Error::CallRefused`] if the call could not be made: in an isolated set, an input or
    ///   an output larger than 256 MiB (above 64 KiB they travel in a sealed shared region).
    /// - [`Error::WorkerFailed`] in an isolated set whose worker died (a signal, an exit), broke
    ///   the channel's protocol or was killed at the call deadline
    ///   (`HostBuilder::call_deadline`), during this call or before it: the set stays failed;
    ///   its other leases get the same error, and once the last of them is dropped, the next
    ///   `acquire()` starts a fresh worker.
    /// - In an on-demand set, the errors of mapping the pass's plugin ([`Lease::get`]'s).
    ///
    /// # Example
    ///
    /// ```
    /// use std::ffi::c_void;
    /// use dylease::{MessagePass, Registrar};
    /// use dylease::abi::dylease_out;
    ///
    /// unsafe extern "C" fn upper(input: *const u8, len: usize, out: *mut dylease_out, _: *mut c_void) -> i32 {
    ///     // SAFETY: the host hands `len` readable bytes at `input`.
    ///     let input = unsafe { std::slice::from_raw_parts(input, len) };
    ///     // SAFETY: `out` is this call's output.
    ///     if unsafe { dylease_out::append(out, &input.to_ascii_uppercase()) } { 0 } else { 1 }
    /// }
    ///
    /// let host = dylease::PluginHost::builder()
    ///     .static_plugin("text", |reg| reg.add_typed_pass::<MessagePass>("upper", upper, std::ptr::null_mut()))
    ///     .build()?;
    /// let lease = host.acquire()?;
    /// assert_eq!(lease.call("upper", b"shout")?, b"SHOUT");
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub fn call(&self, pass: &str, input: &[u8]) -> Result<Vec<u8>, Error> {
        let lookup = |cause| Error::PassLookup {
            pass: pass.to_owned(),
            expected: DYLEASE_MESSAGE_INTERFACE,
            cause: Box::new(cause),
        };
        let index = self.pass_position(pass).ok_or_else(|| lookup(LookupFailure::Missing))?;
        let info = &self.passes()[index];
        let plugin = || self.plugins()[info.plugin_index()].origin().clone();
        match info.interface() {
            Some(DYLEASE_MESSAGE_INTERFACE) if !info.is_python() => {}
            Some(registered) if info.is_python() => {
                return Err(lookup(LookupFailure::OtherKind {
                    registered: registered.to_owned(),
                    python: true,
                    plugin: plugin(),
                }));
            }
            Some(registered) => {
                return Err(lookup(LookupFailure::OtherInterface {
                    registered: registered.to_owned(),
                    plugin: plugin(),
                }));
            }
            None => return Err(lookup(LookupFailure::Untyped { plugin: plugin() })),
        }
        #[cfg(feature = "isolate")]
        if let Some(isolated) = self.isolated()
            && isolated.hosts(info.plugin_index())
        {
            return isolated.call(&plugin(), pass, input);
        }
        self.callable(index)?;
        let called =
            crate::isolate::call_message_pass(info, input, usize::MAX, &mut []).ok_or_else(|| Error::CallRefused {
                plugin: plugin(),
                pass: pass.to_owned(),
                reason: "it is not mapped".to_owned(),
            })?;
        match called.status {
            0 => Ok(called.output),
            status => Err(Error::PassFailed {
                plugin: plugin(),
                pass: pass.to_owned(),
                status,
            }),
        }
    }
}

#[cfg(feature = "isolate")]
impl PluginSet {
    /// The process id of the worker that holds this set's plugins, in an isolated set
    /// ([`HostBuilder::isolated`](crate::HostBuilder::isolated)) with at least one library
    /// plugin; `None` otherwise. The worker lives exactly as long as the set: it exits (and is
    /// reaped) when the set's last lease is dropped, or earlier if it fails. (Crate feature
    /// `isolate`.)
    pub fn worker_pid(&self) -> Option<u32> {
        self.isolated().map(|isolated| isolated.pid())
    }
}
