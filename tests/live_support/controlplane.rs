//! A real Kubernetes control plane for the live tests: etcd, kube-apiserver and
//! kube-controller-manager built from published Go modules by
//! `scripts/build-control-plane.sh`, on loopback ports, with certificates made
//! here by the openssl CLI. One per [`Plane`]; it stops and its folder goes when
//! the test process ends, however it ends (a watchdog process outlives it).

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

/// The service-account token issuer (and default API audience).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

pub struct ControlPlane {
    /// Holds certificates, kubeconfigs, etcd data and logs.
    pub dir: PathBuf,
    /// `https://127.0.0.1:<port>` of kube-apiserver.
    pub url: String,
    /// Admin (`system:masters`) kubeconfig, straight to kube-apiserver.
    pub admin_kubeconfig: PathBuf,
    /// Seconds from the first process started to `/readyz` answering `ok`.
    pub startup: Duration,
    pub bin_dir: PathBuf,
}

/// Which control plane a test runs on. The live suites share one; a suite whose
/// admission policies judge every object in the cluster (a policy sees all
/// cluster-scoped objects, whatever its namespace selector) runs on its own, so it
/// never judges another suite's objects, nor theirs its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Plane {
    Shared,
    Own(&'static str),
}

/// A plane's control plane, started by its first test, and the lock its tests
/// share (`Cluster::start` reads it; a test spanning every namespace writes it).
pub struct Slot {
    cp: OnceLock<ControlPlane>,
    pub span: RwLock<()>,
}

/// The slot of a plane: made once, never freed (the processes outlive it anyway).
pub fn slot(plane: Plane) -> &'static Slot {
    static SLOTS: Mutex<BTreeMap<Plane, &'static Slot>> = Mutex::new(BTreeMap::new());
    let mut slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
    slots.entry(plane).or_insert_with(|| {
        Box::leak(Box::new(Slot {
            cp: OnceLock::new(),
            span: RwLock::new(()),
        }))
    })
}

/// The control plane of `plane`, started by the first caller (outside the slots'
/// lock: one plane starting does not hold up another's tests).
pub fn control_plane(plane: Plane) -> &'static ControlPlane {
    slot(plane).cp.get_or_init(|| start_retrying(plane))
}

/// Starts a control plane, again (twice at most) when a port `free_port` picked
/// was taken before its server bound it: parallel tests' planes race for ports
/// (seen once in CI: kube-apiserver "bind: address already in use"). A failed
/// start has killed its processes and removed its folder (`Starting`'s drop).
fn start_retrying(plane: Plane) -> ControlPlane {
    let mut tries = 0;
    loop {
        match ControlPlane::start() {
            Ok(cp) => return cp,
            Err(e) if tries < 2 && e.contains("address already in use") => tries += 1,
            Err(e) => panic!("the test control plane {plane:?} did not start: {e}"),
        }
    }
}

/// The folder holding etcd, kube-apiserver and kube-controller-manager:
/// `NVCF_CONTROL_PLANE_BIN`, else what the build script prints (it builds only
/// when its inputs changed).
pub fn binaries() -> Result<PathBuf, String> {
    if let Ok(dir) = std::env::var("NVCF_CONTROL_PLANE_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-control-plane.sh");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed ({})", script.display(), out.status));
    }
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(PathBuf::from(dir))
}

/// A free loopback port (the kernel's pick; bound by the server moments later).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a loopback port")
}

fn openssl(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("openssl: {e} (the openssl CLI is part of the machine image)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "openssl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Issues `<name>.crt`/`<name>.key` in `dir`, signed by `ca.crt`.
pub fn issue_cert(dir: &Path, name: &str, subject: &str, extensions: &str) -> Result<(), String> {
    let (key, csr, ext, crt) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.ext"),
        format!("{name}.crt"),
    );
    std::fs::write(dir.join(&ext), extensions).map_err(|e| e.to_string())?;
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            subject,
        ],
    )?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &crt,
            "-extfile",
            &ext,
        ],
    )
}

/// A client certificate for `user` in `groups`, as kube-apiserver reads them (CN, O).
pub fn issue_client_cert(
    dir: &Path,
    file: &str,
    user: &str,
    groups: &[&str],
) -> Result<(), String> {
    let mut subject = String::new();
    for g in groups {
        subject.push_str(&format!("/O={g}"));
    }
    subject.push_str(&format!("/CN={user}"));
    issue_cert(
        dir,
        file,
        &subject,
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n",
    )
}

/// A kubeconfig for `server` with the given user entry (YAML lines under `user:`).
pub fn kubeconfig(ca: &Path, server: &str, namespace: Option<&str>, user: &str) -> String {
    let ns = namespace.map_or(String::new(), |n| format!("\n    namespace: {n}"));
    let cluster = if server.starts_with("https:") {
        format!(
            "certificate-authority: {}\n    server: {server}",
            ca.display()
        )
    } else {
        format!("server: {server}")
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    {cluster}\n\
         users:\n- name: user\n  user:\n{user}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: user{ns}\n\
         current-context: test\n"
    )
}

