//! The program loads, and routes and counters read back as written.

use vemu_fastpath::{Counted, FastPath, Route};

#[test]
fn routes_and_counters_of_a_loaded_program() {
    let ctl = std::os::unix::net::UnixDatagram::unbound().unwrap().into();
    let fp = FastPath::load(ctl).expect("the TC program loads (clang and BPF are needed)");
    fp.route(7, Route::Engine { tap: 8 }).unwrap();
    assert_eq!(fp.counted(7), Counted::default(), "no counter before a kernel route");
    fp.route(7, Route::Kernel { peer_of: 9 }).unwrap();
    assert_eq!(fp.counted(7), Counted::default());
    // Back to the engine and to the kernel again: the counter stays.
    fp.route(7, Route::Engine { tap: 8 }).unwrap();
    fp.route(7, Route::Kernel { peer_of: 9 }).unwrap();
    fp.route(8, Route::Deliver { peer_of: 7 }).unwrap();
}
