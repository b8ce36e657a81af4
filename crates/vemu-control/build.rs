//! Builds the web interface (`web/`, JavaScript from npm packages pinned by
//! `web/package-lock.json`) into `OUT_DIR/web`, where `src/api/ui.rs` takes it into the
//! binary: users of vemu need no build step, builders need Node.js and npm (which
//! `scripts/setup.sh` installs).

use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &mut Command, what: &str) {
    let status = cmd.status().unwrap_or_else(|e| {
        panic!("building the web interface: cannot run {what}: {e}. It needs Node.js (18 or newer) and npm: run scripts/setup.sh, or install the 'nodejs' and 'npm' packages")
    });
    if !status.success() {
        panic!("building the web interface: {what} failed ({status})");
    }
}

fn modified(p: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

fn main() {
    // Read when the script runs, not when it was compiled: cargo reuses a compiled build
    // script for a copy of the tree elsewhere (a git worktree sharing the target
    // directory), whose own web/ must be built.
    let web = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"))
        .join("../../web");
    for f in ["src", "package.json", "package-lock.json", "build.mjs"] {
        println!("cargo:rerun-if-changed={}", web.join(f).display());
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("web");
    // The packages, exactly as the lock file says, when they are missing or older.
    let installed = web.join("node_modules/.package-lock.json");
    if modified(&installed).is_none()
        || modified(&installed) < modified(&web.join("package-lock.json"))
    {
        run(
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(&web),
            "npm ci",
        );
    }
    run(
        Command::new("node").arg("build.mjs").env("VEMU_WEB_OUT", &out).current_dir(&web),
        "node build.mjs",
    );
}
