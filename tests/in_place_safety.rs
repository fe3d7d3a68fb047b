//! Safe in-place writes (issue 25, item 8), run as root against the real file
//! system: a symlink that leaves the package and files that are not regular are
//! refused with their names; owner, group and mode (setuid too) are kept; hard
//! links are read once and never split; SIGINT and SIGTERM while files are written
//! leave no temporary file and no file half-replaced.

use crate::support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{run_in, temp_tree, BIN};

fn deployment(name: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata:\n      labels: {{app: {name}, nvcf.io/worker: \"true\"}}\n    spec:\n      containers:\n      - name: c\n        image: nginx\n"
    )
}

fn temps(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in walk(dir) {
        let name = e.file_name().unwrap().to_string_lossy().into_owned();
        if name.contains(".nvcf-worker-") {
            out.push(e.display().to_string());
        }
    }
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_symlink_out_of_the_package_is_refused_when_rewriting() {
    let tmp = temp_tree(&[
        ("outside/app.yaml", &deployment("app")),
        ("pkg/web.yaml", &deployment("web")),
    ]);
    std::os::unix::fs::symlink("../outside/app.yaml", tmp.path().join("pkg/link.yaml")).unwrap();
    let before = std::fs::read(tmp.path().join("outside/app.yaml")).unwrap();
    for flag in ["-i", "--diff"] {
        let out = run_in(
            Some(tmp.path()),
            &["inject", flag, "-f", "pkg", "--cluster-id", "c1"],
            b"",
        );
        out.code(1);
        assert!(
            out.stderr.contains("pkg/link.yaml")
                && out.stderr.contains("outside/app.yaml")
                && out.stderr.contains("outside pkg"),
            "{flag}\n{out}"
        );
        assert_eq!(out.stdout, "", "{flag}");
    }
    assert_eq!(
        std::fs::read(tmp.path().join("outside/app.yaml")).unwrap(),
        before
    );
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("pkg/web.yaml")).unwrap(),
        deployment("web")
    );
    assert!(temps(tmp.path()).is_empty());
    // Printing the stream reads through it: nothing is written.
    let out = run_in(
        Some(tmp.path()),
        &["inject", "-f", "pkg", "--cluster-id", "c1"],
        b"",
    );
    out.ok();
    assert!(out.stderr.contains("deployment/app injected"), "{out}");
    // A symlink inside the package is the file it names, read once.
    std::fs::remove_file(tmp.path().join("pkg/link.yaml")).unwrap();
    std::os::unix::fs::symlink("web.yaml", tmp.path().join("pkg/zz-alias.yaml")).unwrap();
    let out = run_in(
        Some(tmp.path()),
        &["inject", "-i", "-f", "pkg", "--cluster-id", "c1"],
        b"",
    );
    out.ok();
    assert!(out.stderr.contains("1 file rewritten"), "{out}");
    assert!(
        std::fs::symlink_metadata(tmp.path().join("pkg/zz-alias.yaml"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn a_fifo_named_yaml_is_refused_not_waited_on() {
    let tmp = temp_tree(&[("pkg/web.yaml", &deployment("web"))]);
    let fifo = tmp.path().join("pkg/pipe.yaml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    for args in [
        &["inject", "-f", "pkg", "--cluster-id", "c1"][..],
        &["inject", "-i", "-f", "pkg", "--cluster-id", "c1"],
        &["validate", "pkg"],
    ] {
        let mut child = Command::new(BIN)
            .args(args)
            .current_dir(tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(20) {
                child.kill().unwrap();
                panic!("{args:?} waits on the FIFO");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("pkg/pipe.yaml") && stderr.contains("a FIFO, not a regular file"),
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("pkg/web.yaml")).unwrap(),
        deployment("web")
    );
}

#[test]
fn owner_group_and_mode_are_kept() {
    let tmp = temp_tree(&[("pkg/web.yaml", &deployment("web"))]);
    let file = tmp.path().join("pkg/web.yaml");
    std::os::unix::fs::chown(&file, Some(1234), Some(5678)).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o4751)).unwrap();
    let out = run_in(
        Some(tmp.path()),
        &["inject", "-i", "-f", "pkg", "--cluster-id", "c1"],
        b"",
    );
    out.ok();
    let meta = std::fs::metadata(&file).unwrap();
    assert!(std::fs::read_to_string(&file)
        .unwrap()
        .contains("nvcf-worker-token"));
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o7777),
        (1234, 5678, 0o4751)
    );
}

#[test]
fn hard_links_are_read_once_and_never_split() {
    let tmp = temp_tree(&[("pkg/a.yaml", &deployment("web"))]);
    std::fs::hard_link(tmp.path().join("pkg/a.yaml"), tmp.path().join("pkg/b.yaml")).unwrap();
    let out = run_in(
        Some(tmp.path()),
        &["inject", "-f", "pkg", "--cluster-id", "c1"],
        b"",
    );
    out.ok();
    assert_eq!(
        out.stderr.matches("deployment/web injected").count(),
        1,
        "{out}"
    );
    let out = run_in(
        Some(tmp.path()),
        &["inject", "-i", "-f", "pkg/a.yaml", "--cluster-id", "c1"],
        b"",
    );
    out.code(1);
    assert!(
        out.stderr.contains("pkg/a.yaml") && out.stderr.contains("has 2 hard links"),
        "{out}"
    );
    let (a, b) = (
        std::fs::metadata(tmp.path().join("pkg/a.yaml")).unwrap(),
        std::fs::metadata(tmp.path().join("pkg/b.yaml")).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("pkg/b.yaml")).unwrap(),
        deployment("web")
    );
}

