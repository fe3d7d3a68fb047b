//! `kubectl-nvcf_worker`: the name kubectl runs as `kubectl nvcf-worker`, so that
//! `cargo install --path .` alone gives a working plugin.
fn main() {
    std::process::exit(kubectl_nvcf_worker::cli::main());
}
