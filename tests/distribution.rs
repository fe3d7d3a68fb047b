//! Distribution: the krew manifest against krew's validation rules, the release
//! archive script, LICENSE, the catalog metadata, and the CLI surface packagers
//! rely on (completions, man page, help examples, --version).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use serde_yaml::Value;
use sha2::{Digest, Sha256};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-nvcf-worker");
const VERSION: &str = env!("CARGO_PKG_VERSION");
const SUBCOMMANDS: [&str; 5] = [
    "inject",
    "validate",
    "install-kustomize-plugin",
    "completion",
    "man",
];
/// krew platforms: each must be matched by at most one entry.
const KREW_PLATFORMS: [(&str, &str); 10] = [
    ("darwin", "amd64"),
    ("darwin", "arm64"),
    ("linux", "386"),
    ("linux", "amd64"),
    ("linux", "arm"),
    ("linux", "arm64"),
    ("linux", "ppc64le"),
    ("windows", "386"),
    ("windows", "amd64"),
    ("windows", "arm64"),
];
/// The platforms a release can ship and the Rust target each archive is built
/// for; the manifest lists those whose archive was really built.
const SHIPPED: [(&str, &str, &str); 4] = [
    ("linux", "amd64", "x86_64-unknown-linux-gnu"),
    ("linux", "arm64", "aarch64-unknown-linux-gnu"),
    ("darwin", "amd64", "x86_64-apple-darwin"),
    ("darwin", "arm64", "aarch64-apple-darwin"),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).output().unwrap();
    stdout(out, &format!("{bin} {args:?}"))
}

fn stdout(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn yaml(path: &Path) -> Value {
    serde_yaml::from_str(&fs::read_to_string(path).unwrap()).unwrap()
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for k in path {
        cur = &cur[*k];
    }
    cur.as_str()
        .unwrap_or_else(|| panic!("{} is not a string", path.join(".")))
}

fn is_plugin_name(s: &str) -> bool {
    // ^[a-z0-9]+(-[a-z0-9]+)*$
    !s.is_empty()
        && s.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// krew's semver: a `v` prefix, then MAJOR.MINOR.PATCH with optional -pre/+build.
fn is_krew_version(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('v') else {
        return false;
    };
    let core = rest.split(['-', '+']).next().unwrap();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
        })
}

/// matchLabels of a platform selector, or why the selector is unusable (krew
/// also allows matchExpressions; we do not use them).
fn match_labels(platform: &Value) -> Result<BTreeMap<String, String>, String> {
    let selector = platform["selector"]
        .as_mapping()
        .ok_or("a platform has no selector")?;
    if !selector.keys().all(|k| k.as_str() == Some("matchLabels")) {
        return Err(format!("selector uses more than matchLabels: {selector:?}"));
    }
    serde_yaml::from_value(platform["selector"]["matchLabels"].clone()).map_err(|e| e.to_string())
}

fn matches(labels: &BTreeMap<String, String>, os: &str, arch: &str) -> bool {
    labels.iter().all(|(k, v)| match k.as_str() {
        "os" => v == os,
        "arch" => v == arch,
        _ => false,
    })
}

/// What krew's `validation.ValidatePlugin` and the krew-index checks would
/// reject, plus archives not named for their platform's target. Empty if valid.
fn krew_problems(m: &Value) -> Vec<String> {
    let mut p = Vec::new();
    let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
    if s(&m["apiVersion"]) != "krew.googlecontainertools.github.com/v1alpha2" {
        p.push("apiVersion".into());
    }
    if s(&m["kind"]) != "Plugin" {
        p.push("kind".into());
    }
    let name = s(&m["metadata"]["name"]);
    if !is_plugin_name(&name) || name != "nvcf-worker" {
        p.push(format!(
            "metadata.name {name:?} (kubectl runs kubectl-nvcf_worker as `kubectl nvcf-worker`)"
        ));
    }
    let spec = &m["spec"];
    let version = s(&spec["version"]);
    if !is_krew_version(&version) || version != format!("v{VERSION}") {
        p.push(format!(
            "spec.version {version:?} is not v{VERSION} (Cargo.toml)"
        ));
    }
    let short = s(&spec["shortDescription"]);
    if short.is_empty() || short.chars().count() > 50 {
        p.push(format!("shortDescription {short:?}"));
    }
    let description = s(&spec["description"]);
    if description.trim().is_empty()
        || description.lines().any(|l| l.chars().count() > 80)
        || description.contains("kubectl nvcf-worker ")
        || description.contains("$ ")
    {
        p.push("description: empty, over 80 columns, or with usage examples".into());
    }
    if !s(&spec["homepage"]).starts_with("https://") {
        p.push("homepage".into());
    }
    let Some(platforms) = spec["platforms"].as_sequence() else {
        p.push("no platforms".into());
        return p;
    };
    let mut labels = Vec::new();
    for (i, pl) in platforms.iter().enumerate() {
        if !s(&pl["uri"]).starts_with("https://") {
            p.push(format!("platforms[{i}].uri {:?}", s(&pl["uri"])));
        }
        if !is_sha256(&s(&pl["sha256"])) {
            p.push(format!(
                "platforms[{i}].sha256 {:?} is not 64 lowercase hex digits",
                s(&pl["sha256"])
            ));
        }
        if s(&pl["bin"]) != "kubectl-nvcf-worker" {
            p.push(format!("platforms[{i}].bin"));
        }
        let files: Vec<(String, String)> = pl["files"]
            .as_sequence()
            .map(|f| f.iter().map(|f| (s(&f["from"]), s(&f["to"]))).collect())
            .unwrap_or_default();
        let want = [("kubectl-nvcf-worker", "."), ("LICENSE", ".")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()));
        if files != want {
            p.push(format!("platforms[{i}].files {files:?}"));
        }
        match match_labels(pl) {
            Ok(l) => labels.push(l),
            Err(e) => p.push(format!("platforms[{i}]: {e}")),
        }
    }
    // No os/arch is matched by two entries, and each shipped one by exactly one,
    // selecting on both labels, with the archive built for its target.
    for (os, arch) in KREW_PLATFORMS {
        let n = labels.iter().filter(|l| matches(l, os, arch)).count();
        if n > 1 {
            p.push(format!("{os}/{arch} is matched by {n} platforms"));
        }
    }
    // Each listed platform is one a release can ship, with its target's archive.
    for (i, l) in labels.iter().enumerate() {
        let Some((os, arch, target)) = SHIPPED.iter().find(|(os, arch, _)| matches(l, os, arch))
        else {
            p.push(format!("platforms[{i}] {l:?} is not a shipped platform"));
            continue;
        };
        if l.len() != 2 {
            p.push(format!("{os}/{arch} does not select on os and arch"));
        }
        let uri = s(&platforms[i]["uri"]);
        let want =
            format!("/releases/download/v{VERSION}/kubectl-nvcf-worker-{VERSION}-{target}.tar.gz");
        if !uri.ends_with(&want) {
            p.push(format!("{os}/{arch} uri {uri:?} does not end with {want}"));
        }
    }
    if platforms.is_empty() {
        p.push("no platforms".into());
    }
    p
}

