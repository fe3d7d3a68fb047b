//! The KRM function over arbitrary stdin: any answer is fine, a panic is not.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The parser catches libyaml-safer's panics; the fuzzer's hook must not abort
    // on them (a face's one call, as the binary makes it).
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(kubectl_nvcf_worker::manifest::parse::quiet_parser_panics);
    if let Ok(out) = kubectl_nvcf_worker::krm::run_resource_list(data) {
        // Whatever the function writes must itself be one parseable document.
        let docs = kubectl_nvcf_worker::manifest::parse_stream(&out.stdout)
            .expect("the function's output parses");
        assert_eq!(docs.iter().filter(|d| !d.is_empty()).count(), 1);
    }
});
