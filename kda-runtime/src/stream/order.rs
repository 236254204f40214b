//! The ordering rule of streams as a model: which streams a use of a buffer must wait for.

use std::collections::HashMap;

use crate::signature::Access;

/// The uses of each buffer (by [`DeviceBuffer::id`](crate::DeviceBuffer::id)) on the streams of
/// one device, and the waits between streams that the rule of
/// [`GpuBackend::new_stream`](crate::GpuBackend::new_stream) requires before each new use:
///
/// - a read on stream `S` waits for the buffer's last write if that was on another stream and `S`
///   has not waited for that write yet;
/// - a write on `S` waits for every other stream that read the buffer since its last write, and
///   for the last write itself if that was on another stream `S` has not waited for yet.
///
/// Streams are numbered by whoever keeps the model (the recording backend: 0 for itself, then 1, 2, ... in
/// the order streams are opened). Uses on one stream never wait: its queue keeps them in order.
#[derive(Debug, Default)]
pub(crate) struct StreamOrder {
    buffers: HashMap<u64, Uses>,
}

/// The uses of one buffer that later uses may have to wait for.
#[derive(Debug, Default)]
struct Uses {
    /// The stream of the last write.
    writer: Option<usize>,
    /// The streams that read the buffer since that write, each once.
    readers: Vec<usize>,
}

impl StreamOrder {
    /// Notes a use of `buffer` on `stream`, and returns the streams it must wait for first, each
    /// once, in the order of the rule (the last writer, then the readers in the order they read).
    pub(crate) fn access(&mut self, stream: usize, buffer: u64, access: Access) -> Vec<usize> {
        let uses = self.buffers.entry(buffer).or_default();
        // Whether `stream` is already ordered after the last write: it made it, or read since.
        let after_write = uses.writer == Some(stream) || uses.readers.contains(&stream);
        let writer = uses.writer.filter(|_| !after_write);
        match access {
            Access::Read => {
                if !uses.readers.contains(&stream) {
                    uses.readers.push(stream);
                }
                writer.into_iter().collect()
            }
            Access::Write => {
                // The last writer may also have read since its write: it is waited for once.
                let readers =
                    uses.readers.iter().copied().filter(|&reader| reader != stream && Some(reader) != writer);
                let waits = writer.into_iter().chain(readers).collect();
                *uses = Uses { writer: Some(stream), readers: Vec::new() };
                waits
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Access::{Read, Write};

    #[test]
    fn a_read_waits_for_the_last_write_on_another_stream_once() {
        let mut order = StreamOrder::default();
        assert_eq!(order.access(1, 7, Write), [] as [usize; 0], "nothing before the first use");
        assert_eq!(order.access(2, 7, Read), [1]);
        assert_eq!(order.access(2, 7, Read), [] as [usize; 0], "stream 2 waited for that write");
        assert_eq!(order.access(3, 7, Read), [1]);
        // Another buffer has uses of its own.
        assert_eq!(order.access(2, 8, Read), [] as [usize; 0]);
    }

    #[test]
    fn reads_on_several_streams_never_wait_for_each_other() {
        let mut order = StreamOrder::default();
        for stream in [1, 2, 1, 3, 2] {
            assert_eq!(order.access(stream, 7, Read), [] as [usize; 0]);
        }
    }

    #[test]
    fn a_write_waits_for_the_reads_on_other_streams_and_the_last_write() {
        let mut order = StreamOrder::default();
        order.access(0, 7, Write);
        order.access(1, 7, Read);
        order.access(2, 7, Read);
        order.access(0, 7, Read);
        // Stream 0 wrote last and has read since: it waits for the other readers only.
        assert_eq!(order.access(0, 7, Write), [1, 2]);
        // Stream 3 waits for that write; stream 1, reading since, is after it already.
        order.access(1, 7, Read);
        assert_eq!(order.access(3, 7, Write), [0, 1]);
        // A write right after a write on another stream.
        assert_eq!(order.access(2, 7, Write), [3]);
    }

    #[test]
    fn a_writer_that_read_since_its_write_is_waited_for_once() {
        let mut order = StreamOrder::default();
        order.access(1, 7, Write);
        order.access(1, 7, Read);
        assert_eq!(order.access(2, 7, Write), [1]);
    }

    #[test]
    fn uses_on_one_stream_never_wait() {
        let mut order = StreamOrder::default();
        for access in [Write, Read, Read, Write, Write, Read] {
            assert_eq!(order.access(4, 7, access), [] as [usize; 0]);
        }
    }
}
