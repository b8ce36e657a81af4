//! Topologies of other tools (`vemu import`): GraphML, containerlab and IMUNES files. A scenario
//! that loads, or an error naming the file — never a panic, never a scenario the loader
//! refuses.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        match vemu_scenario::import::graphml(text, "fuzz.graphml", "fuzz") {
            Ok(i) => assert!(!i.yaml.is_empty()),
            Err(e) => assert!(e.starts_with("fuzz.graphml"), "{e}"),
        }
        match vemu_scenario::import::imunes(text, "fuzz.imn", "fuzz") {
            Ok(i) => assert!(!i.yaml.is_empty()),
            Err(e) => assert!(e.starts_with("fuzz.imn"), "{e}"),
        }
        // (Binds read the machine's files, a FIFO among them: not here.)
        if !text.contains("binds") {
            match vemu_scenario::import::clab(text, "fuzz.clab.yml", None, None) {
                Ok(i) => assert!(i.nodes > 0),
                Err(e) => assert!(e.starts_with("fuzz.clab.yml"), "{e}"),
            }
        }
    }
});
