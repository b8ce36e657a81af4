//! A scenario file: every input must give a plan or errors naming the file, never a
//! panic (libFuzzer also stops on a run over its memory and time limits).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        // No base directory: `from:` and `trace:` files are looked up from the current
        // one (fuzz/), where none of the names the fuzzer makes up exist.
        if let Err(errors) = vemu_scenario::load_str_in(text, "fuzz.yaml", "fuzz", None, None) {
            assert!(
                errors.to_string().contains("fuzz.yaml"),
                "an error that does not name the file: {errors}"
            );
        }
    }
});
