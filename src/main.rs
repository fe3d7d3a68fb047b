//! `kubectl-nvcf-worker`: see `cli` for the commands.
fn main() {
    std::process::exit(kubectl_nvcf_worker::cli::main());
}