#[test]
fn krew_manifest_is_valid() {
    let problems = krew_problems(&yaml(&root().join("krew-manifest.yaml")));
    assert!(problems.is_empty(), "{problems:#?}");
    let text = fs::read_to_string(root().join("krew-manifest.yaml")).unwrap();
    assert_eq!(yaml11_problems(&text), Vec::<String>::new());
}

/// What krew, reading YAML 1.1 (go-yaml v2 through sigs.k8s.io/yaml), would not
/// load as strings: the manifest read with kubectl's decoder (the crate's
/// transcription of go-yaml v2's resolver), every field krew types as a string.
fn yaml11_problems(text: &str) -> Vec<String> {
    let docs = kubectl_nvcf_worker::manifest::parse_stream(text.as_bytes()).unwrap();
    let m = kubectl_nvcf_worker::manifest::to_json(docs[0].view());
    let mut p = Vec::new();
    let platforms = m["spec"]["platforms"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (i, pl) in platforms.iter().enumerate() {
        for key in ["uri", "sha256", "bin"] {
            if !pl[key].is_string() {
                p.push(format!("platforms[{i}].{key} is {} to YAML 1.1", pl[key]));
            }
        }
    }
    for key in ["version", "shortDescription", "homepage"] {
        if !m["spec"][key].is_string() {
            p.push(format!("spec.{key} is not a string to YAML 1.1"));
        }
    }
    p
}

#[test]
fn krew_reads_digests_as_strings() {
    let text = fs::read_to_string(root().join("krew-manifest.yaml")).unwrap();
    let quoted = text
        .lines()
        .find(|l| l.trim_start().starts_with("sha256:"))
        .unwrap();
    // Look-alikes a YAML 1.2 reader takes as strings but YAML 1.1 does not: an
    // all-digit digest is an integer, digits with one `e` a float.
    for digest in ["0".repeat(64), format!("{}e12", "1".repeat(61))] {
        let bare = text.replace(quoted, &format!("    sha256: {digest}"));
        let problems = yaml11_problems(&bare);
        assert!(
            problems.iter().any(|p| p.contains("sha256")),
            "{digest} was taken as a string: {problems:?}"
        );
        let quoted_again = text.replace(quoted, &format!("    sha256: \"{digest}\""));
        assert_eq!(yaml11_problems(&quoted_again), Vec::<String>::new());
    }
}

#[test]
fn krew_checks_reject_what_krew_rejects() {
    assert!(is_plugin_name("nvcf-worker") && is_plugin_name("a1-b2"));
    for bad in ["nvcf_worker", "Nvcf", "-a", "a-", "a--b", "", "a/b"] {
        assert!(!is_plugin_name(bad), "{bad:?}");
    }
    assert!(is_krew_version("v0.1.0") && is_krew_version("v1.2.3-rc.1+g1"));
    for bad in ["0.1.0", "v0.1", "v01.2.3", "v1.2.x", "v"] {
        assert!(!is_krew_version(bad), "{bad:?}");
    }
    assert!(!is_sha256(&"A".repeat(64)) && !is_sha256(&"a".repeat(63)));

    let good = yaml(&root().join("krew-manifest.yaml"));
    type Edit<'a> = (&'a str, &'a dyn Fn(&mut Value));
    let edits: [Edit; 9] = [
        ("version without v", &|m| {
            m["spec"]["version"] = "0.1.0".into()
        }),
        ("other version", &|m| m["spec"]["version"] = "v9.9.9".into()),
        ("long shortDescription", &|m| {
            m["spec"]["shortDescription"] = "x".repeat(51).into()
        }),
        ("short sha256", &|m| {
            m["spec"]["platforms"][0]["sha256"] = "a".repeat(63).into()
        }),
        ("http uri", &|m| {
            let uri = m["spec"]["platforms"][0]["uri"]
                .as_str()
                .unwrap()
                .replace("https:", "http:");
            m["spec"]["platforms"][0]["uri"] = uri.into()
        }),
        ("overlapping selectors", &|m| {
            let mut other = m["spec"]["platforms"][0].clone();
            other["selector"]["matchLabels"]
                .as_mapping_mut()
                .unwrap()
                .remove("arch");
            m["spec"]["platforms"]
                .as_sequence_mut()
                .unwrap()
                .push(other);
        }),
        ("a platform no release ships", &|m| {
            m["spec"]["platforms"][0]["selector"]["matchLabels"]["os"] = "windows".into()
        }),
        ("no bin", &|m| m["spec"]["platforms"][0]["bin"] = "".into()),
        ("LICENSE not installed", &|m| {
            m["spec"]["platforms"][0]["files"]
                .as_sequence_mut()
                .unwrap()
                .pop();
        }),
    ];
    for (what, edit) in edits {
        let mut m = good.clone();
        edit(&mut m);
        assert!(!krew_problems(&m).is_empty(), "{what} was accepted");
    }
}

/// A scratch copy of what the dist script reads, so the real manifest is untouched.
fn dist_root() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(tmp.path().join("scripts")).unwrap();
    fs::copy(
        root().join("scripts/dist.sh"),
        tmp.path().join("scripts/dist.sh"),
    )
    .unwrap();
    for f in ["Cargo.toml", "LICENSE", "krew-manifest.yaml"] {
        fs::copy(root().join(f), tmp.path().join(f)).unwrap();
    }
    fs::write(tmp.path().join("README.md"), "# kubectl-nvcf-worker\n").unwrap();
    // A stand-in binary: the script packs whatever --binary names, and the real
    // one (tens of MB in debug, relinked by concurrent builds) would only make
    // the test slow and racy.
    let stub = tmp.path().join("stub/kubectl-nvcf-worker");
    fs::create_dir(stub.parent().unwrap()).unwrap();
    fs::write(&stub, "#!/bin/sh\necho stub\n").unwrap();
    fs::set_permissions(&stub, PermissionsExt::from_mode(0o755)).unwrap();
    tmp
}

fn dist(root: &Path, args: &[&str]) -> Output {
    // A script just written can be busy for a moment: another test thread's fork
    // may still hold the writer's descriptor until its exec (ETXTBSY).
    for _ in 0..50 {
        match Command::new(root.join("scripts/dist.sh"))
            .arg("--binary")
            .arg(root.join("stub/kubectl-nvcf-worker"))
            .args(args)
            .output()
        {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            other => return other.unwrap(),
        }
    }
    panic!("scripts/dist.sh stayed busy (ETXTBSY) for a second");
}

fn platform_entry<'a>(m: &'a Value, os: &str, arch: &str) -> &'a Value {
    m["spec"]["platforms"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| matches(&match_labels(p).unwrap(), os, arch))
        .unwrap()
}