/// A package of 400 workloads on a disk (each temporary file is synced), not a
/// tmpfs, so writing takes a while; `inject -i` on it, with `sig` in the state
/// `disposition` (the default, or ignored as `nohup` or a shell's background job
/// leaves it, whatever the test runner was started with), sent as soon as the first
/// temporary file appears (the write phase has begun).
/// Returns how the run ended, the temporary files left, and how many of the 400
/// files were replaced.
fn signalled_while_writing(
    sig: libc::c_int,
    disposition: libc::sighandler_t,
) -> (std::process::ExitStatus, Vec<String>, usize) {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let pkg = tmp.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    for i in 0..400 {
        std::fs::write(
            pkg.join(format!("d{i:03}.yaml")),
            deployment(&format!("w{i}")),
        )
        .unwrap();
    }
    let mut command = Command::new(BIN);
    command
        .args(["inject", "-i", "-f", "pkg", "--cluster-id", "c1"])
        .current_dir(tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec, only `signal`, which is async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            libc::signal(sig, disposition);
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let start = Instant::now();
    let mut sent = false;
    while child.try_wait().unwrap().is_none() {
        if !temps(&pkg).is_empty() {
            assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
            sent = true;
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no temporary file appeared"
        );
    }
    assert!(
        sent,
        "signal {sig}: the run ended before it wrote a temporary file"
    );
    let status = child.wait().unwrap();
    let changed = (0..400)
        .filter(|i| {
            std::fs::read_to_string(pkg.join(format!("d{i:03}.yaml"))).unwrap()
                != deployment(&format!("w{i}"))
        })
        .count();
    (status, temps(&pkg), changed)
}

/// An ignored SIGINT or SIGTERM stays ignored: the run writes every file.
#[test]
fn an_ignored_signal_stays_ignored_while_writing() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let (status, left, changed) = signalled_while_writing(sig, libc::SIG_IGN);
        assert!(status.success(), "signal {sig}: {status:?}");
        assert_eq!(left, Vec::<String>::new(), "signal {sig}");
        assert_eq!(changed, 400, "signal {sig}");
    }
}

/// SIGINT and SIGTERM with their default action, while files are written: the run
/// ends by the signal, with no temporary file left and every file or none replaced.
#[test]
fn sigint_and_sigterm_while_writing_leave_no_temporary_file() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let (status, left, changed) = signalled_while_writing(sig, libc::SIG_DFL);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(sig),
            "ended by the signal: {status:?}"
        );
        assert_eq!(left, Vec::<String>::new(), "signal {sig}");
        // All files or none.
        assert!(
            changed == 0 || changed == 400,
            "signal {sig}: {changed} of 400 files replaced"
        );
    }
}

/// A file named without a directory (`-f web.yaml` in the package) is replaced in
/// the working directory: its temporary file is made there, nowhere else.
#[test]
fn a_file_named_without_a_directory_is_replaced_where_it_is() {
    let tmp = temp_tree(&[("pkg/web.yaml", &deployment("web"))]);
    let pkg = tmp.path().join("pkg");
    run_in(
        Some(&pkg),
        &["inject", "-i", "-f", "web.yaml", "--cluster-id", "c1"],
        b"",
    )
    .ok();
    assert!(std::fs::read_to_string(pkg.join("web.yaml"))
        .unwrap()
        .contains("nvcf-worker-token"));
    assert_eq!(temps(tmp.path()), Vec::<String>::new());
    assert_eq!(walk(tmp.path()).len(), 1, "{:?}", walk(tmp.path()));
}

/// The replaced files are held open until renamed over (`sink::Held`), so a low
/// limit on open files must not fail a run or change a file: with the hard limit
/// at 300 most of 600 files are replaced without a hold, with only the soft one at
/// 300 it is raised for the run. Every file comes out as in a run with no such
/// limit, and no temporary file is left.
#[test]
fn in_place_replaces_every_file_under_a_low_open_file_limit() {
    let files: Vec<(String, String)> = (0..600)
        .map(|i| (format!("pkg/w{i:03}.yaml"), deployment(&format!("w{i}"))))
        .collect();
    let tree: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let in_place = |limits: &str| {
        let tmp = temp_tree(&tree);
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{limits} exec \"$0\" inject -i -q -f \"$1\" --cluster-id c1"
            ))
            .arg(BIN)
            .arg(tmp.path().join("pkg"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{limits}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(temps(tmp.path()), Vec::<String>::new(), "{limits}");
        let texts: Vec<String> = files
            .iter()
            .map(|(rel, _)| std::fs::read_to_string(tmp.path().join(rel)).unwrap())
            .collect();
        texts
    };
    let unlimited = in_place("");
    assert!(unlimited.iter().all(|t| t.contains("nvcf-worker-token")));
    for limits in ["ulimit -n 300 &&", "ulimit -Sn 300 &&"] {
        let got = in_place(limits);
        for (i, (rel, _)) in files.iter().enumerate() {
            assert_eq!(got[i], unlimited[i], "{limits} {rel}");
        }
    }
}
