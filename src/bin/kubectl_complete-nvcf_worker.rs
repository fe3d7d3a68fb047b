//! `kubectl_complete-nvcf_worker`: what kubectl runs for `kubectl nvcf-worker <TAB>`
//! (kubectl's plugin completion looks for `kubectl_complete-<plugin>` on PATH).
fn main() {
    std::process::exit(kubectl_nvcf_worker::cli::complete_main());
}