#[test]
fn dist_script_packs_a_reproducible_archive_and_writes_the_host_entry() {
    let tmp = dist_root();
    let r = tmp.path();
    let before = fs::read_to_string(r.join("krew-manifest.yaml")).unwrap();
    let printed = stdout(dist(r, &[]), "dist.sh");

    let os = match std::env::consts::OS {
        "macos" => "darwin",
        os => os,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        a => a,
    };
    let target = SHIPPED
        .iter()
        .find(|s| (s.0, s.1) == (os, arch))
        .expect("the host is a shipped platform")
        .2;
    let name = format!("kubectl-nvcf-worker-{VERSION}-{target}.tar.gz");
    let archive = r.join("dist").join(&name);
    assert!(printed.contains(&format!("dist/{name}")), "{printed}");
    let bytes = fs::read(&archive).unwrap();
    let digest: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        fs::read_to_string(r.join(format!("dist/{name}.sha256"))).unwrap(),
        format!("{digest}  {name}\n"),
        "sha256sum -c format"
    );

    // Binary, LICENSE and README.md, flat, owned by root, the binary executable.
    let listing = stdout(
        Command::new("tar")
            .arg("-tvzf")
            .arg(&archive)
            .output()
            .unwrap(),
        "tar -t",
    );
    let entries: Vec<(&str, &str, &str)> = listing
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0], f[1], f[f.len() - 1])
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("-rw-r--r--", "root/root", "LICENSE"),
            ("-rw-r--r--", "root/root", "README.md"),
            ("-rwxr-xr-x", "root/root", "kubectl-nvcf-worker"),
        ],
        "{listing}"
    );
    let unpacked = r.join("unpacked");
    fs::create_dir(&unpacked).unwrap();
    stdout(
        Command::new("tar")
            .arg("-xzf")
            .arg(&archive)
            .arg("-C")
            .arg(&unpacked)
            .output()
            .unwrap(),
        "tar -x",
    );
    assert_eq!(
        fs::read(unpacked.join("LICENSE")).unwrap(),
        fs::read(root().join("LICENSE")).unwrap()
    );
    assert_eq!(
        run(unpacked.join("kubectl-nvcf-worker").to_str().unwrap(), &[]),
        "stub\n"
    );

    // Only the host entry's sha256 changed (its uri was already the right one).
    let after = fs::read_to_string(r.join("krew-manifest.yaml")).unwrap();
    let m: Value = serde_yaml::from_str(&after).unwrap();
    assert_eq!(krew_problems(&m), Vec::<String>::new());
    assert_eq!(str_at(platform_entry(&m, os, arch), &["sha256"]), digest);
    assert_eq!(before.lines().count(), after.lines().count());
    let changed: Vec<&str> = before
        .lines()
        .zip(after.lines())
        .filter(|(a, b)| a != b)
        .map(|(_, b)| b)
        .collect();
    let want = format!("    sha256: \"{digest}\"");
    assert!(
        changed.is_empty() || changed == [want.as_str()],
        "{changed:?}"
    );

    // Reproducible: packing again gives the same bytes.
    stdout(dist(r, &[]), "dist.sh again");
    assert!(
        fs::read(&archive).unwrap() == bytes,
        "packing again gave other bytes"
    );
}

