//! Starts a loopback API server for manual use and prints its URL.
//!
//! Usage: `loopback-apiserver [--kubeconfig PATH] [--namespace NS] [--legacy-discovery]`
//! Runs until killed. `--legacy-discovery` turns aggregated discovery off,
//! as on servers before Kubernetes 1.26.

use loopback_apiserver::ApiServer;

fn main() {
    let mut kubeconfig = None;
    let mut namespace = None;
    let mut legacy_discovery = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--kubeconfig" => kubeconfig = args.next(),
            "--namespace" | "-n" => namespace = args.next(),
            "--legacy-discovery" => legacy_discovery = true,
            "-h" | "--help" => {
                println!("usage: loopback-apiserver [--kubeconfig PATH] [--namespace NS] [--legacy-discovery]");
                return;
            }
            other => {
                eprintln!("loopback-apiserver: unexpected argument {other:?}");
                std::process::exit(2);
            }
        }
    }
    let server = ApiServer::start();
    server.set_aggregated_discovery(!legacy_discovery);
    if let Some(path) = kubeconfig {
        if let Err(e) = server.write_kubeconfig(&path, namespace.as_deref()) {
            eprintln!("loopback-apiserver: writing {path}: {e}");
            std::process::exit(1);
        }
        eprintln!("kubeconfig written to {path}");
    }
    println!("{}", server.url());
    loop {
        std::thread::park();
    }
}
