//! The KRM function as it reads a ResourceList as one tree (`Memory::Hold`): the
//! plain form the streaming one is compared with, for `bench/bench.py`.
use std::io::{Read, Write};

fn main() {
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).unwrap();
    let run = kubectl_nvcf_worker::pipeline::Run {
        memory: kubectl_nvcf_worker::pipeline::Memory::Hold,
        ..kubectl_nvcf_worker::pipeline::Run::binary()
    };
    let out = kubectl_nvcf_worker::krm::run_resource_list_with(&run, &input).unwrap();
    std::io::stdout().write_all(&out.stdout).unwrap();
}