/// The `user:` lines of a client-certificate user.
pub fn cert_user(dir: &Path, file: &str) -> String {
    format!(
        "    client-certificate: {}\n    client-key: {}\n",
        dir.join(format!("{file}.crt")).display(),
        dir.join(format!("{file}.key")).display()
    )
}

/// Processes started so far; killed (and the folder removed) if start-up fails.
struct Starting {
    dir: PathBuf,
    children: Vec<Child>,
}

impl Starting {
    fn spawn(&mut self, name: &str, bin: &Path, args: &[String]) -> Result<(), String> {
        let log = std::fs::File::create(self.dir.join(format!("{name}.log")))
            .map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        self.children.push(child);
        Ok(())
    }

    /// Fails when a process already exited (a port taken, a bad flag).
    fn check_alive(&mut self) -> Result<(), String> {
        for c in &mut self.children {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(format!("a control-plane process exited early ({status})"));
            }
        }
        Ok(())
    }

    fn log_tails(&self) -> String {
        let mut out = String::new();
        for name in ["etcd", "kube-apiserver", "kube-controller-manager"] {
            if let Ok(text) = std::fs::read_to_string(self.dir.join(format!("{name}.log"))) {
                let lines: Vec<&str> = text.lines().collect();
                out.push_str(&format!("--- {name}.log (last lines)\n"));
                for l in &lines[lines.len().saturating_sub(15)..] {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if !self.dir.as_os_str().is_empty() && std::env::var_os("NVCF_KEEP_CONTROL_PLANE").is_none()
        {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl ControlPlane {
    fn start() -> Result<ControlPlane, String> {
        let bin_dir = binaries()?;
        let dir = tempfile::Builder::new()
            .prefix("nvcf-control-plane-")
            .tempdir()
            .map_err(|e| e.to_string())?
            .keep();
        let mut s = Starting {
            dir: dir.clone(),
            children: Vec::new(),
        };
        match Self::start_in(&mut s, bin_dir) {
            Ok(cp) => {
                watchdog(&s.dir, &s.children)?;
                // From here on the watchdog owns the processes and the folder.
                s.children.clear();
                s.dir = PathBuf::new();
                Ok(cp)
            }
            Err(e) => Err(format!("{e}\n{}", s.log_tails())),
        }
    }

    fn start_in(s: &mut Starting, bin_dir: PathBuf) -> Result<ControlPlane, String> {
        let dir = s.dir.clone();
        let p = |f: &str| dir.join(f).display().to_string();
        openssl(
            &dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "2",
                "-subj",
                "/CN=nvcf-test-ca",
            ],
        )?;
        issue_cert(
            &dir,
            "serving",
            "/CN=kube-apiserver",
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
             extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n",
        )?;
        issue_client_cert(&dir, "admin", "admin", &["system:masters"])?;
        openssl(&dir, &["genrsa", "-out", "sa.key", "2048"])?;
        openssl(&dir, &["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"])?;

        let (etcd_port, peer_port, api_port) = (free_port(), free_port(), free_port());
        let url = format!("https://127.0.0.1:{api_port}");
        let admin_kubeconfig = dir.join("admin.kubeconfig");
        std::fs::write(
            &admin_kubeconfig,
            kubeconfig(&dir.join("ca.crt"), &url, None, &cert_user(&dir, "admin")),
        )
        .map_err(|e| e.to_string())?;

        let started = Instant::now();
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        s.spawn(
            "etcd",
            &bin_dir.join("etcd"),
            &args(&[
                "--name=test",
                &format!("--data-dir={}", p("etcd-data")),
                &format!("--listen-client-urls={etcd_url}"),
                &format!("--advertise-client-urls={etcd_url}"),
                &format!("--listen-peer-urls={peer_url}"),
                &format!("--initial-advertise-peer-urls={peer_url}"),
                &format!("--initial-cluster=test={peer_url}"),
                "--unsafe-no-fsync",
                "--log-level=warn",
            ]),
        )?;
        s.spawn(
            "kube-apiserver",
            &bin_dir.join("kube-apiserver"),
            &args(&[
                &format!("--etcd-servers={etcd_url}"),
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                &format!("--secure-port={api_port}"),
                &format!("--tls-cert-file={}", p("serving.crt")),
                &format!("--tls-private-key-file={}", p("serving.key")),
                &format!("--client-ca-file={}", p("ca.crt")),
                &format!("--cert-dir={}", p("apiserver-certs")),
                &format!("--service-account-issuer={ISSUER}"),
                &format!("--service-account-key-file={}", p("sa.pub")),
                &format!("--service-account-signing-key-file={}", p("sa.key")),
                "--service-cluster-ip-range=10.96.0.0/16",
                "--authorization-mode=RBAC",
                "--profiling=false",
            ]),
        )?;
        let client = super::client::Admin::new(&admin_kubeconfig);
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            s.check_alive()?;
            if client.get_text("/readyz").is_ok_and(|t| t.trim() == "ok") {
                break;
            }
            if Instant::now() > deadline {
                return Err("kube-apiserver was not ready within 180 s".into());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        s.spawn(
            "kube-controller-manager",
            &bin_dir.join("kube-controller-manager"),
            &args(&[
                &format!("--kubeconfig={}", admin_kubeconfig.display()),
                &format!("--authentication-kubeconfig={}", admin_kubeconfig.display()),
                &format!("--authorization-kubeconfig={}", admin_kubeconfig.display()),
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--leader-elect=false",
                &format!("--root-ca-file={}", p("ca.crt")),
                &format!("--service-account-private-key-file={}", p("sa.key")),
                &format!("--cluster-signing-cert-file={}", p("ca.crt")),
                &format!("--cluster-signing-key-file={}", p("ca.key")),
                "--controllers=*",
                // Each controller acts as its own ServiceAccount (kubeadm's default),
                // so the admission policy sees who creates a pod (tests/live_policy.rs).
                "--use-service-account-credentials",
            ]),
        )?;
        // Ready once the controllers run: the default namespace got its ServiceAccount.
        loop {
            s.check_alive()?;
            if client
                .get_text("/api/v1/namespaces/default/serviceaccounts/default")
                .is_ok()
            {
                break;
            }
            if Instant::now() > deadline {
                return Err(
                    "kube-controller-manager made no default ServiceAccount within 180 s".into(),
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let startup = started.elapsed();
        eprintln!(
            "control plane ready in {:.1} s at {url} ({})",
            startup.as_secs_f64(),
            dir.display()
        );
        Ok(ControlPlane {
            dir,
            url,
            admin_kubeconfig,
            startup,
            bin_dir,
        })
    }

    /// Writes `<file>` in the control plane's folder: a kubeconfig straight to
    /// kube-apiserver with the given `user:` lines.
    fn write_kubeconfig(&self, file: &str, namespace: Option<&str>, user: &str) -> PathBuf {
        let path = self.dir.join(file);
        std::fs::write(&path, kubeconfig(&self.ca(), &self.url, namespace, user)).unwrap();
        path
    }

    /// A kubeconfig file for a restricted user (client certificate, no groups
    /// beyond `groups`), straight to kube-apiserver.
    pub fn user_kubeconfig(&self, user: &str, groups: &[&str], namespace: Option<&str>) -> PathBuf {
        let file = format!(
            "user-{}",
            user.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
        );
        issue_client_cert(&self.dir, &file, user, groups).unwrap();
        let user_lines = cert_user(&self.dir, &file);
        self.write_kubeconfig(&format!("{file}.kubeconfig"), namespace, &user_lines)
    }

    /// A kubeconfig that authenticates with a bearer token (e.g. a ServiceAccount's).
    pub fn token_kubeconfig(&self, name: &str, token: &str, namespace: Option<&str>) -> PathBuf {
        let user_lines = format!("    token: {token}\n");
        self.write_kubeconfig(&format!("token-{name}.kubeconfig"), namespace, &user_lines)
    }

    /// The admin's kubeconfig impersonating `user` (kubectl's `--as`), as a file.
    pub fn impersonating_kubeconfig(
        &self,
        name: &str,
        user: &str,
        namespace: Option<&str>,
    ) -> PathBuf {
        let user_lines = format!("{}    as: {user}\n", cert_user(&self.dir, "admin"));
        self.write_kubeconfig(&format!("as-{name}.kubeconfig"), namespace, &user_lines)
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }
}

/// A process in its own session that waits for the test process to end, then
/// stops the control plane and removes its folder: no leftovers even when the
/// test binary panics, is killed, or exits without running destructors.
fn watchdog(dir: &Path, children: &[Child]) -> Result<(), String> {
    let pids: Vec<String> = children.iter().map(|c| c.id().to_string()).collect();
    let keep = std::env::var_os("NVCF_KEEP_CONTROL_PLANE").is_some();
    let script = format!(
        "while kill -0 {parent} 2>/dev/null; do sleep 0.5; done; \
         kill {pids} 2>/dev/null; for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 {pids} 2>/dev/null || break; sleep 0.5; done; \
         kill -9 {pids} 2>/dev/null; {rm}",
        parent = std::process::id(),
        pids = pids.join(" "),
        rm = if keep {
            String::new()
        } else {
            format!("rm -rf '{}'", dir.display())
        }
    );
    Command::new("setsid")
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(|_| ())
        .map_err(|e| format!("setsid: {e}"))
}
