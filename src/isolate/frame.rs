//! The frames of an isolated set's channel, and the payloads they carry: encoded by one side,
//! decoded by the other, every length checked.
//!
//! One frame is one message of the `SOCK_SEQPACKET` socket (the socket keeps message
//! boundaries): a header of 16 bytes, little-endian, then the payload.
//!
//! ```text
//! kind: u32   what the frame is (`Kind`)
//! len:  u32   the payload's length: exactly the bytes after the header, at most MAX_PAYLOAD
//! id:   u64   the request it opens or answers (0 for the handshake)
//! ```
//!
//! The host decodes every byte from the worker as hostile input: a frame that does not
//! decode, a kind it did not expect, an answer to a request it never made, is the worker's
//! fault, and the worker is killed (`isolate::remote`). Nothing here panics or reads out of
//! bounds on any input (the module's tests feed it random and mutated frames).

use std::path::PathBuf;

/// The bytes of a frame's header.
/// The threads a worker runs calls on, so the most calls in flight at once it answers: a pass
/// that runs long keeps one of them, the others serve other calls meanwhile (the host keeps as
/// many input regions per worker).
pub(crate) const THREADS: usize = 4;

pub(crate) const HEADER: usize = 16;

/// The most payload one frame carries: a call's input or output larger than this travels in a
/// sealed shared region beside its frame (`CallShared`, `ReplyShared`).
pub(crate) const MAX_PAYLOAD: usize = 64 * 1024;

/// The most bytes a call's input, or its output, carries in a shared region: a larger one is
/// refused (the reader allocates what a region announces, so it is bounded).
pub(crate) const MAX_MESSAGE: usize = 256 << 20;

/// The largest frame.
pub(crate) const MAX_FRAME: usize = HEADER + MAX_PAYLOAD;

/// The version of this protocol, exchanged in the handshake: a worker of another build of
/// dylease (an operator's `worker_command`) is refused.
pub(crate) const PROTOCOL: u32 = 4;

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Host to worker, first: the protocol version and the host's process id.
    Hello,
    /// Host to worker, with the file's descriptor and its directory's (a sealed copy's alone):
    /// hold this checked library, which the next `Map`'s plugin needs ([`DependRequest`]).
    Depend,
    /// Host to worker, with one descriptor (two with its directory's): map this checked plugin
    /// file, after the libraries of the `Depend` frames since the last `Map` ([`MapRequest`]).
    Map,
    /// Host to worker: call a message pass ([`Call`]).
    Call,
    /// Host to worker, with one descriptor (two with an output region): call a message pass
    /// whose input is the start of the sealed region of the first ([`SharedCall`]).
    CallShared,
    /// Host to worker: run the unload hooks and exit.
    Unload,
    /// Host to worker, after it saw a `Depend` or `Map` fail: take the next ones again (the
    /// worker answers each after a failure with `Skipped` until then). Not answered.
    Resume,
    /// Worker to host, answering `Hello`: the protocol version and the worker's process id.
    Welcome,
    /// Worker to host, answering `Depend`: the library is held for the next `Map`.
    Held,
    /// Worker to host, answering `Map`: what the plugin registered ([`Mapped`]).
    Mapped,
    /// Worker to host, answering `Map` or `Depend`: why the plugin failed ([`MapFailure`]).
    MapFailed,
    /// Worker to host, answering `Map` or `Depend` after one failed (until `Resume`): not
    /// done, so that no plugin sent after a failed one runs before the host has seen the
    /// failure. No payload.
    Skipped,
    /// Worker to host, answering `Call`: the pass's status and output ([`Reply`]).
    Reply,
    /// Worker to host, answering `Call`: why the worker could not make the call (a UTF-8
    /// reason).
    CallFailed,
    /// Worker to host, with one descriptor, answering `Call`: the pass's status, and its
    /// output in the region of that descriptor ([`SharedReply`]); with none, answering a
    /// `CallShared` that brought an output region: the output is at that region's start.
    ReplyShared,
}

