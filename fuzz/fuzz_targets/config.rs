//! The function config reader over any parsed document.
#![no_main]

use kubectl_nvcf_worker::config::Config;
use kubectl_nvcf_worker::manifest::parse_stream;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The parser catches libyaml-safer's panics; the fuzzer's hook must not abort
    // on them (a face's one call, as the binary makes it).
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(kubectl_nvcf_worker::manifest::parse::quiet_parser_panics);
    if let Ok(docs) = parse_stream(data) {
        for d in &docs {
            if let Ok(cfg) = Config::from_node(Some(d.view())) {
                let _ = cfg.token_spec();
            }
        }
        let _ = Config::from_node(None);
    }
});
