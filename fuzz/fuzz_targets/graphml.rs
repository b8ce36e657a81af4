//! Topologies of other tools (`vemu import`): GraphML, containerlab and IMUNES files and AS
//! relationships (every AS, a host in the first; and the valley-free check). A scenario
//! that loads, or an error naming the file — never a panic, never a scenario the loader
//! refuses.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        // What a lab's routers answer `vemu report bgp` (a tenant's router may say anything).
        let at = vemu_control::bgp::AnsweredAt { lab_ns: 5_000_000_000, local_day_ms: 43_200_000 };
        for software in [vemu_control::bgp::Software::Bird, vemu_control::bgp::Software::Frr] {
            let answers = [text.to_string(), text.to_string(), text.to_string()];
            if let Ok(r) = vemu_control::bgp::router("n", software, &answers, at) {
                assert!(r.established <= r.sessions);
                assert!(r.last_change_ns.is_none_or(|t| t <= at.lab_ns));
            }
        }
        match vemu_scenario::import::graphml(text, "fuzz.graphml", "fuzz") {
            Ok(i) => assert!(!i.yaml.is_empty()),
            Err(e) => assert!(e.starts_with("fuzz.graphml"), "{e}"),
        }
        match vemu_scenario::import::imunes(text, "fuzz.imn", "fuzz") {
            Ok(i) => assert!(!i.yaml.is_empty()),
            Err(e) => assert!(e.starts_with("fuzz.imn"), "{e}"),
        }
        if let Ok(g) = vemu_scenario::import::parse_as_rel(text, "fuzz.as-rel") {
            let o = vemu_scenario::import::AsOptions {
                hosts: g.ases.first().copied().into_iter().collect(),
                ..Default::default()
            };
            match vemu_scenario::import::as_rel(&g, "fuzz.as-rel", "fuzz", &o) {
                Ok(i) => assert!(i.nodes >= g.ases.len().min(65_536)),
                Err(e) => assert!(e.contains("fuzz.as-rel") || e.contains("--hosts"), "{e}"),
            }
            // FRR, and the first three ASes on an IXP.
            let frr = vemu_scenario::import::AsOptions {
                router: vemu_scenario::import::AsRouter::Frr,
                ixps: vec![g.ases.iter().take(3).copied().collect()],
                ..o
            };
            if let Err(e) = vemu_scenario::import::as_rel(&g, "fuzz.as-rel", "fuzz", &frr) {
                assert!(
                    e.contains("fuzz.as-rel") || e.contains("--hosts") || e.contains("--ixp"),
                    "{e}"
                );
            }
            let n = g.neighbours();
            let _ = vemu_scenario::import::valley_free(&g.ases, &n);
            let _ = g.cone_sizes();
            if let Some(&first) = g.ases.first() {
                let paths = vemu_scenario::import::bird_as_paths(text);
                let _ = vemu_scenario::import::routes_valley_free(first, &paths, &g, 1);
            }
        }
        // A router's answers (BIRD's text, FRR's JSON) as the valley-free check reads them.
        let _ = vemu_scenario::import::bird_as_paths(text);
        let _ = vemu_scenario::import::frr_as_paths(text);
        // (Binds read the machine's files, a FIFO among them: not here.)
        if !text.contains("binds") {
            match vemu_scenario::import::clab(text, "fuzz.clab.yml", None, None) {
                Ok(i) => assert!(i.nodes > 0),
                Err(e) => assert!(e.starts_with("fuzz.clab.yml"), "{e}"),
            }
        }
    }
});