impl Kind {
    const ALL: [(Kind, u32); 15] = [
        (Kind::Hello, 1),
        (Kind::Map, 2),
        (Kind::Call, 3),
        (Kind::Unload, 4),
        (Kind::Depend, 5),
        (Kind::CallShared, 6),
        (Kind::Resume, 7),
        (Kind::Welcome, 101),
        (Kind::Mapped, 102),
        (Kind::MapFailed, 103),
        (Kind::Reply, 104),
        (Kind::CallFailed, 105),
        (Kind::Held, 106),
        (Kind::ReplyShared, 107),
        (Kind::Skipped, 108),
    ];

    fn code(self) -> u32 {
        Kind::ALL
            .iter()
            .find(|(kind, _)| *kind == self)
            .map_or(0, |&(_, code)| code)
    }

    fn of(code: u32) -> Option<Kind> {
        Kind::ALL.iter().find(|&&(_, c)| c == code).map(|&(kind, _)| kind)
    }
}

/// A decoded frame, borrowing its payload from the bytes received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame<'a> {
    pub(crate) kind: Kind,
    pub(crate) id: u64,
    pub(crate) payload: &'a [u8],
}

/// The frame of `kind` and `id` carrying `payload`; `Err` with the payload's length if it is
/// longer than [`MAX_PAYLOAD`].
pub(crate) fn encode(kind: Kind, id: u64, payload: &[u8]) -> Result<Vec<u8>, usize> {
    if payload.len() > MAX_PAYLOAD {
        return Err(payload.len());
    }
    let mut frame = Vec::with_capacity(HEADER + payload.len());
    frame.extend_from_slice(&kind.code().to_le_bytes());
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    frame.extend_from_slice(&id.to_le_bytes());
    frame.extend_from_slice(payload);
    Ok(frame)
}

/// Decodes one received message: `Err` with what is wrong with it.
pub(crate) fn decode(bytes: &[u8]) -> Result<Frame<'_>, String> {
    let (header, payload) = bytes
        .split_at_checked(HEADER)
        .ok_or_else(|| format!("a message of {} bytes, shorter than a frame header", bytes.len()))?;
    let mut header = Reader(header);
    let code = header.u32()?;
    let len = header.u32()? as usize;
    let id = header.u64()?;
    let kind = Kind::of(code).ok_or_else(|| format!("a frame of unknown kind {code}"))?;
    if len > MAX_PAYLOAD {
        return Err(format!(
            "a frame announcing {len} bytes of payload, more than {MAX_PAYLOAD}"
        ));
    }
    if len != payload.len() {
        return Err(format!(
            "a frame announcing {len} bytes of payload that carries {}",
            payload.len()
        ));
    }
    Ok(Frame { kind, id, payload })
}

/// Builds a payload: integers little-endian, byte strings prefixed by their `u32` length.
#[derive(Debug, Default)]
pub(crate) struct Writer(pub(crate) Vec<u8>);

impl Writer {
    pub(crate) fn u32(&mut self, value: u32) -> &mut Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub(crate) fn i32(&mut self, value: i32) -> &mut Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub(crate) fn u64(&mut self, value: u64) -> &mut Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// A byte string, prefixed by its length (strings here are names and messages, far
    /// shorter than `u32::MAX`; a longer one is cut at it).
    pub(crate) fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        let bytes = &bytes[..bytes.len().min(u32::MAX as usize)];
        self.u32(bytes.len() as u32);
        self.0.extend_from_slice(bytes);
        self
    }

    pub(crate) fn str(&mut self, text: &str) -> &mut Self {
        self.bytes(text.as_bytes())
    }

    /// The rest of the payload, unprefixed.
    pub(crate) fn rest(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.extend_from_slice(bytes);
        self
    }
}

