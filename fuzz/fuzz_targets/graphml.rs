//! A GraphML topology (`vemu import`): a scenario that loads, or an error naming the
//! file — never a panic, never a scenario the loader refuses.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        match vemu_scenario::import::graphml(text, "fuzz.graphml", "fuzz") {
            Ok(i) => assert!(!i.yaml.is_empty()),
            Err(e) => assert!(e.starts_with("fuzz.graphml"), "{e}"),
        }
    }
});
