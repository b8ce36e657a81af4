//! Compiles the TC program (bpf/steer.bpf.c) with clang. Without clang the object is
//! left empty: vemu then runs every link through its engine and says why at `up`.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "bpf/steer.bpf.c";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-env-changed=CLANG");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("steer.o");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let result = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf"])
        .arg(format!("-I/usr/include/{arch}-linux-gnu"))
        .args(["-c", src, "-o"])
        .arg(&out)
        .status();
    match result {
        Ok(s) if s.success() => {}
        other => {
            let why = match other {
                Ok(s) => format!("{clang} failed ({s})"),
                Err(e) => format!("{clang} not found ({e}); install clang and libbpf-dev"),
            };
            println!("cargo:warning=the kernel fast path is not built: {why}");
            // A path that does not exist makes cargo run this script again on every
            // build, so a clang installed later is found without `cargo clean`.
            let path =
                if clang.contains('/') { clang.clone() } else { format!("/usr/bin/{clang}") };
            println!("cargo:rerun-if-changed={path}");
            std::fs::write(&out, b"").expect("writing an empty object");
        }
    }
}