/// Reads a payload written by a [`Writer`]; every read checks that the bytes are there.
#[derive(Debug)]
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let (taken, rest) = self
            .0
            .split_at_checked(n)
            .ok_or_else(|| format!("a payload cut short: {n} bytes expected, {} left", self.0.len()))?;
        self.0 = rest;
        Ok(taken)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, String> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes(bytes.try_into().map_err(|_| "a short integer")?))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, String> {
        self.u32().map(|value| value as i32)
    }

    pub(crate) fn u64(&mut self) -> Result<u64, String> {
        let bytes = self.take(8)?;
        Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| "a short integer")?))
    }

    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    pub(crate) fn str(&mut self) -> Result<&'a str, String> {
        std::str::from_utf8(self.bytes()?).map_err(|_| "a string that is not UTF-8".to_owned())
    }

    /// Whatever is left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.0)
    }

    /// `Ok` if nothing is left.
    pub(crate) fn end(&self) -> Result<(), String> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(format!("{n} bytes left over after the payload")),
        }
    }
}

/// A `Map` request: the checked plugin file (its descriptor travels beside the frame, and,
/// when `origin`, its directory's after it; when `sealed`, the descriptor is the sealed copy
/// a host that requires signatures verified) and what the worker needs to map it as the host
/// would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MapRequest {
    /// The path as discovered: what errors name.
    pub(crate) shown: PathBuf,
    /// Where it was found, symlinks resolved (for the loader's messages).
    pub(crate) resolved: PathBuf,
    /// The identity the host read from the descriptor: the one received must have it (unless
    /// `sealed`).
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    /// Whether the host's trust check is on.
    pub(crate) strict: bool,
    /// Whether its run paths or needed names use `$ORIGIN`: the loader is then given it by
    /// its name in its directory, whose descriptor comes second. Never with `sealed`.
    pub(crate) origin: bool,
    /// Whether the descriptor is a sealed copy of the file of identity (`dev`, `ino`), which
    /// the host verified (`HostBuilder::require_signed`): the worker checks its seals instead
    /// of its identity, and the loader is given the copy itself (it is in no directory).
    pub(crate) sealed: bool,
    /// How many of the libraries of the last `Depend` frames it needs (the last ones sent);
    /// any sent before them are left (those of a plugin whose load failed).
    pub(crate) dependencies: u32,
    /// Its loadable segments, as the ELF check read them.
    pub(crate) loads: Vec<std::ops::Range<u64>>,
}

/// Writes `loads`: their count, then each range.
fn write_loads(w: &mut Writer, loads: &[std::ops::Range<u64>]) {
    w.u32(loads.len() as u32);
    for load in loads {
        w.u64(load.start).u64(load.end);
    }
}

/// Reads what [`write_loads`] wrote.
fn read_loads(r: &mut Reader<'_>) -> Result<Vec<std::ops::Range<u64>>, String> {
    let count = r.u32()? as usize;
    // Each range takes 16 bytes: a count the payload cannot hold is refused before any
    // allocation.
    if count > r.0.len() / 16 {
        return Err(format!("{count} segments announced in a payload too short for them"));
    }
    let mut loads = Vec::with_capacity(count);
    for _ in 0..count {
        loads.push(r.u64()?..r.u64()?);
    }
    Ok(loads)
}

impl MapRequest {
    pub(crate) fn encode(&self) -> Vec<u8> {
        use std::os::unix::ffi::OsStrExt;
        let mut w = Writer::default();
        w.bytes(self.shown.as_os_str().as_bytes())
            .bytes(self.resolved.as_os_str().as_bytes())
            .u64(self.dev)
            .u64(self.ino)
            .u32(self.strict.into())
            .u32(self.origin.into())
            .u32(self.sealed.into())
            .u32(self.dependencies);
        write_loads(&mut w, &self.loads);
        w.0
    }

    pub(crate) fn decode(payload: &[u8]) -> Result<MapRequest, String> {
        use std::os::unix::ffi::OsStrExt;
        let mut r = Reader(payload);
        let shown = PathBuf::from(std::ffi::OsStr::from_bytes(r.bytes()?));
        let resolved = PathBuf::from(std::ffi::OsStr::from_bytes(r.bytes()?));
        let (dev, ino, strict, origin) = (r.u64()?, r.u64()?, r.u32()? != 0, r.u32()? != 0);
        let (sealed, dependencies) = (r.u32()? != 0, r.u32()?);
        let loads = read_loads(&mut r)?;
        r.end()?;
        Ok(MapRequest {
            shown,
            resolved,
            dev,
            ino,
            strict,
            origin,
            sealed,
            dependencies,
            loads,
        })
    }
}

