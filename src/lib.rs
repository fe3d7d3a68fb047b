//! kubectl-nvcf-worker: NVCF worker identity for Kubernetes manifests and clusters.

pub mod ci;
pub mod cli;
pub mod complete;
pub mod config;
pub mod controlplane;
pub mod error;
pub mod guard;
pub mod identity;
pub mod inject;
pub mod krm;
pub mod live;
pub mod manifest;
pub mod mutating;
pub mod output;
pub mod pipeline;
pub mod policy;
pub mod recognize;
pub mod report;
pub mod rules;
pub mod sarif;
pub mod selector;
pub mod uninject;
pub mod work;
pub mod workload;

/// The layering README's "Architecture" shows, held by a test: no module imports
/// one that imports it (directly or around a loop), and the I/O layer imports
/// nothing of NVCF or findings.
#[cfg(test)]
mod layering {
    use std::collections::{BTreeMap, BTreeSet};

    /// Top-level module -> the top-level modules its production code names.
    fn imports() -> BTreeMap<String, BTreeSet<String>> {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut files = vec![src.clone()];
        while let Some(p) = files.pop() {
            if p.is_dir() {
                files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            let rel = p.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            let Some(rel) = rel.strip_suffix(".rs") else {
                continue;
            };
            let top = rel.split('/').next().unwrap().to_string();
            if ["lib", "main", "bin"].contains(&top.as_str()) {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            let deps = out.entry(top.clone()).or_default();
            for (i, _) in code.match_indices("crate::") {
                let name: String = code[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name != top && !name.is_empty() {
                    deps.insert(name);
                }
            }
        }
        out
    }

    #[test]
    fn no_module_imports_one_that_imports_it() {
        let g = imports();
        // Everything a module reaches, following imports.
        let reach = |from: &str| {
            let mut seen = BTreeSet::new();
            let mut todo = vec![from.to_string()];
            while let Some(m) = todo.pop() {
                for d in g.get(&m).into_iter().flatten() {
                    if seen.insert(d.clone()) {
                        todo.push(d.clone());
                    }
                }
            }
            seen
        };
        let loops: Vec<&String> = g.keys().filter(|m| reach(m).contains(*m)).collect();
        assert!(
            loops.is_empty(),
            "modules on an import loop: {loops:?}\n{g:#?}"
        );
    }

    #[test]
    fn the_io_layer_imports_nothing_of_nvcf_or_findings() {
        let g = imports();
        assert_eq!(
            g["manifest"],
            BTreeSet::from(["work".to_string()]),
            "manifest/ reads and writes YAML and knows nothing above it"
        );
        assert!(g["work"].is_empty(), "{:?}", g["work"]);
        // The loader, on its own file.
        let load =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/pipeline/load.rs"))
                .unwrap();
        for nvcf in [
            "identity",
            "rules",
            "recognize",
            "guard",
            "inject",
            "report",
            "config",
        ] {
            assert!(
                !load.contains(&format!("crate::{nvcf}")),
                "the loader imports crate::{nvcf}"
            );
        }
    }
}
