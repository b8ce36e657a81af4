//! A file of measured delays (`delay: {measured: FILE}`): text, or a pcap/pcapng capture
//! read as inter-arrival times or ping round trips; and a netem table.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vemu_link::{Distribution, Table};
use vemu_scenario::delay::{measured_series, Series};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let series = match pick % 3 {
        0 => None,
        1 => Some(Series::InterArrival),
        _ => Some(Series::HalfRtt),
    };
    if let Ok(s) = measured_series(rest, series) {
        assert!(s.iter().all(|v| v.is_finite() && *v >= 0.0), "{s:?}");
        if let Ok(m) = Table::from_samples("f", &s) {
            assert!(m.table.values.len() <= vemu_link::dist::MAX_TABLE_ENTRIES);
            let d = Distribution::Table(m.table);
            for u in [0.0, 0.5, 0.999_999] {
                assert!(d.quantile(u).is_finite());
            }
        }
    }
    if let Ok(t) = Table::from_netem("f", &String::from_utf8_lossy(rest)) {
        assert!(!t.values.is_empty() && t.values.len() <= vemu_link::dist::MAX_TABLE_ENTRIES);
    }
});