/// A `Depend` request: a library the next plugin needs, found in a run path and checked by
/// the host (its descriptor travels beside the frame, its directory's after it), which the
/// worker maps before that plugin, as the host maps it (`registry::opener`): by its name in
/// its directory, so that `$ORIGIN` is that directory; or, when `sealed`, the sealed copy a
/// host that requires signatures verified, alone, given to the loader as itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DependRequest {
    /// Where the host found it: its directory and its name there (for messages, and the name
    /// the worker gives the loader in the directory received).
    pub(crate) found: PathBuf,
    /// The identity the host read from the descriptor: the one received must have it (unless
    /// `sealed`).
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    /// Whether the descriptor is a sealed copy of that file (see [`MapRequest::sealed`]).
    pub(crate) sealed: bool,
    /// Its loadable segments, as the ELF check read them.
    pub(crate) loads: Vec<std::ops::Range<u64>>,
}

impl DependRequest {
    pub(crate) fn encode(&self) -> Vec<u8> {
        use std::os::unix::ffi::OsStrExt;
        let mut w = Writer::default();
        w.bytes(self.found.as_os_str().as_bytes())
            .u64(self.dev)
            .u64(self.ino)
            .u32(self.sealed.into());
        write_loads(&mut w, &self.loads);
        w.0
    }

    pub(crate) fn decode(payload: &[u8]) -> Result<DependRequest, String> {
        use std::os::unix::ffi::OsStrExt;
        let mut r = Reader(payload);
        let found = PathBuf::from(std::ffi::OsStr::from_bytes(r.bytes()?));
        let (dev, ino, sealed) = (r.u64()?, r.u64()?, r.u32()? != 0);
        let loads = read_loads(&mut r)?;
        r.end()?;
        Ok(DependRequest {
            found,
            dev,
            ino,
            sealed,
            loads,
        })
    }
}

/// A `Mapped` answer: the plugin's descriptor name and version and what it registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mapped {
    pub(crate) name: String,
    pub(crate) version: String,
    /// Each pass: its name and interface (`None`: untyped).
    pub(crate) passes: Vec<(String, Option<String>)>,
}

impl Mapped {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.str(&self.name).str(&self.version).u32(self.passes.len() as u32);
        for (name, interface) in &self.passes {
            w.str(name)
                .u32(interface.is_some().into())
                .str(interface.as_deref().unwrap_or(""));
        }
        w.0
    }

    pub(crate) fn decode(payload: &[u8]) -> Result<Mapped, String> {
        let mut r = Reader(payload);
        let (name, version) = (r.str()?.to_owned(), r.str()?.to_owned());
        let count = r.u32()? as usize;
        // Each pass takes at least 12 bytes.
        if count > r.0.len() / 12 {
            return Err(format!("{count} passes announced in a payload too short for them"));
        }
        let mut passes = Vec::with_capacity(count);
        for _ in 0..count {
            let name = r.str()?.to_owned();
            let typed = r.u32()? != 0;
            let interface = r.str()?;
            passes.push((name, typed.then(|| interface.to_owned())));
        }
        r.end()?;
        Ok(Mapped { name, version, passes })
    }
}

/// A `MapFailed` answer: which of the load errors it was and its fields, so that the host
/// reports the failure of an isolated plugin as it reports an in-process one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MapFailure {
    /// Which error (`isolate::remote` keeps the table).
    pub(crate) tag: u32,
    /// A code (`on_load`'s result) or a version (an ABI mismatch).
    pub(crate) number: i32,
    /// The error's own text, or its reason field.
    pub(crate) reason: String,
    /// A pass name, for a refused pass.
    pub(crate) pass: String,
}

