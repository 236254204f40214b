//! The driver's wire format: one launch's request, written by the driver backend and read by
//! `kda_emu_driver`, and its response. Little-endian; a string is a `u32` length and its bytes.
//!
//! Request: [`MAGIC`], str library, str entry, str parameter types (`const bf16*,u32`), `u32`
//! grid\[3\], `u32` block\[3\], `u32` dynamic shared bytes, `u64` seed, `u32` argument count,
//! then per argument an [`ArgKind`] byte and, for a scalar, its `u64` bits; for a buffer, its
//! `u64` misalignment modulo 16, `u64` length and its bytes.
//!
//! Response: [`MAGIC`], `u8` status; launched (0): `u32` count, then each written buffer as `u64`
//! length and its bytes, in argument order; refused or failed (1): the [`Fault`] as `u32` kind,
//! `u32` has_thread, `u32` block\[3\], `u32` thread\[3\], `i32` parameter, str variable, `i64`
//! index, str message.

use crate::fault::{Fault, Place};

/// The first bytes of a request and of a response.
pub const MAGIC: &[u8; 8] = b"KDAEMU1\n";

/// What an argument of a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ArgKind {
    /// A scalar, as the 64 bits of its value (little-endian: the value's own bytes first).
    Scalar = 0,
    /// A buffer the kernel reads.
    Read = 1,
    /// A buffer the kernel writes; it comes back in the response.
    Write = 2,
}

/// One launch's request, built argument by argument.
#[derive(Debug)]
pub struct Request {
    bytes: Vec<u8>,
}

/// A launch as the driver runs it: the library, the kernel, the geometry and the seed.
#[derive(Clone, Copy, Debug)]
pub struct Launch<'a> {
    /// The emulated library's path.
    pub library: &'a str,
    /// The kernel's `extern "C"` name.
    pub entry: &'a str,
    /// The arguments' C types, comma-separated, which the driver compares with the kernel's.
    pub params: &'a str,
    /// The grid in blocks.
    pub grid: [u32; 3],
    /// The block in threads.
    pub block: [u32; 3],
    /// The dynamic shared memory in bytes.
    pub dynamic_shared: u32,
    /// The block-order seed.
    pub seed: u64,
    /// How many arguments follow.
    pub arg_count: u32,
}

impl Request {
    /// A request for `launch`, its arguments to follow.
    pub fn new(launch: &Launch<'_>) -> Self {
        let mut request = Request { bytes: MAGIC.to_vec() };
        for text in [launch.library, launch.entry, launch.params] {
            request.put_str(text);
        }
        for value in launch.grid.into_iter().chain(launch.block).chain([launch.dynamic_shared]) {
            request.bytes.extend(value.to_le_bytes());
        }
        request.bytes.extend(launch.seed.to_le_bytes());
        request.bytes.extend(launch.arg_count.to_le_bytes());
        request
    }

    /// A scalar argument.
    pub fn scalar(&mut self, bits: u64) {
        self.bytes.push(ArgKind::Scalar as u8);
        self.bytes.extend(bits.to_le_bytes());
    }

    /// A buffer argument: `bytes` start `misalignment` bytes past a 16-byte boundary.
    pub fn buffer(&mut self, kind: ArgKind, misalignment: u64, bytes: &[u8]) {
        self.bytes.push(kind as u8);
        self.bytes.extend(misalignment.to_le_bytes());
        self.bytes.extend((bytes.len() as u64).to_le_bytes());
        self.bytes.extend_from_slice(bytes);
    }

    /// The request's bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    fn put_str(&mut self, text: &str) {
        self.bytes.extend(u32::try_from(text.len()).unwrap_or(u32::MAX).to_le_bytes());
        self.bytes.extend_from_slice(text.as_bytes());
    }
}

/// The written buffers of a response in argument order, `Ok(Err(fault))` for a launch that was
/// refused or failed, or why the response is malformed.
pub fn parse_response(bytes: &[u8]) -> Result<Result<Vec<&[u8]>, Fault>, &'static str> {
    let mut response = Cursor(bytes.strip_prefix(MAGIC.as_slice()).ok_or("no magic")?);
    if response.take(1)?[0] != 0 {
        let kind = response.u32()?;
        let has_thread = response.u32()? != 0;
        let block = [response.u32()?, response.u32()?, response.u32()?];
        let thread = [response.u32()?, response.u32()?, response.u32()?];
        let parameter = i32::from_le_bytes(response.array()?);
        let variable = response.str()?;
        let index = i64::from_le_bytes(response.array()?);
        let message = response.str()?;
        let place = has_thread.then_some(Place { block, thread });
        return Ok(Err(Fault::from_parts(kind, place, parameter, variable, index, message)));
    }
    let count = response.u32()?;
    let mut written = Vec::new();
    for _ in 0..count {
        let length = u64::from_le_bytes(response.array()?);
        written.push(response.take(usize::try_from(length).map_err(|_| "too long")?)?);
    }
    Ok(Ok(written))
}

