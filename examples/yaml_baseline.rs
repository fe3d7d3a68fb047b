//! Baselines for the benchmark (bench/bench.py): what the YAML layer costs with no
//! tool logic at all, measured as whole processes like the tool itself.
//!
//! `yaml_baseline events FILE`      libyaml-safer parse + emit, event by event (our crate, no tree)
//! `yaml_baseline parse PATH...`    libyaml-safer parse only (files or directories)
//! `yaml_baseline serde-yaml FILE`  serde_yaml through serde_json::Value (the naive tool)

use std::io::Write;

use libyaml_safer::{Emitter, EventData, Parser};
use serde::Deserialize;

fn files(paths: &[String]) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        let p = std::path::PathBuf::from(p);
        if p.is_dir() {
            let mut entries: Vec<_> = std::fs::read_dir(&p)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            entries.sort();
            out.extend(entries);
        } else {
            out.push(p);
        }
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().expect("mode").as_str();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match mode {
        "events" => {
            let input = std::fs::read(&args[1]).unwrap();
            let mut parser = Parser::new();
            // The same 64 KiB read window as the tool (see src/manifest/parse.rs).
            parser.set_input(std::io::BufReader::with_capacity(64 * 1024, &input[..]));
            let mut buf = Vec::new();
            {
                let mut emitter = Emitter::new();
                emitter.set_output_string(&mut buf);
                emitter.set_width(-1);
                emitter.set_unicode(true);
                loop {
                    let event = parser.parse().unwrap();
                    let end = matches!(event.data, EventData::StreamEnd);
                    emitter.emit(event).unwrap();
                    if end {
                        break;
                    }
                }
            }
            out.write_all(&buf).unwrap();
        }
        "parse" => {
            let mut events = 0usize;
            for f in files(&args[1..]) {
                let input = std::fs::read(&f).unwrap();
                let mut parser = Parser::new();
                parser.set_input(std::io::BufReader::with_capacity(64 * 1024, &input[..]));
                for e in parser {
                    e.unwrap();
                    events += 1;
                }
            }
            writeln!(out, "{events} events").unwrap();
        }
        "serde-yaml" => {
            let input = std::fs::read_to_string(&args[1]).unwrap();
            let mut s = String::new();
            for doc in serde_yaml::Deserializer::from_str(&input) {
                let v = serde_json::Value::deserialize(doc).unwrap();
                s.push_str("---\n");
                s.push_str(&serde_yaml::to_string(&v).unwrap());
            }
            out.write_all(s.as_bytes()).unwrap();
        }
        other => panic!("unknown mode {other}"),
    }
}