impl MapFailure {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(self.tag).i32(self.number).str(&self.reason).str(&self.pass);
        w.0
    }

    pub(crate) fn decode(payload: &[u8]) -> Result<MapFailure, String> {
        let mut r = Reader(payload);
        let failure = MapFailure {
            tag: r.u32()?,
            number: r.i32()?,
            reason: r.str()?.to_owned(),
            pass: r.str()?.to_owned(),
        };
        r.end()?;
        Ok(failure)
    }
}

/// A `Call` request: the pass and its input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Call<'a> {
    pub(crate) pass: &'a str,
    pub(crate) input: &'a [u8],
}

impl<'a> Call<'a> {
    /// The length of the payload [`encode`](Call::encode) would make of `pass` and `input`.
    pub(crate) fn encoded_len(pass: &str, input: &[u8]) -> usize {
        4 + pass.len().min(u32::MAX as usize) + input.len()
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(8 + self.pass.len() + self.input.len()));
        w.str(self.pass).rest(self.input);
        w.0
    }

    pub(crate) fn decode(payload: &'a [u8]) -> Result<Call<'a>, String> {
        let mut r = Reader(payload);
        let pass = r.str()?;
        Ok(Call { pass, input: r.rest() })
    }
}

/// A `Reply`: the pass's status and its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply<'a> {
    pub(crate) status: i32,
    pub(crate) output: &'a [u8],
}

impl<'a> Reply<'a> {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(4 + self.output.len()));
        w.i32(self.status).rest(self.output);
        w.0
    }

    pub(crate) fn decode(payload: &'a [u8]) -> Result<Reply<'a>, String> {
        let mut r = Reader(payload);
        let status = r.i32()?;
        Ok(Reply {
            status,
            output: r.rest(),
        })
    }
}

/// A `CallShared` request: the pass, the length of its input, which is the first `len` bytes
/// of the region that travels beside the frame (a region the host reuses holds more: its
/// capacity), and the host's number for that region; and the host's number for the output
/// region that travels as the second descriptor, if one does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SharedCall<'a> {
    pub(crate) pass: &'a str,
    pub(crate) len: u64,
    /// The host's number for a region it reuses, the same for every call it carries and
    /// never given to another region of the worker's (the worker may keep its mapping of it
    /// for the calls to come); 0 for a region of this call alone.
    pub(crate) region: u64,
    /// The host's number for a writable region (sealed against a change of size) that
    /// travels beside the input's, for an output too large for a frame that fits it; never
    /// given to another region, so the worker may keep its mapping. 0: none travels.
    pub(crate) output: u64,
}

impl<'a> SharedCall<'a> {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.str(self.pass).u64(self.len).u64(self.region).u64(self.output);
        w.0
    }

    pub(crate) fn decode(payload: &'a [u8]) -> Result<SharedCall<'a>, String> {
        let mut r = Reader(payload);
        let call = SharedCall {
            pass: r.str()?,
            len: r.u64()?,
            region: r.u64()?,
            output: r.u64()?,
        };
        r.end()?;
        Ok(call)
    }
}

/// A `ReplyShared`: the pass's status, and the length of its output, which is the whole of
/// the region that travels beside the frame, or, when none does, the start of the output
/// region of the call it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SharedReply {
    pub(crate) status: i32,
    pub(crate) len: u64,
}

impl SharedReply {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.i32(self.status).u64(self.len);
        w.0
    }

    pub(crate) fn decode(payload: &[u8]) -> Result<SharedReply, String> {
        let mut r = Reader(payload);
        let reply = SharedReply {
            status: r.i32()?,
            len: r.u64()?,
        };
        r.end()?;
        Ok(reply)
    }
}

/// The `Hello` and `Welcome` payloads: the protocol version and the sender's process id.
pub(crate) fn greeting(pid: u32) -> Vec<u8> {
    let mut w = Writer::default();
    w.u32(PROTOCOL).u32(pid);
    w.0
}

