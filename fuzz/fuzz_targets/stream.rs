//! Parse, emit, re-parse: the emitted stream must parse to the same values;
//! `read::load` must answer without panicking; a document dropped as read must read
//! again to the same tree.
#![no_main]

use kubectl_nvcf_worker::manifest::batch::{evict, Batch, Need};
use kubectl_nvcf_worker::manifest::{self, parse_stream, read};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The parser catches libyaml-safer's panics; the fuzzer's hook must not abort
    // on them (a face's one call, as the binary makes it).
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(kubectl_nvcf_worker::manifest::parse::quiet_parser_panics);
    if let Ok(docs) = parse_stream(data) {
        let out = manifest::to_yaml(&docs);
        // Known libyaml-safer 0.3 reader limit (docs/guarantees.md): a stream that
        // starts with byte 0xEF and no BOM (U+F000..U+FFFF first) is refused as an
        // "invalid byte order marker". The tool's own output starts with `---`.
        if out.first() == Some(&0xEF) && !out.starts_with(b"\xEF\xBB\xBF") {
            return;
        }
        let again = parse_stream(&out).expect("emitted YAML re-parses");
        let values = |d: &[manifest::Document]| {
            d.iter()
                .filter(|d| !d.is_empty())
                .map(|d| manifest::to_json(d.view()))
                .collect::<Vec<_>>()
        };
        assert_eq!(values(&docs), values(&again), "round trip changed a value");
    }
    let input = || read::Input {
        name: "fuzz".into(),
        bytes: data.to_vec(),
        utf16: None,
    };
    // A document dropped as read (as `inject` drops a selected workload's) reads
    // again from its bytes to the very tree it had: values, text, style, lines and
    // byte spans (`Debug` shows them all).
    if let Ok(held) = read::load(input()) {
        let drop_all = |d: &mut manifest::Document| evict(d, &[], |_| Need::Later);
        let dropped = read::load_with(input(), Some(&drop_all), Default::default()).expect("read as before");
        let batch = Batch::new(vec![dropped]);
        for again in batch.with_rereads(|r| r.collect::<Vec<_>>()) {
            let was = &held.docs[again.index];
            assert_eq!(format!("{:?}", again.root), format!("{:?}", was.root));
            assert_eq!(format!("{:?}", again.resolved), format!("{:?}", was.resolved));
            assert_eq!((again.line, again.region, again.body), (was.line, was.region, was.body));
        }
    }
});