#[test]
fn dist_script_adds_the_entry_of_a_newly_built_platform() {
    let tmp = dist_root();
    let r = tmp.path();
    let before: Value = yaml(&r.join("krew-manifest.yaml"));
    let listed = before["spec"]["platforms"].as_sequence().unwrap().len();
    stdout(
        dist(r, &["--target", "aarch64-apple-darwin"]),
        "dist.sh --target aarch64-apple-darwin",
    );
    let name = format!("kubectl-nvcf-worker-{VERSION}-aarch64-apple-darwin.tar.gz");
    let sha = fs::read_to_string(r.join(format!("dist/{name}.sha256"))).unwrap();
    let text = fs::read_to_string(r.join("krew-manifest.yaml")).unwrap();
    let after: Value = serde_yaml::from_str(&text).unwrap();
    assert_eq!(
        after["spec"]["platforms"].as_sequence().unwrap().len(),
        listed + 1
    );
    let entry = platform_entry(&after, "darwin", "arm64");
    assert_eq!(str_at(entry, &["sha256"]), &sha[..64]);
    assert!(str_at(entry, &["uri"]).ends_with(&format!("/v{VERSION}/{name}")));
    assert_eq!(
        platform_entry(&after, "linux", "amd64"),
        platform_entry(&before, "linux", "amd64")
    );
    assert_eq!(krew_problems(&after), Vec::<String>::new());
    assert_eq!(yaml11_problems(&text), Vec::<String>::new());

    // Packing it again updates that entry in place.
    stdout(
        dist(r, &["--target", "aarch64-apple-darwin"]),
        "dist.sh again",
    );
    assert_eq!(
        fs::read_to_string(r.join("krew-manifest.yaml")).unwrap(),
        text
    );

    // A target krew has no entry for fails and leaves the manifest alone.
    let out = dist(r, &["--target", "riscv64gc-unknown-linux-gnu"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no krew platform"));
    assert_eq!(
        fs::read_to_string(r.join("krew-manifest.yaml")).unwrap(),
        text
    );
}

#[test]
fn license_is_apache_2() {
    assert_eq!(env!("CARGO_PKG_LICENSE"), "Apache-2.0");
    let text = fs::read_to_string(root().join("LICENSE")).unwrap();
    for needle in [
        "Apache License",
        "Version 2.0, January 2004",
        "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION",
        "1. Definitions.",
        "2. Grant of Copyright License.",
        "3. Grant of Patent License.",
        "4. Redistribution.",
        "5. Submission of Contributions.",
        "6. Trademarks.",
        "7. Disclaimer of Warranty.",
        "8. Limitation of Liability.",
        "9. Accepting Warranty or Additional Liability.",
        "END OF TERMS AND CONDITIONS",
    ] {
        assert!(text.contains(needle), "LICENSE lacks {needle:?}");
    }
}

#[test]
fn catalog_metadata_describes_the_function() {
    let m = yaml(&root().join("metadata.yaml"));
    assert_eq!(str_at(&m, &["license"]), "Apache-2.0");
    assert!(str_at(&m, &["image"]).contains("kubectl-nvcf-worker"));
    assert!(!str_at(&m, &["description"]).is_empty());
    assert!(str_at(&m, &["sourceURL"]).starts_with("https://"));
    let tags: Vec<&str> = m["tags"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tags.contains(&"mutator") && tags.contains(&"validator"),
        "{tags:?}"
    );
    assert!(!m["emails"].as_sequence().unwrap().is_empty());
    let mut urls: Vec<String> = m["examplePackageURLs"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|u| {
            let u = u.as_str().unwrap();
            let dir = u.rsplit_once("/examples/").expect("URL into examples/").1;
            assert!(
                root().join("examples").join(dir).join("Kptfile").is_file(),
                "{u}"
            );
            dir.to_owned()
        })
        .collect();
    urls.sort();
    let mut dirs: Vec<String> = fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("Kptfile").is_file())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    dirs.sort();
    assert_eq!(urls, dirs, "every example package is listed");
}

/// The subcommands `--help` lists (without `help`); every one is checked below.
fn subcommands() -> Vec<String> {
    let help = run(BIN, &["--help"]);
    let list: Vec<String> = help
        .split("Commands:\n")
        .nth(1)
        .expect("a Commands section")
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .filter(|c| c != "help")
        .collect();
    for known in SUBCOMMANDS {
        assert!(
            list.iter().any(|c| c == known),
            "--help lacks {known}: {list:?}"
        );
    }
    list
}

#[test]
fn every_subcommand_help_has_an_example() {
    assert!(run(BIN, &["--help"]).contains("Example"));
    for sub in subcommands() {
        let help = run(BIN, &[&sub, "--help"]);
        assert!(
            help.contains("Example"),
            "`{sub} --help` has no example:\n{help}"
        );
    }
}

#[test]
fn version_is_the_cargo_version_under_both_names() {
    for bin in [BIN, env!("CARGO_BIN_EXE_kubectl-nvcf_worker")] {
        let out = run(bin, &["--version"]);
        assert_eq!(out, format!("kubectl nvcf-worker {VERSION}\n"), "{bin}");
    }
}

/// A real program the completion tests drive, or a clear failure: these tests
/// are what says completion works in that shell.
fn tool(name: &str, install: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name} is not installed; the completion tests run the real {name} ({install})"
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A PATH directory holding both command names (`kubectl-nvcf-worker`,
/// `kubectl-nvcf_worker`) as links to the built binary, a kubeconfig with two
/// contexts (one a colon-laden EKS-style name) whose cluster is `server`, and the
/// PATH to use.
struct ShellEnv {
    dir: tempfile::TempDir,
    path: String,
}

impl ShellEnv {
    fn new(server: &str) -> ShellEnv {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        fs::create_dir(&bin).unwrap();
        for name in ["kubectl-nvcf-worker", "kubectl-nvcf_worker"] {
            std::os::unix::fs::symlink(BIN, bin.join(name)).unwrap();
        }
        fs::write(
            dir.path().join("kubeconfig"),
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: prod-1\nclusters:\n\
                 - name: prod\n  cluster: {{server: \"{server}\"}}\n\
                 - name: arn:aws:eks:us-east-1:1:cluster/x\n  cluster: {{server: \"{server}\"}}\n\
                 users:\n- name: alice\n  user: {{token: t}}\ncontexts:\n\
                 - name: prod-1\n  context: {{cluster: prod, user: alice, namespace: team-a}}\n\
                 - name: arn:aws:eks:us-east-1:1:cluster/x\n  context: {{cluster: \"arn:aws:eks:us-east-1:1:cluster/x\", user: alice, namespace: team-b}}\n"
            ),
        )
        .unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
        ShellEnv { dir, path }
    }

    fn kubeconfig(&self) -> std::path::PathBuf {
        self.dir.path().join("kubeconfig")
    }

    fn script(&self, shell: &str) -> std::path::PathBuf {
        let path = self.dir.path().join(format!("completion.{shell}"));
        fs::write(&path, run(BIN, &["completion", shell])).unwrap();
        path
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("PATH", &self.path)
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", self.dir.path())
            .current_dir(self.dir.path());
        c
    }
}

/// An API server stand-in on loopback that answers every request with a
/// NamespaceList of `served-ns` and `kube-system` (what `-n <TAB>` asks for);
/// it serves `n` connections, then stops.
fn namespace_server(n: usize) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(n) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|r| r > 0) && line != "\r\n" {
                line.clear();
            }
            let body = r#"{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadataList","metadata":{"resourceVersion":"1"},"items":[{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":{"name":"served-ns"}},{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":{"name":"kube-system"}}]}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

/// Every long flag a subcommand's `--help` lists.
fn long_flags(sub: &str) -> Vec<String> {
    let mut flags: Vec<String> = run(BIN, &[sub, "--help"])
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        // `-f, --filename <PATH>` or `--cluster-id <ID>`: the long name.
        .filter_map(|l| l.split(", ").find(|part| part.starts_with("--")))
        .map(|f| f.split([' ', '[', '=']).next().unwrap().to_string())
        .filter(|f| f != "--help" && f != "--version")
        .collect();
    flags.dedup();
    flags
}

/// bash: the script sourced in a real interactive bash, the function that
/// `complete -p` registers called as bash calls it (COMP_WORDS split at
/// COMP_WORDBREAKS as bash splits them, COMP_CWORD, COMP_LINE, COMP_POINT).
#[test]
fn bash_completes_every_subcommand_flag_and_kubectl_value() {
    let bash = tool("bash", "apt-get install bash");
    let env = ShellEnv::new(&namespace_server(1));
    let script = env.script("bash");
    let subs = subcommands();
    // One case a line: the words bash makes of the line, `|`-separated.
    let mut cases: Vec<String> = vec![
        "kubectl-nvcf-worker|".into(),
        "kubectl-nvcf-worker|val".into(),
        "kubectl-nvcf_worker|inject|-o|".into(),
        "kubectl-nvcf-worker|list|--context|".into(),
        "kubectl-nvcf-worker|list|--context|=|p".into(),
        "kubectl-nvcf-worker|list|--context|arn|:|aws".into(),
        "kubectl-nvcf-worker|audit|-n|".into(),
        "kubectl-nvcf-worker|inject|--cluster-id|".into(),
    ];
    for sub in &subs {
        cases.push(format!("kubectl-nvcf-worker|{sub}|--"));
    }
    let mut input = format!(
        "source {}\ncomplete -p kubectl-nvcf-worker kubectl-nvcf_worker\n\
         fn=$(complete -p kubectl-nvcf-worker | sed -n 's/.*-F \\([^ ]*\\) .*/\\1/p')\n",
        script.display()
    );
    input.push_str(
        "comp() {\n  IFS='|' read -r -a COMP_WORDS <<< \"$1\"\n  \
         [[ \"$1\" == *'|' ]] && COMP_WORDS+=(\"\")\n  \
         COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n  \
         local line=\"\" w prev=\"\"\n  \
         for w in \"${COMP_WORDS[@]}\"; do\n    \
           if [[ -n \"$line\" && \"$w\" != '=' && \"$w\" != ':' && \"$prev\" != '=' && \"$prev\" != ':' ]]; then line+=' '; fi\n    \
           line+=\"$w\"; prev=\"$w\"\n  done\n  \
         COMP_LINE=\"$line\"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()\n  \
         \"$fn\" \"${COMP_WORDS[0]}\" \"${COMP_WORDS[COMP_CWORD]}\" \"${COMP_WORDS[COMP_CWORD-1]}\"\n  \
         echo \"== $1\"; printf '%s\\n' \"${COMPREPLY[@]}\"\n}\n",
    );
    for case in &cases {
        input.push_str(&format!("comp '{case}'\n"));
    }
    let mut child = env
        .command(&bash)
        .args(["--norc", "--noprofile", "-i"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("complete -o default -F _kubectl_nvcf_worker kubectl-nvcf-worker\n")
            && text.contains("-F _kubectl_nvcf_worker kubectl-nvcf_worker\n"),
        "both names registered:\n{text}\n{stderr}"
    );
    let replies = |case: &str| -> Vec<String> {
        let start = text
            .find(&format!("== {case}\n"))
            .unwrap_or_else(|| panic!("no answer for {case}:\n{text}\n{stderr}"));
        text[start..]
            .lines()
            .skip(1)
            .take_while(|l| !l.starts_with("== "))
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect()
    };
    let top = replies("kubectl-nvcf-worker|");
    for sub in &subs {
        assert!(top.contains(sub), "top level lacks {sub}: {top:?}");
    }
    assert_eq!(replies("kubectl-nvcf-worker|val"), ["validate"]);
    assert_eq!(replies("kubectl-nvcf_worker|inject|-o|"), ["yaml", "json"]);
    assert_eq!(
        replies("kubectl-nvcf-worker|list|--context|"),
        ["arn:aws:eks:us-east-1:1:cluster/x", "prod-1"]
    );
    // bash replaces only the part after `=` or `:`.
    assert_eq!(
        replies("kubectl-nvcf-worker|list|--context|=|p"),
        ["prod-1"]
    );
    assert_eq!(
        replies("kubectl-nvcf-worker|list|--context|arn|:|aws"),
        ["aws:eks:us-east-1:1:cluster/x"]
    );
    assert_eq!(
        replies("kubectl-nvcf-worker|audit|-n|"),
        ["kube-system", "served-ns"],
        "namespaces from the cluster"
    );
    assert_eq!(
        replies("kubectl-nvcf-worker|inject|--cluster-id|"),
        Vec::<String>::new()
    );
    for sub in &subs {
        let got = replies(&format!("kubectl-nvcf-worker|{sub}|--"));
        let want = long_flags(sub);
        assert!(
            !want.is_empty() || sub == "completion",
            "{sub}: no flags parsed"
        );
        for flag in &want {
            assert!(got.contains(flag), "`{sub} --<TAB>` lacks {flag}: {got:?}");
        }
    }
}

/// Lines typed into a real interactive shell on a pseudo-terminal (zsh's zpty),
/// each followed by a TAB and then ^T, a key `setup` binds to write the edited
/// line to `$OUT`: what the TAB made of each line.
fn typed_with_tab(env: &ShellEnv, shell: &str, setup: &str, lines: &[&str]) -> Vec<String> {
    let zsh = tool("zsh", "apt-get install zsh (zpty drives the terminal)");
    let buffers = env.dir.path().join("buffers");
    let _ = fs::remove_file(&buffers);
    let setup = setup.replace("$OUT", &buffers.display().to_string());
    let mut driver = format!(
        "zmodload zsh/zpty\nzpty -b z {shell}\nzpty -w z {}\n",
        shell_quote(&setup)
    );
    // The shell reads the TAB, completes, then reads ^T: wait (30 s at most) for
    // each line to be written before typing the next, however loaded the machine.
    for (i, line) in lines.iter().enumerate() {
        driver.push_str(&format!(
            "zpty -n -w z {}$'\\t'\nzpty -n -w z $'\\x14'\n\
             for t in {{1..300}}; do [[ -f {f} && $(wc -l < {f}) -ge {n} ]] && break; sleep 0.1; zpty -r -t z junk 2>/dev/null; done\n",
            shell_quote(line),
            f = buffers.display(),
            n = i + 1
        ));
    }
    driver.push_str("zpty -n -w z $'exit\\n'\nsleep 0.3\nzpty -d z\n");
    let out = env
        .command(&zsh)
        .args(["-f", "-c", &driver])
        .output()
        .unwrap();
    let got = fs::read_to_string(&buffers).unwrap_or_else(|e| {
        panic!(
            "{shell} wrote no line ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    got.lines().map(String::from).collect()
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// What a TAB makes of each line, typed into the shell: completions that have one
/// candidate, so the line shows it.
const TAB_CASES: [(&str, &str); 8] = [
    ("kubectl-nvcf-worker inj", "kubectl-nvcf-worker inject "),
    (
        "kubectl-nvcf-worker inject --clu",
        "kubectl-nvcf-worker inject --cluster-id ",
    ),
    (
        "kubectl-nvcf_worker inject -o js",
        "kubectl-nvcf_worker inject -o json ",
    ),
    (
        "kubectl-nvcf-worker list --context=pr",
        "kubectl-nvcf-worker list --context=prod-1 ",
    ),
    (
        "kubectl-nvcf-worker list --context arn",
        "kubectl-nvcf-worker list --context arn:aws:eks:us-east-1:1:cluster/x ",
    ),
    (
        "kubectl-nvcf-worker audit -n ser",
        "kubectl-nvcf-worker audit -n served-ns ",
    ),
    (
        "kubectl-nvcf-worker cleanup --yes --min",
        "kubectl-nvcf-worker cleanup --yes --min-age ",
    ),
    (
        "kubectl-nvcf-worker inject -f dep",
        "kubectl-nvcf-worker inject -f deploy.yaml ",
    ),
];

fn check_tab_cases(got: Vec<String>) {
    let want: Vec<&str> = TAB_CASES.iter().map(|(_, w)| *w).collect();
    assert_eq!(got, want);
}

/// zsh: a real interactive zsh on a pseudo-terminal, compinit, the script
/// sourced, each line completed by a real TAB (zle's completion widget).
#[test]
fn zsh_completes_subcommands_flags_and_kubectl_values() {
    let zsh = tool("zsh", "apt-get install zsh");
    let env = ShellEnv::new(&namespace_server(1));
    fs::write(env.dir.path().join("deploy.yaml"), "").unwrap();
    let script = env.script("zsh");
    let setup = format!(
        "autoload -Uz compinit && compinit -u -D; source {}; \
         dump() {{ print -r -- \"$BUFFER\" >> $OUT; BUFFER=; }}; zle -N dump; bindkey \"^T\" dump",
        script.display()
    );
    let lines: Vec<&str> = TAB_CASES.iter().map(|(l, _)| *l).collect();
    check_tab_cases(typed_with_tab(
        &env,
        &format!("{zsh} -f -i"),
        &setup,
        &lines,
    ));
}

/// bash: the same lines completed by a real TAB in a real interactive bash on a
/// pseudo-terminal (readline calls the function the script registers).
#[test]
fn bash_completes_on_a_real_tab() {
    let bash = tool("bash", "apt-get install bash");
    let env = ShellEnv::new(&namespace_server(1));
    fs::write(env.dir.path().join("deploy.yaml"), "").unwrap();
    let script = env.script("bash");
    let setup = format!(
        "source {}; bind -x '\"\\C-t\": printf \"%s\\n\" \"$READLINE_LINE\" >> $OUT; READLINE_LINE='",
        script.display()
    );
    let lines: Vec<&str> = TAB_CASES.iter().map(|(l, _)| *l).collect();
    check_tab_cases(typed_with_tab(
        &env,
        &format!("{bash} --norc --noprofile -i"),
        &setup,
        &lines,
    ));
}

/// fish: a real fish, the script sourced, `complete -C LINE` (fish's own
/// completion of LINE, descriptions after a TAB).
#[test]
fn fish_completes_subcommands_flags_and_kubectl_values() {
    let fish = tool("fish", "apt-get install fish");
    let env = ShellEnv::new(&namespace_server(1));
    let script = env.script("fish");
    let ask = |line: &str| -> Vec<String> {
        let out = env
            .command(&fish)
            .args(["--no-config", "-c"])
            .arg(format!("source {}; complete -C '{line}'", script.display()))
            .output()
            .unwrap();
        stdout(out, &format!("fish complete -C {line:?}"))
            .lines()
            .map(|l| l.split('\t').next().unwrap().to_string())
            .collect()
    };
    let top = ask("kubectl-nvcf-worker ");
    for sub in subcommands() {
        assert!(top.contains(&sub), "fish top level lacks {sub}: {top:?}");
        let flags = ask(&format!("kubectl-nvcf-worker {sub} --"));
        for flag in long_flags(&sub) {
            assert!(
                flags.contains(&flag),
                "fish `{sub} --` lacks {flag}: {flags:?}"
            );
        }
    }
    assert_eq!(ask("kubectl-nvcf_worker inject -o "), ["json", "yaml"]);
    assert_eq!(
        ask("kubectl-nvcf-worker list --context "),
        ["arn:aws:eks:us-east-1:1:cluster/x", "prod-1"]
    );
    assert_eq!(
        ask("kubectl-nvcf-worker list --context=p"),
        ["--context=prod-1"]
    );
    assert_eq!(
        ask("kubectl-nvcf-worker describe -n "),
        ["kube-system", "served-ns"]
    );
    // A path flag completes files.
    fs::write(env.dir.path().join("deploy.yaml"), "").unwrap();
    assert!(ask("kubectl-nvcf-worker inject -f dep").contains(&"deploy.yaml".to_string()));
}

/// Offline (the cluster refuses), `-n <TAB>` offers the namespaces the
/// kubeconfig's contexts name; `--kubeconfig` typed earlier is the one read.
#[test]
fn namespaces_fall_back_to_the_kubeconfig_offline() {
    let env = ShellEnv::new("http://127.0.0.1:1");
    let ask = |args: &[&str]| {
        stdout(
            env.command(BIN)
                .arg("__complete")
                .args(args)
                .output()
                .unwrap(),
            "__complete",
        )
    };
    assert_eq!(ask(&["list", "-n", ""]), "team-a\nteam-b\n:4\n");
    let other = env.dir.path().join("other");
    fs::write(
        &other,
        "apiVersion: v1\nkind: Config\ncontexts:\n- name: lab\n  context: {cluster: c, namespace: lab-ns}\n",
    )
    .unwrap();
    let other = other.to_str().unwrap();
    assert_eq!(
        ask(&["list", "--kubeconfig", other, "--context", ""]),
        "lab\n:4\n"
    );
    assert_eq!(
        ask(&["list", &format!("--kubeconfig={other}"), "-n", ""]),
        "lab-ns\n:4\n"
    );
}

/// kubectl's own completion of the plugin (`kubectl __complete nvcf-worker ...`,
/// what kubectl's completion scripts ask), after a real `krew install` of the
/// release archive into a scratch KREW_ROOT: nothing before
/// `kubectl nvcf-worker completion kubectl`, the plugin's words after it.
#[test]
fn krew_install_then_kubectl_completes_the_plugin() {
    let kubectl = tool("kubectl", "kubectl 1.26+ is part of the machine image");
    let built = Command::new(root().join("scripts/build-krew.sh"))
        .output()
        .unwrap();
    let krew = stdout(built, "scripts/build-krew.sh").trim().to_string();
    let tmp = dist_root();
    // The real binary this time: krew installs what the archive holds. Without
    // its debug info (as the release profile strips it): packing 160 MB of
    // debug build would take most of the test's time.
    let strip = tool("strip", "binutils");
    let stripped = Command::new(strip)
        .args(["--strip-debug", "-o"])
        .arg(tmp.path().join("stub/kubectl-nvcf-worker"))
        .arg(BIN)
        .output()
        .unwrap();
    stdout(stripped, "strip");
    let packed = dist(tmp.path(), &[]);
    let printed = stdout(packed, "dist.sh");
    let archive = printed
        .lines()
        .find(|l| l.ends_with(".tar.gz"))
        .unwrap_or_else(|| panic!("dist.sh named no archive: {printed}"))
        .to_string();
    let krew_root = tmp.path().join("krew");
    // PATH holds krew's bin and kubectl alone: a `kubectl_complete-nvcf_worker`
    // that `cargo install` or anything else put on the user's PATH would make
    // "krew alone links no helper" fail for a reason not the plugin's.
    let tools = tmp.path().join("path");
    fs::create_dir_all(&tools).unwrap();
    std::os::unix::fs::symlink(&kubectl, tools.join("kubectl")).unwrap();
    let path = format!("{}:{}", krew_root.join("bin").display(), tools.display());
    let with_env = |program: &str| {
        let mut c = Command::new(program);
        c.env("KREW_ROOT", &krew_root)
            .env("PATH", &path)
            .env("HOME", tmp.path())
            .env("KUBECONFIG", tmp.path().join("no-kubeconfig"))
            .current_dir(tmp.path());
        c
    };
    let installed = with_env(&krew)
        .arg("install")
        .arg(format!(
            "--manifest={}",
            tmp.path().join("krew-manifest.yaml").display()
        ))
        .arg(format!("--archive={}", tmp.path().join(&archive).display()))
        .output()
        .unwrap();
    stdout(installed, "krew install");
    assert!(
        krew_root.join("bin/kubectl-nvcf_worker").exists(),
        "krew links the plugin as kubectl-nvcf_worker"
    );
    let complete = |words: &[&str]| {
        stdout(
            with_env(&kubectl)
                .arg("__complete")
                .arg("nvcf-worker")
                .args(words)
                .output()
                .unwrap(),
            "kubectl __complete",
        )
    };
    let before = complete(&["inject", "--cl"]);
    assert!(
        !before.contains("--cluster-id"),
        "krew alone links no helper: {before}"
    );
    let linked = stdout(
        with_env(&kubectl)
            .args(["nvcf-worker", "completion", "kubectl"])
            .output()
            .unwrap(),
        "kubectl nvcf-worker completion kubectl",
    );
    let link = krew_root.join("bin/kubectl_complete-nvcf_worker");
    assert!(linked.contains(&link.display().to_string()), "{linked}");
    assert_eq!(
        fs::read_link(&link).unwrap(),
        Path::new("kubectl-nvcf_worker")
    );
    let after = complete(&["inject", "--cl"]);
    assert!(after.starts_with("--cluster-id\t"), "{after}");
    let top = complete(&[""]);
    for sub in subcommands() {
        assert!(
            top.contains(&format!("{sub}\t")),
            "kubectl nvcf-worker <TAB> lacks {sub}: {top}"
        );
    }
    // Run again, it replaces its link; elsewhere than PATH, --dir names the place.
    stdout(
        with_env(&kubectl)
            .args(["nvcf-worker", "completion", "kubectl"])
            .output()
            .unwrap(),
        "completion kubectl again",
    );
    let out = with_env(BIN)
        .args(["completion", "kubectl", "--dir", "/nonexistent"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a directory without the plugin is a usage error"
    );
}

#[test]
fn completion_scripts_parse_and_unknown_shells_are_refused() {
    let bash = run(BIN, &["completion", "bash"]);
    let file = tempfile::NamedTempFile::new().unwrap();
    fs::write(file.path(), &bash).unwrap();
    stdout(
        Command::new("bash")
            .arg("-n")
            .arg(file.path())
            .output()
            .unwrap(),
        "bash -n",
    );
    // clap's static scripts (elvish, powershell) name their states and branches
    // alike: after the command kubectl-nvcf-worker, never `kubectl nvcf-worker`.
    for shell in ["elvish", "powershell"] {
        let script = run(BIN, &["completion", shell]);
        assert!(!script.contains("kubectl nvcf-worker;"), "{shell}");
        assert!(
            script.contains("kubectl-nvcf-worker;inject"),
            "{shell}: {}",
            &script[..script.len().min(2000)]
        );
        assert!(script.contains("cluster-id"), "{shell}");
    }
    let out = Command::new(BIN)
        .args(["completion", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn man_page_is_roff_with_every_subcommand() {
    let page = run(BIN, &["man"]);
    assert!(
        page.starts_with(".ie") || page.starts_with(".TH"),
        "{}",
        &page[..80.min(page.len())]
    );
    assert!(page.contains("\n.TH "), "no .TH header");
    assert!(page.contains(".SH NAME") && page.contains(".SH SYNOPSIS"));
    assert!(page.contains(&VERSION.to_string()));
    for sub in subcommands() {
        // roff escapes hyphens: install\-kustomize\-plugin
        let roff = format!("\\fB{}\\fR", sub.replace('-', "\\-"));
        assert!(page.contains(&roff), "man page lacks {roff}");
    }
    // A page alone on stdout refers to no other page.
    assert!(
        !page.contains("(1)"),
        "the page names pages it does not bring"
    );
}

/// `man --dir` writes the main page and a page per subcommand, and every page
/// one of them names is among them.
#[test]
fn man_dir_writes_every_page_it_names() {
    let dir = tempfile::tempdir().unwrap();
    run(BIN, &["man", "--dir", dir.path().to_str().unwrap()]);
    let written: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        written.contains(&"kubectl-nvcf-worker.1".to_string()),
        "{written:?}"
    );
    for sub in subcommands() {
        let page = format!("kubectl-nvcf-worker-{sub}.1");
        assert!(written.contains(&page), "{page} not written: {written:?}");
    }
    for file in &written {
        let text = fs::read_to_string(dir.path().join(file)).unwrap();
        let unescaped = text.replace("\\-", "-");
        for (i, _) in unescaped.match_indices("(1)") {
            let name = unescaped[..i]
                .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .next()
                .unwrap();
            assert!(
                written.contains(&format!("{name}.1")),
                "{file} names {name}(1), which is not written"
            );
        }
    }
}

/// The YAML blocks of README's pre-commit section, in order.
fn readme_pre_commit_blocks() -> Vec<String> {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("\n### pre-commit\n")
        .nth(1)
        .expect("README has a pre-commit section")
        .split("\n### ")
        .next()
        .unwrap()
        .to_string();
    section
        .split("```yaml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap().to_string())
        .collect()
}

/// A scratch git repository holding `identity.yaml` (the trio) and `web.yaml`
/// (the workload), both what `inject --naming per-workload` writes (the account is
/// web's own, so another workload running as it is a forgery), committed without hooks.
fn app_repo(env: &ShellEnv, name: &str) -> std::path::PathBuf {
    let repo = env.dir.path().join(name);
    fs::create_dir(&repo).unwrap();
    let app = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: team-a\n  \
               labels: {nvcf.io/worker: \"true\"}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: web}}\n  \
               template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n";
    fs::write(repo.join("app.yaml"), app).unwrap();
    let injected = stdout(
        env.command(BIN)
            .args([
                "inject",
                "--naming",
                "per-workload",
                "-f",
                "app.yaml",
                "--cluster-id",
                "prod-1",
            ])
            .current_dir(&repo)
            .output()
            .unwrap(),
        "inject",
    );
    fs::remove_file(repo.join("app.yaml")).unwrap();
    let docs: Vec<&str> = injected.split("\n---\n").collect();
    assert_eq!(docs.len(), 4, "{injected}");
    assert!(docs[3].contains("kind: Deployment"), "{injected}");
    fs::write(repo.join("identity.yaml"), docs[..3].join("\n---\n") + "\n").unwrap();
    fs::write(repo.join("web.yaml"), docs[3]).unwrap();
    git(env, &repo, &["init", "-q", "-b", "main"]);
    git(env, &repo, &["add", "identity.yaml", "web.yaml"]);
    git(env, &repo, &["commit", "-q", "-m", "app"]);
    repo
}

fn git(env: &ShellEnv, dir: &Path, args: &[&str]) -> String {
    stdout(git_output(env, dir, args), &format!("git {args:?}"))
}

fn git_output(env: &ShellEnv, dir: &Path, args: &[&str]) -> Output {
    env.command("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .env("PRE_COMMIT_HOME", env.dir.path().join("pre-commit-cache"))
        .current_dir(dir)
        .output()
        .unwrap()
}

/// A commit of `web.yaml` alone with its `replicas` changed.
fn commit_replicas(env: &ShellEnv, repo: &Path, replicas: u32) -> Output {
    let web = fs::read_to_string(repo.join("web.yaml")).unwrap();
    let changed = web
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("replicas:") {
                format!("  replicas: {replicas}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(changed, web.trim_end(), "web.yaml has a replicas line");
    fs::write(repo.join("web.yaml"), changed + "\n").unwrap();
    git(env, repo, &["add", "web.yaml"]);
    git_output(env, repo, &["commit", "-m", "scale web"])
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// README's remote hook through real pre-commit and git: the config as README
/// shows it (its URL replaced by a local clone of this repository's hooks, on a
/// `main` branch), `rev` pinned by README's `autoupdate` command, the git hook
/// installed; then commits that stage only some files.
#[test]
fn pre_commit_judges_a_partial_commit_with_the_trio_it_relies_on() {
    tool("git", "apt-get install git");
    tool("pre-commit", "python3 -m pip install pre-commit");
    let env = ShellEnv::new("http://127.0.0.1:1");
    // The hook repository: this checkout's hook files, committed.
    let hooks = env.dir.path().join("hooks");
    fs::create_dir_all(hooks.join("scripts")).unwrap();
    fs::copy(
        root().join(".pre-commit-hooks.yaml"),
        hooks.join(".pre-commit-hooks.yaml"),
    )
    .unwrap();
    let script = hooks.join("scripts/pre-commit-validate-repo.sh");
    fs::copy(root().join("scripts/pre-commit-validate-repo.sh"), &script).unwrap();
    fs::set_permissions(&script, PermissionsExt::from_mode(0o755)).unwrap();
    git(&env, &hooks, &["init", "-q", "-b", "main"]);
    git(&env, &hooks, &["add", "."]);
    git(&env, &hooks, &["commit", "-q", "-m", "hooks"]);
    let sha = git(&env, &hooks, &["rev-parse", "HEAD"]).trim().to_string();

    let blocks = readme_pre_commit_blocks();
    assert_eq!(blocks.len(), 2, "README's pre-commit section: {blocks:?}");
    let url = "https://github.com/nvidia/kubectl-nvcf-worker";
    assert!(
        blocks[0].contains(url) && blocks[0].contains("rev: main"),
        "{}",
        blocks[0]
    );
    let repo = app_repo(&env, "app");
    fs::write(
        repo.join(".pre-commit-config.yaml"),
        blocks[0].replace(url, hooks.to_str().unwrap()),
    )
    .unwrap();
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    for command in [
        "pre-commit autoupdate --bleeding-edge --freeze",
        "pre-commit install",
    ] {
        assert!(
            readme.contains(&format!("\n{command}\n")),
            "README shows `{command}`"
        );
        let words: Vec<&str> = command.split(' ').collect();
        let out = env
            .command(words[0])
            .args(&words[1..])
            .env("PRE_COMMIT_HOME", env.dir.path().join("pre-commit-cache"))
            .current_dir(&repo)
            .output()
            .unwrap();
        stdout(out, command);
    }
    let config = fs::read_to_string(repo.join(".pre-commit-config.yaml")).unwrap();
    assert!(
        config.contains(&format!("rev: {sha} ")) && !config.contains("rev: main"),
        "autoupdate pinned the commit: {config}"
    );
    git(&env, &repo, &["add", ".pre-commit-config.yaml"]);
    let first = git_output(&env, &repo, &["commit", "-m", "hooks"]);
    assert!(first.status.success(), "{}", text(&first));
    assert!(
        text(&first).contains("NVCF worker identity guard (whole repository)"),
        "{}",
        text(&first)
    );

    // Only web.yaml staged: the trio in the unchanged identity.yaml counts.
    let partial = commit_replicas(&env, &repo, 3);
    assert!(partial.status.success(), "{}", text(&partial));
    assert!(text(&partial).contains("Passed"), "{}", text(&partial));

    // A forged identity: another workload takes web's account.
    let web = fs::read_to_string(repo.join("web.yaml")).unwrap();
    fs::write(
        repo.join("forged.yaml"),
        web.replace("name: web\n", "name: thief\n"),
    )
    .unwrap();
    git(&env, &repo, &["add", "forged.yaml"]);
    let forged = git_output(&env, &repo, &["commit", "-m", "forged"]);
    assert!(!forged.status.success(), "{}", text(&forged));
    assert!(text(&forged).contains("NVW101"), "{}", text(&forged));
    git(&env, &repo, &["rm", "-q", "--cached", "forged.yaml"]);
    fs::remove_file(repo.join("forged.yaml")).unwrap();

    // The index decides: a trio no longer tracked (the file still on disk) is gone.
    git(&env, &repo, &["rm", "-q", "--cached", "identity.yaml"]);
    let untracked = commit_replicas(&env, &repo, 4);
    assert!(!untracked.status.success(), "{}", text(&untracked));
    assert!(text(&untracked).contains("NVW101"), "{}", text(&untracked));
    git(&env, &repo, &["add", "identity.yaml"]);
    let back = git_output(&env, &repo, &["commit", "-m", "scale web"]);
    assert!(back.status.success(), "{}", text(&back));

    // The staged-files hook fails the same partial commit: why the repo hook exists.
    let staged_only = app_repo(&env, "staged-only");
    fs::write(
        staged_only.join(".pre-commit-config.yaml"),
        format!(
            "repos:\n  - repo: {}\n    rev: {sha}\n    hooks:\n      - id: nvcf-worker-validate-system\n",
            hooks.display()
        ),
    )
    .unwrap();
    stdout(
        env.command("pre-commit")
            .arg("install")
            .env("PRE_COMMIT_HOME", env.dir.path().join("pre-commit-cache"))
            .current_dir(&staged_only)
            .output()
            .unwrap(),
        "pre-commit install",
    );
    git(&env, &staged_only, &["add", ".pre-commit-config.yaml"]);
    git(&env, &staged_only, &["commit", "-q", "-m", "hooks"]);
    let out = commit_replicas(&env, &staged_only, 3);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("NVW101"), "{}", text(&out));
}

/// README's `repo: local` block verbatim through real pre-commit and git.
#[test]
fn pre_commit_local_hook_from_readme_runs_the_installed_binary() {
    tool("git", "apt-get install git");
    tool("pre-commit", "python3 -m pip install pre-commit");
    let env = ShellEnv::new("http://127.0.0.1:1");
    let blocks = readme_pre_commit_blocks();
    let local = blocks
        .iter()
        .find(|b| b.contains("repo: local"))
        .expect("README shows a repo: local hook");
    let repo = app_repo(&env, "app");
    // README's block reads deploy/: move the manifests there.
    fs::create_dir(repo.join("deploy")).unwrap();
    git(&env, &repo, &["mv", "identity.yaml", "web.yaml", "deploy/"]);
    git(&env, &repo, &["commit", "-q", "-m", "deploy/"]);
    fs::write(repo.join(".pre-commit-config.yaml"), local).unwrap();
    stdout(
        env.command("pre-commit")
            .arg("install")
            .env("PRE_COMMIT_HOME", env.dir.path().join("pre-commit-cache"))
            .current_dir(&repo)
            .output()
            .unwrap(),
        "pre-commit install",
    );
    git(&env, &repo, &["add", ".pre-commit-config.yaml"]);
    git(&env, &repo, &["commit", "-q", "-m", "hooks"]);
    let web = repo.join("deploy/web.yaml");
    let text_before = fs::read_to_string(&web).unwrap();
    fs::write(&web, text_before.replace("replicas: 1", "replicas: 2")).unwrap();
    git(&env, &repo, &["add", "deploy/web.yaml"]);
    let partial = git_output(&env, &repo, &["commit", "-m", "scale"]);
    assert!(partial.status.success(), "{}", text(&partial));
    assert!(
        text(&partial).contains("NVCF worker identity guard"),
        "{}",
        text(&partial)
    );
    fs::write(
        repo.join("deploy/forged.yaml"),
        text_before.replace("name: web\n", "name: thief\n"),
    )
    .unwrap();
    git(&env, &repo, &["add", "deploy/forged.yaml"]);
    let forged = git_output(&env, &repo, &["commit", "-m", "forged"]);
    assert!(!forged.status.success(), "{}", text(&forged));
    assert!(text(&forged).contains("NVW101"), "{}", text(&forged));
}
