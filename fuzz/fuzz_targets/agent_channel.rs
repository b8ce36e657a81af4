//! What crosses the agents' channel besides the API's bodies (those are `api_bodies`):
//! the worker's orders as an agent reads them, an agent's hello as the controller reads
//! it, captured frames streamed from an agent, and traffic records of another machine
//! moved to the controller's clock. The first byte picks which; the rest is the input.
//! The channel is authenticated, but a bug or a version skew must still give an error,
//! never a panic or unbounded memory.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vemu_control::clock_sync::Offset;
use vemu_control::wire::{AgentHello, CaptureRecord};
use vemu_machine::worker::WorkerRequest;

fuzz_target!(|data: &[u8]| {
    let Some((&route, body)) = data.split_first() else { return };
    match route % 4 {
        0 => {
            let _ = serde_json::from_slice::<WorkerRequest>(body);
        }
        1 => {
            let _ = serde_json::from_slice::<AgentHello>(body);
        }
        2 => {
            // The stream in pieces of any size: whole records come out, the rest waits,
            // a frame longer than allowed is refused.
            let Some((&piece, stream)) = body.split_first() else { return };
            let (mut buf, mut out) = (Vec::new(), Vec::new());
            for chunk in stream.chunks(usize::from(piece).max(1)) {
                buf.extend_from_slice(chunk);
                if CaptureRecord::decode(&mut buf, &mut out).is_err() {
                    return;
                }
                assert!(
                    buf.len() < CaptureRecord::HEAD + CaptureRecord::MAX_FRAME,
                    "a whole record left in the buffer"
                );
            }
            assert!(out.iter().all(|c| c.frame.len() <= CaptureRecord::MAX_FRAME));
        }
        _ => {
            // Offsets of up to three columns from the first bytes, then the records.
            if body.len() < 24 {
                return;
            }
            let clocks: Vec<Option<Offset>> = body[..24]
                .chunks(8)
                .map(|c| {
                    let v = i64::from_le_bytes(c.try_into().expect("8 bytes"));
                    (v % 3 != 0).then_some(Offset { offset_ns: v, rtt_ns: 0, wall_bound_ns: None })
                })
                .collect();
            let text = String::from_utf8_lossy(&body[24..]);
            let moved = vemu_machine::traffic::on_controller_clock(&text, &clocks);
            assert_eq!(moved.lines().count(), text.lines().count(), "every line stays a line");
        }
    }
});
