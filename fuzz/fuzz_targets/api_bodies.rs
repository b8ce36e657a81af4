//! The API's request bodies, as the handlers read them before touching the lab. The
//! first byte picks the route; the rest is the body.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vemu_control::api::requests;

fuzz_target!(|data: &[u8]| {
    let Some((&route, body)) = data.split_first() else { return };
    let status = match route % 5 {
        0 => requests::link_change(body).err(),
        1 => requests::node_limits(body).err(),
        2 => requests::node_move(body).err(),
        3 => requests::traffic(body).err(),
        _ => requests::exec(body).err(),
    };
    if let Some(e) = status {
        assert_eq!(e.status.as_u16(), 400);
        assert!(!e.message.is_empty());
    }
});
