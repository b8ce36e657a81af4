//! An ns-2 movement trace (`trace:` of a wireless segment).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(traces) = vemu_radio::ns2::parse(text, 64) {
            assert!(traces.len() <= 64);
            for t in &traces {
                let mut c = t.cursor();
                for at in [0, 1_000_000_000, u64::MAX] {
                    let _ = (t.position_at(at), c.advance(t, at));
                }
            }
        }
    }
});
