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

#[test]
fn completions_cover_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let script = run(BIN, &["completion", shell]);
        for sub in subcommands() {
            assert!(script.contains(&sub), "{shell} completion lacks {sub}");
        }
        assert!(
            script.contains("cluster-id"),
            "{shell} completion lacks --cluster-id"
        );
    }
    // The bash script is valid bash and registers the completion function.
    let bash = run(BIN, &["completion", "bash"]);
    assert!(bash.contains("complete -F"), "{bash}");
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
