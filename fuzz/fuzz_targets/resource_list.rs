//! The KRM function over arbitrary stdin: any answer is fine, a panic is not.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(out) = kubectl_nvcf_worker::krm::run_resource_list(data) {
        // Whatever the function writes must itself be one parseable document.
        let docs = kubectl_nvcf_worker::manifest::parse_stream(&out.stdout)
            .expect("the function's output parses");
        assert_eq!(docs.iter().filter(|d| !d.is_empty()).count(), 1);
    }
});