/// The protocol version and process id of a greeting.
pub(crate) fn read_greeting(payload: &[u8]) -> Result<(u32, u32), String> {
    let mut r = Reader(payload);
    let greeting = (r.u32()?, r.u32()?);
    r.end()?;
    Ok(greeting)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift64*): the same cases on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }

        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
    }

    /// Every payload decoder, on `bytes`: none may panic, whatever they are.
    fn decode_all(bytes: &[u8]) {
        if let Ok(frame) = decode(bytes) {
            // What a frame borrows lies inside what was received.
            let inside = bytes.as_ptr_range();
            let payload = frame.payload.as_ptr_range();
            assert!(inside.start <= payload.start && payload.end <= inside.end);
            assert_eq!(frame.payload.len() + HEADER, bytes.len());
        }
        let payload = bytes.get(HEADER..).unwrap_or(bytes);
        let _ = MapRequest::decode(payload);
        let _ = DependRequest::decode(payload);
        let _ = Mapped::decode(payload);
        let _ = MapFailure::decode(payload);
        let _ = Call::decode(payload);
        let _ = Reply::decode(payload);
        let _ = SharedCall::decode(payload);
        let _ = SharedReply::decode(payload);
        let _ = read_greeting(payload);
    }

    /// Valid frames of every kind, to mutate.
    fn valid_frames() -> Vec<Vec<u8>> {
        let request = MapRequest {
            shown: "/opt/plugins/libx.so".into(),
            resolved: "/opt/plugins/libx.so".into(),
            dev: 7,
            ino: 42,
            strict: true,
            origin: true,
            sealed: false,
            dependencies: 1,
            loads: vec![0..4096, 4096..8192],
        };
        let depend = DependRequest {
            found: "/opt/plugins/lib/libdep.so".into(),
            dev: 7,
            ino: 43,
            sealed: true,
            loads: vec![0..4096, 8192..9000],
        };
        let mapped = Mapped {
            name: "x".into(),
            version: "1".into(),
            passes: vec![("a".into(), None), ("b".into(), Some("dylease.message/1".into()))],
        };
        let failure = MapFailure {
            tag: 3,
            number: -3,
            reason: "on_load".into(),
            pass: String::new(),
        };
        let call = Call {
            pass: "echo",
            input: b"hello",
        };
        let reply = Reply {
            status: 0,
            output: b"olleh",
        };
        vec![
            encode(Kind::Hello, 0, &greeting(1)).unwrap(),
            encode(Kind::Map, 1, &request.encode()).unwrap(),
            encode(Kind::Depend, 6, &depend.encode()).unwrap(),
            encode(Kind::Held, 6, &[]).unwrap(),
            encode(Kind::Skipped, 8, &[]).unwrap(),
            encode(Kind::Resume, 0, &[]).unwrap(),
            encode(Kind::Mapped, 1, &mapped.encode()).unwrap(),
            encode(Kind::MapFailed, 2, &failure.encode()).unwrap(),
            encode(Kind::Call, 3, &call.encode()).unwrap(),
            encode(Kind::Reply, 3, &reply.encode()).unwrap(),
            encode(Kind::CallFailed, 4, b"no such pass").unwrap(),
            encode(
                Kind::CallShared,
                7,
                &SharedCall {
                    pass: "echo",
                    len: 1 << 20,
                    region: 2,
                    output: 3,
                }
                .encode(),
            )
            .unwrap(),
            encode(
                Kind::ReplyShared,
                7,
                &SharedReply {
                    status: 0,
                    len: 1 << 20,
                }
                .encode(),
            )
            .unwrap(),
            encode(Kind::Unload, 5, &[]).unwrap(),
        ]
    }

    #[test]
    fn every_payload_decodes_to_what_was_encoded() {
        let request = MapRequest {
            shown: "plugins/libx.so".into(),
            resolved: "/abs/plugins/libx.so".into(),
            dev: u64::MAX,
            ino: 1,
            strict: false,
            origin: false,
            sealed: true,
            dependencies: u32::MAX,
            loads: vec![0..1, 2..3],
        };
        assert_eq!(MapRequest::decode(&request.encode()), Ok(request));
        let depend = DependRequest {
            found: "/abs/plugins/lib/libdep.so".into(),
            dev: 3,
            ino: u64::MAX,
            sealed: false,
            loads: vec![],
        };
        assert_eq!(DependRequest::decode(&depend.encode()), Ok(depend));
        let mapped = Mapped {
            name: "n".into(),
            version: String::new(),
            passes: vec![("p".into(), Some(String::new())), ("q".into(), None)],
        };
        assert_eq!(Mapped::decode(&mapped.encode()), Ok(mapped));
        let call = Call {
            pass: "p",
            input: &[0, 1, 2],
        };
        assert_eq!(Call::encoded_len(call.pass, call.input), call.encode().len());
        assert_eq!(Call::decode(&call.encode()), Ok(call));
        let reply = Reply {
            status: -5,
            output: &[],
        };
        assert_eq!(Reply::decode(&reply.encode()), Ok(reply));
        let call = SharedCall {
            pass: "p",
            len: u64::MAX,
            region: u64::MAX - 1,
            output: u64::MAX - 2,
        };
        assert_eq!(SharedCall::decode(&call.encode()), Ok(call));
        let reply = SharedReply { status: -1, len: 7 };
        assert_eq!(SharedReply::decode(&reply.encode()), Ok(reply));
        let failure = MapFailure {
            tag: 4,
            number: -2,
            reason: "the reason".into(),
            pass: "p".into(),
        };
        assert_eq!(MapFailure::decode(&failure.encode()), Ok(failure.clone()));
        assert_eq!(read_greeting(&greeting(4242)), Ok((PROTOCOL, 4242)));
        // Bytes left over after the last field: refused.
        let extra = read_greeting(&[greeting(1), vec![0]].concat());
        assert!(extra.unwrap_err().contains("left over"));
        let extra = MapFailure::decode(&[failure.encode(), vec![0]].concat());
        assert!(extra.unwrap_err().contains("left over"));
        let frame = encode(Kind::Reply, 9, b"xy").unwrap();
        assert_eq!(
            decode(&frame),
            Ok(Frame {
                kind: Kind::Reply,
                id: 9,
                payload: b"xy"
            })
        );
    }

    #[test]
    fn a_frame_is_refused_for_each_lie_in_its_header() {
        let frame = encode(Kind::Reply, 9, b"xy").unwrap();
        assert!(
            decode(&frame[..HEADER - 1])
                .unwrap_err()
                .contains("shorter than a frame header")
        );
        assert!(
            decode(&frame[..frame.len() - 1])
                .unwrap_err()
                .contains("announcing 2 bytes")
        );
        let mut unknown = frame.clone();
        unknown[0] = 77;
        assert!(decode(&unknown).unwrap_err().contains("unknown kind 77"));
        let mut huge = frame.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&huge).unwrap_err().contains("more than"));
        assert_eq!(encode(Kind::Call, 1, &vec![0; MAX_PAYLOAD + 1]), Err(MAX_PAYLOAD + 1));
        // 64 KiB of payload: carried.
        assert_eq!(MAX_PAYLOAD, 64 << 10);
        let full = encode(Kind::Call, 1, &vec![7; MAX_PAYLOAD]).unwrap();
        assert_eq!(decode(&full).unwrap().payload.len(), MAX_PAYLOAD);
    }

    #[test]
    fn counts_larger_than_the_payload_are_refused_before_allocating() {
        let mut w = Writer::default();
        w.str("n").str("v").u32(u32::MAX);
        assert!(Mapped::decode(&w.0).unwrap_err().contains("too short"));
        let mut w = Writer::default();
        w.str("a")
            .str("b")
            .u64(1)
            .u64(2)
            .u32(0)
            .u32(0)
            .u32(0)
            .u32(0)
            .u32(u32::MAX);
        assert!(MapRequest::decode(&w.0).unwrap_err().contains("too short"));
        let mut w = Writer::default();
        w.str("a").u64(1).u64(2).u32(0).u32(u32::MAX);
        assert!(DependRequest::decode(&w.0).unwrap_err().contains("too short"));
        // One more than the bytes left hold: a range of 16 bytes with 15 left, a pass of at
        // least 12 with 11 left.
        let mut w = Writer::default();
        w.str("a").u64(1).u64(2).u32(0).u32(1).rest(&[0; 15]);
        assert!(DependRequest::decode(&w.0).unwrap_err().contains("too short"));
        let mut w = Writer::default();
        w.str("n").str("v").u32(1).rest(&[0; 11]);
        assert!(Mapped::decode(&w.0).unwrap_err().contains("too short"));
    }

    /// The `sealed` flag has its own word in `Map` and `Depend` payloads: set alone, it
    /// decodes as sealed and changes nothing else; a payload cut before it is refused.
    #[test]
    fn the_sealed_flag_is_its_own_word() {
        let map = MapRequest {
            shown: "p.so".into(),
            resolved: "/p.so".into(),
            dev: 1,
            ino: 2,
            strict: true,
            origin: false,
            sealed: false,
            dependencies: 3,
            loads: vec![0..8, 16..24],
        };
        let mut w = Writer::default();
        w.str("p.so").str("/p.so").u64(1).u64(2).u32(1).u32(0).u32(7).u32(3);
        write_loads(&mut w, &map.loads);
        let decoded = MapRequest::decode(&w.0).unwrap();
        assert_eq!(
            decoded,
            MapRequest {
                sealed: true,
                ..map.clone()
            }
        );
        assert_eq!(MapRequest::decode(&map.encode()).unwrap(), map);
        let mut w = Writer::default();
        w.str("p.so").str("/p.so").u64(1).u64(2).u32(1).u32(0);
        assert!(MapRequest::decode(&w.0).unwrap_err().contains("cut short"));
        let depend = DependRequest {
            found: "/lib/d.so".into(),
            dev: 4,
            ino: 5,
            sealed: false,
            loads: vec![],
        };
        let mut w = Writer::default();
        w.str("/lib/d.so").u64(4).u64(5).u32(1);
        write_loads(&mut w, &depend.loads);
        let decoded = DependRequest::decode(&w.0).unwrap();
        assert_eq!(
            decoded,
            DependRequest {
                sealed: true,
                ..depend.clone()
            }
        );
        let mut w = Writer::default();
        w.str("/lib/d.so").u64(4).u64(5);
        assert!(DependRequest::decode(&w.0).unwrap_err().contains("cut short"));
    }

    /// Random bytes, and valid frames mutated (bytes flipped, cut, extended, lengths
    /// rewritten): never a panic, never a payload outside the bytes received.
    #[test]
    fn random_and_mutated_frames_never_panic() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let len = rng.below(96);
            decode_all(&rng.bytes(len));
        }
        let frames = valid_frames();
        for _ in 0..50_000 {
            let mut frame = frames[rng.below(frames.len())].clone();
            match rng.below(5) {
                0 => {
                    let at = rng.below(frame.len());
                    frame[at] ^= 1 << rng.below(8);
                }
                1 => frame.truncate(rng.below(frame.len() + 1)),
                2 => {
                    let extra = rng.below(16);
                    frame.extend(rng.bytes(extra));
                }
                3 => {
                    // A length field rewritten, in the header or in the payload.
                    let at = rng.below(frame.len().saturating_sub(3).max(1));
                    let value = [0, 1, 4, 0xffff, u32::MAX][rng.below(5)].to_le_bytes();
                    for (i, b) in value.iter().enumerate() {
                        if let Some(slot) = frame.get_mut(at + i) {
                            *slot = *b;
                        }
                    }
                }
                _ => {
                    for _ in 0..1 + rng.below(4) {
                        let at = rng.below(frame.len());
                        frame[at] = rng.next() as u8;
                    }
                }
            }
            decode_all(&frame);
        }
    }
}
