//! Writing a batch of frames to TAP devices with one system call (io_uring), instead of
//! one `write(2)` each: a LAN's flood is one frame written to every other port, and a
//! busy shard writes many frames at the same deadline.
//!
//! The TAP devices are non-blocking, so the kernel carries each write out inline while
//! it takes the submission (no worker thread), in the order given, exactly as the
//! `write(2)`s would have been. [`WRITES_ENV`]`=syscall` writes one `write(2)` per frame
//! (the way to compare the two); so does a kernel without io_uring.

use std::os::fd::RawFd;

use io_uring::{opcode, types, IoUring};

use crate::core::Transmit;

/// What can be written: a frame's bytes.
pub(crate) trait Bytes {
    fn bytes(&self) -> &[u8];
}

impl Bytes for Transmit {
    fn bytes(&self) -> &[u8] {
        &self.frame
    }
}

/// Environment variable: `syscall` writes each frame with its own `write(2)`.
pub const WRITES_ENV: &str = "VEMU_ENGINE_WRITES";

/// Most frames in one submission. Their lateness is taken as each leaves the core's
/// schedule, before the batch is written: a batch of 64 small frames takes some tens
/// of microseconds, far below the fidelity monitor's threshold (1 ms by default).
pub const BATCH: usize = 64;

/// Frames to write: the descriptor of each and what the core handed out.
pub(crate) type Batch<T = Transmit> = Vec<(RawFd, T)>;

pub(crate) struct TapWriter<T = Transmit> {
    ring: Option<IoUring>,
    /// Rings that failed with writes maybe still in them, with the frames those point
    /// to: kept so that the kernel never reads freed memory (the ring is dropped first).
    retired: Vec<(IoUring, Batch<T>)>,
}

impl<T: Bytes> TapWriter<T> {
    pub fn new() -> TapWriter<T> {
        let ring = match std::env::var(WRITES_ENV).as_deref() {
            Ok("syscall") => None,
            _ => IoUring::new(BATCH as u32).ok(),
        };
        TapWriter { ring, retired: Vec::new() }
    }

    /// Whether batches go by io_uring.
    #[cfg(test)]
    pub fn batched(&self) -> bool {
        self.ring.is_some()
    }

    /// Write every frame of `batch` to its descriptor and tell `done` for each (the frame,
    /// whether it went), in any order; `batch` is emptied.
    pub fn write(&mut self, batch: &mut Batch<T>, mut done: impl FnMut(&T, bool)) {
        match &mut self.ring {
            Some(ring) if batch.len() > 1 => {
                let mut seen = [false; BATCH];
                if let Err(e) = submit(ring, batch, &mut seen, &mut done) {
                    eprintln!("engine: writing frames through io_uring failed ({e}); each frame is now written with write(2)");
                    // Whatever is still in the ring may point into `batch`: both stay.
                    for ((_, tx), _) in batch.iter().zip(seen).filter(|(_, seen)| !seen) {
                        done(tx, false);
                    }
                    let ring = self.ring.take().expect("matched");
                    self.retired.push((ring, std::mem::take(batch)));
                }
            }
            _ => {
                for (fd, tx) in batch.iter() {
                    // SAFETY: writing a frame we hold to a descriptor of ours.
                    let n =
                        unsafe { libc::write(*fd, tx.bytes().as_ptr().cast(), tx.bytes().len()) };
                    done(tx, n >= 0);
                }
            }
        }
        batch.clear();
    }
}

/// One submission of the whole batch (at most [`BATCH`]), then every completion.
/// `seen[i]`: frame i's completion was read.
fn submit<T: Bytes>(
    ring: &mut IoUring,
    batch: &Batch<T>,
    seen: &mut [bool; BATCH],
    done: &mut impl FnMut(&T, bool),
) -> std::io::Result<()> {
    debug_assert!(batch.len() <= BATCH);
    {
        let mut sq = ring.submission();
        for (i, (fd, tx)) in batch.iter().enumerate() {
            let write =
                opcode::Write::new(types::Fd(*fd), tx.bytes().as_ptr(), tx.bytes().len() as u32)
                    .build()
                    .user_data(i as u64);
            // SAFETY: the frame stays where it is until its completion is read below
            // (or, on failure, for as long as the ring lives: `TapWriter::retired`).
            unsafe { sq.push(&write) }
                .map_err(|_| std::io::Error::other("the submission queue is full"))?;
        }
    }
    let mut left = batch.len();
    while left > 0 {
        match ring.submit_and_wait(left) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
                ) => {}
            Err(e) => return Err(e),
        }
        for cqe in ring.completion() {
            let i = cqe.user_data() as usize;
            if i < batch.len() && !std::mem::replace(&mut seen[i], true) {
                done(&batch[i].1, cqe.result() >= 0);
                left -= 1;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    impl Bytes for Vec<u8> {
        fn bytes(&self) -> &[u8] {
            self
        }
    }

    fn pipe() -> (std::fs::File, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two descriptors we then own.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) }, 0);
        // SAFETY: as above.
        unsafe { (std::fs::File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    /// A batch to three devices (pipes here) and one bad descriptor, by io_uring and by
    /// write(2): every frame reported once, each device's frames in order, the bad one
    /// refused.
    #[test]
    fn a_batch_reaches_each_device_in_order_and_every_frame_is_reported_once() {
        for ring in [true, false] {
            let mut w: TapWriter<Vec<u8>> = TapWriter {
                ring: ring.then(|| IoUring::new(BATCH as u32).unwrap()),
                retired: Vec::new(),
            };
            assert_eq!(w.batched(), ring);
            let ends: Vec<_> = (0..3).map(|_| pipe()).collect();
            let mut batch: Batch<Vec<u8>> = (0..BATCH as u8 - 1)
                .map(|i| (ends[i as usize % 3].1.as_raw_fd(), vec![i; 10]))
                .collect();
            batch.push((-1, vec![255; 10]));
            let mut reported = Vec::new();
            w.write(&mut batch, |f, ok| reported.push((f[0], ok)));
            assert!(batch.is_empty());
            reported.sort();
            let want: Vec<(u8, bool)> =
                (0..BATCH as u8 - 1).map(|i| (i, true)).chain([(255, false)]).collect();
            assert_eq!(reported, want, "io_uring: {ring}");
            for (k, (mut r, _)) in ends.into_iter().enumerate() {
                let mut got = Vec::new();
                r.read_to_end(&mut got).ok();
                let firsts: Vec<u8> = got.chunks(10).map(|c| c[0]).collect();
                let expected: Vec<u8> =
                    (0..BATCH as u8 - 1).filter(|i| *i as usize % 3 == k).collect();
                assert_eq!(firsts, expected, "device {k}, io_uring: {ring}");
            }
        }
    }
}