/// The unread rest of a response.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.0.len() < n {
            return Err("truncated");
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], &'static str> {
        self.take(N)?.try_into().map_err(|_| "truncated")
    }

    fn u32(&mut self) -> Result<u32, &'static str> {
        self.array().map(u32::from_le_bytes)
    }

    fn str(&mut self) -> Result<String, &'static str> {
        let length = self.u32()? as usize;
        Ok(String::from_utf8_lossy(self.take(length)?).into_owned())
    }
}

/// The wire's constants as C preprocessor definitions, `(name, value)`.
pub(crate) fn defines() -> Vec<(&'static str, String)> {
    let magic: String = MAGIC.iter().map(|byte| std::ascii::escape_default(*byte).to_string()).collect();
    vec![
        ("KDA_EMU_WIRE_MAGIC", format!("\"{magic}\"")),
        ("KDA_EMU_ARG_SCALAR", (ArgKind::Scalar as u8).to_string()),
        ("KDA_EMU_ARG_READ", (ArgKind::Read as u8).to_string()),
        ("KDA_EMU_ARG_WRITE", (ArgKind::Write as u8).to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_gives_its_written_buffers_or_its_fault() {
        let mut ok = MAGIC.to_vec();
        ok.push(0);
        ok.extend(2u32.to_le_bytes());
        ok.extend(3u64.to_le_bytes());
        ok.extend([1, 2, 3]);
        ok.extend(0u64.to_le_bytes());
        assert_eq!(parse_response(&ok), Ok(Ok(vec![&[1u8, 2, 3][..], &[][..]])));
        let mut failed = MAGIC.to_vec();
        failed.push(1);
        for value in [2u32, 1, 3, 0, 0, 31, 0, 0] {
            failed.extend(value.to_le_bytes());
        }
        failed.extend((-1i32).to_le_bytes());
        failed.extend(0u32.to_le_bytes());
        failed.extend(0i64.to_le_bytes());
        failed.extend(4u32.to_le_bytes());
        failed.extend(b"hang");
        let fault = parse_response(&failed).unwrap().unwrap_err();
        assert_eq!(fault.kind, crate::FaultKind::Kernel);
        assert_eq!(fault.place, Some(Place { block: [3, 0, 0], thread: [31, 0, 0] }));
        assert_eq!((fault.access, fault.message.as_str()), (None, "hang"));
        assert_eq!(parse_response(b"KDAEMU0\n"), Err("no magic"));
        assert_eq!(parse_response(&ok[..ok.len() - 9]), Err("truncated"));
    }

    #[test]
    fn a_request_lays_out_the_launch_then_each_argument() {
        let launch = Launch {
            library: "l",
            entry: "e",
            params: "u32",
            grid: [1, 2, 3],
            block: [4, 5, 6],
            dynamic_shared: 7,
            seed: 8,
            arg_count: 2,
        };
        let mut request = Request::new(&launch);
        request.scalar(9);
        request.buffer(ArgKind::Write, 4, &[0xAB]);
        let bytes = request.into_bytes();
        let mut expected = b"KDAEMU1\n\x01\0\0\0l\x01\0\0\0e\x03\0\0\0u32".to_vec();
        for value in 1u32..=7 {
            expected.extend(value.to_le_bytes());
        }
        expected.extend(8u64.to_le_bytes());
        expected.extend(2u32.to_le_bytes());
        expected.push(0);
        expected.extend(9u64.to_le_bytes());
        expected.push(2);
        expected.extend(4u64.to_le_bytes());
        expected.extend(1u64.to_le_bytes());
        expected.push(0xAB);
        assert_eq!(bytes, expected);
    }

    #[test]
    fn the_magic_reaches_the_generated_header_as_a_c_string() {
        let header = crate::shim::config_header(&crate::DeviceLimits::SM_90);
        assert!(header.contains("#define KDA_EMU_WIRE_MAGIC \"KDAEMU1\\n\"\n"), "{header}");
        assert!(header.contains("#define KDA_EMU_ARG_WRITE 2\n"));
    }
}
