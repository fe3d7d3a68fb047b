//! The KRM function face: a ResourceList on stdin, a ResourceList on stdout
//! (KRM Functions Specification), and kustomize's legacy exec-plugin contract.
//! Both only pick the pipeline's loader, processor and sink.

use std::io::Write;

use crate::config::{Config, Mode};
use crate::error::{Error, Exit, Result};
use crate::guard;
use crate::manifest::batch::{Batch, Source, SourceKind};
use crate::manifest::read::Evict;
use crate::manifest::read::{self, item_problems};
use crate::manifest::{parse_stream, Document, Edited};
use crate::pipeline::{load, sink, Memory, Processor, Run};
use crate::report::{self, Finding, Location};

pub use crate::pipeline::load::API_VERSIONS;

/// What a function run produced: bytes for stdout and how it exits.
pub struct FnOutput {
    pub stdout: Vec<u8>,
    pub exit: Exit,
}

/// Runs the function on a ResourceList (with a library caller's run: see
/// `run_resource_list_with`).
pub fn run_resource_list(input: &[u8]) -> Result<FnOutput> {
    run_resource_list_with(&Run::default(), input)
}

/// Runs the function on a ResourceList. Input so broken that no ResourceList can be
/// echoed is an `Err`; everything else is answered with a ResourceList carrying
/// `results`, items unchanged on error. Exits 2 for a mistake in the
/// functionConfig, 1 for any other error result.
pub fn run_resource_list_with(run: &Run, input: &[u8]) -> Result<FnOutput> {
    let mut stdout = Vec::new();
    let exit = run_resource_list_to(run, input.to_vec(), &mut stdout)?;
    Ok(FnOutput { stdout, exit })
}

/// `run_resource_list_with`, the answer written to `out`. With `Memory::Evict` a
/// ResourceList laid out as kpt writes it has its items read, judged, edited and
/// written as the documents of a stream, with `inject`'s memory strategy, and
/// the input is dropped once they are read; any other (and any in error before
/// its items are processed) is read as one tree, the plain form, which writes
/// the same bytes.
pub fn run_resource_list_to(run: &Run, input: Vec<u8>, out: &mut dyn Write) -> Result<Exit> {
    let mut input = input;
    if run.memory == Memory::Evict {
        if let Some(laid) = load::lay_out_resource_list(&input) {
            match run_items(run, laid, input, out)? {
                Ok(exit) => return Ok(exit),
                Err(given_back) => input = given_back,
            }
        }
    }
    let answer = run_tree(run, &input)?;
    out.write_all(&answer.stdout)
        .map_err(|e| Error::io("<stdout>", e))?;
    Ok(answer.exit)
}

/// The function on the items of a laid out ResourceList read as a stream, or the
/// input given back (nothing written) when they must be read as one tree: a
/// functionConfig in error, an item that does not read alone, an edited item that
/// cannot be spliced, an edited item with anchors (no aliases) where another has
/// aliases or merge keys (the tree writes the whole ResourceList anew then).
/// Items in error are reported here, as the tree reports them.
fn run_items(
    run: &Run,
    mut laid: load::Laid,
    input: Vec<u8>,
    out: &mut dyn Write,
) -> Result<std::result::Result<Exit, Vec<u8>>> {
    let Ok(cfg) = Config::from_node(laid.shell.view().get("functionConfig")) else {
        return Ok(Err(input));
    };
    let processor = Processor::for_config(&cfg);
    if processor.ready().is_err() {
        return Ok(Err(input));
    }
    let evict = |d: &mut Document| processor.evict(d);
    let evict: Option<Evict> = processor.evicts().then_some(&evict);
    // Its items are in the stream's text once cut, the rest in the shell's: the
    // input goes before the items are read (and edited, as they are read).
    if !laid.cut_items(&input) {
        return Ok(Err(input));
    }
    drop(input);
    let Some(items) = load::read_items(&mut laid, evict, run.workers) else {
        return Ok(Err(laid.input()));
    };
    // Items in error: reported as the tree path reports them, nothing processed,
    // the items written back as they came.
    let problems = item_findings(&items);
    if !problems.is_empty() {
        sink::resource_list_items(&laid, None, &problems, out)?;
        run.release(items);
        return Ok(Ok(Exit::Problem));
    }
    let mut batch = Batch::new(vec![items]);
    batch.workers = run.workers;
    // Written from the documents' text: edited documents may be written as they go.
    batch.freeze = evict.is_some();
    let mut findings = processor.process(&mut batch).krm_results();
    // Where an item has aliases or merge keys the tree path edits the whole
    // ResourceList expanded, and writes it anew when an item it changed has
    // anchors but no aliases (`refs::item_refs`).
    let anchored = |d: &Document| {
        d.text.is_some()
            && !matches!(d.edited, Edited::No)
            && laid.anchored.binary_search(&(d.index as u32)).is_ok()
    };
    if !laid.refs.is_empty() && batch.sources[0].docs.iter().any(anchored) {
        run.release(batch);
        return Ok(Err(laid.input()));
    }
    // An edited item with lines left of its others (`Laid::write_item`) or in
    // flow style is written as the whole ResourceList's splice writes it only there.
    let elsewhere = (batch.sources[0].docs.iter()).any(|d| {
        d.text.is_some() && !matches!(d.edited, Edited::No) && laid.edits_elsewhere(d.index)
    });
    if elsewhere || !sink::items_spliced(&mut batch.sources[0], &laid.refs) {
        run.release(batch);
        return Ok(Err(laid.input()));
    }
    let exit = match report::has_errors(&findings) {
        true => Exit::Problem,
        false => Exit::Success,
    };
    // As in `run_tree`: lines count in what kpt built (here, in the items alone).
    for f in &mut findings {
        f.location.line = None;
    }
    // On an error the items go back as they came (inject edited nothing,
    // uninject's edits are dropped).
    let items = (exit == Exit::Success).then(|| &batch.sources[0]);
    sink::resource_list_items(&laid, items, &findings, out)?;
    run.release(batch);
    Ok(Ok(exit))
}

/// What `run_tree` reports of items that are no objects (`item_problems`), from
/// the items read as a stream: the same findings, in item order, lines dropped.
fn item_findings(items: &Source) -> Vec<Finding> {
    let problem = |d: &Document| {
        // (An item dropped as read had no problem.)
        let problem = (!d.evicted).then(|| read::resource_list_item_problem(d.view()));
        let (_, p) = problem.flatten()?;
        Some(decode_finding(format!("items[{}]: {p}", d.index), None))
    };
    items.docs.iter().filter_map(problem).collect()
}

/// A finding of an item that is no object, at `line` in the ResourceList.
fn decode_finding(problem: String, line: Option<u32>) -> Finding {
    Finding::error(problem).rule(guard::DECODE).at(Location {
        file: None,
        index: None,
        line,
    })
}

/// The function on a ResourceList read as one tree.
fn run_tree(run: &Run, input: &[u8]) -> Result<FnOutput> {
    let doc = load::resource_list(input)?;
    let root = doc.view();
    let mut findings: Vec<Finding> = item_problems(root, SourceKind::ResourceList)
        .map(|(line, problem)| decode_finding(problem, Some(line)))
        .collect();
    let config = Config::from_node(root.get("functionConfig"));
    // Uninject edits as it goes and judges its output after: on a finding the
    // items go back as they came (inject plans first and edits nothing then).
    let as_read = matches!(&config, Ok(c) if c.mode == Mode::Uninject).then(|| doc.clone());
    let mut batch = Batch::new(vec![Source {
        name: crate::manifest::read::STDIN.into(),
        kind: SourceKind::ResourceList,
        docs: vec![doc],
    }]);
    batch.workers = run.workers;
    let mut exit = Exit::Success;
    let ready = config.map_err(Error::from).and_then(|cfg| {
        Processor::for_config(&cfg).ready()?;
        Ok(cfg)
    });
    match ready {
        Err(e) => {
            findings.push(Finding::error(e.to_string()));
            exit = e.exit();
        }
        Ok(_) if report::has_errors(&findings) => {}
        Ok(cfg) => findings.extend(
            Processor::for_config(&cfg)
                .process(&mut batch)
                .krm_results(),
        ),
    }
    if exit == Exit::Success && report::has_errors(&findings) {
        exit = Exit::Problem;
    }
    // Lines here count inside the ResourceList kpt built, not in the user's file:
    // the file, index and field path locate a result; a wrong line would mislead.
    for f in &mut findings {
        f.location.line = None;
    }
    let mut doc = batch.sources.remove(0).docs.remove(0);
    if let (Some(as_read), Exit::Problem) = (as_read, exit) {
        doc = as_read;
    }
    let (stdout, doc) = sink::resource_list(doc, &findings);
    run.release(doc);
    Ok(FnOutput { stdout, exit })
}

/// kustomize's legacy exec plugin: config file path as argv[1], a plain YAML stream
/// on stdin. As a transformer it writes the transformed stream; as a validator it
/// prints nothing on success (kustomize refuses any output from a validator, even
/// its input echoed) and its findings on stderr.
pub fn run_legacy_plugin(
    run: &Run,
    config_path: &str,
    input: Vec<u8>,
    stderr: &mut dyn Write,
) -> Result<FnOutput> {
    let config_bytes = std::fs::read(config_path).map_err(|e| Error::io(config_path, e))?;
    let config_docs = parse_stream(&config_bytes).map_err(|e| Error::Yaml {
        file: config_path.into(),
        doc: e.index + 1,
        source: e.error,
    })?;
    let cfg = Config::from_node(
        config_docs
            .iter()
            .find(|d| !d.is_empty())
            .map(Document::view),
    )?;
    let processor = Processor::for_config(&cfg);
    processor.ready()?;
    let mut batch = Batch::new(vec![load::stream(input, run.workers)?]);
    batch.workers = run.workers;
    if cfg.mode == Mode::Validate {
        complete_kustomize_renames(&mut batch.sources[0].docs);
    }
    let mut findings = processor.process(&mut batch).findings;
    // Lines would count in kustomize's temporary stream, not in any file of the
    // user's: the resource and field locate a finding.
    for f in &mut findings {
        f.location.file = None;
        f.location.line = None;
    }
    for f in &findings {
        writeln!(stderr, "{}", f.to_text()).map_err(|e| Error::io("<stderr>", e))?;
    }
    if report::has_errors(&findings) {
        return Err(Error::reported(&findings));
    }
    let stdout = match cfg.mode {
        Mode::Validate => Vec::new(),
        Mode::Inject | Mode::Uninject => sink::render_stream(&batch),
    };
    run.release(batch);
    Ok(FnOutput {
        stdout,
        exit: Exit::Success,
    })
}

/// The annotation kustomize keeps an object's earlier names in while it builds.
const KUSTOMIZE_PREVIOUS_NAMES: &str = "internal.config.kubernetes.io/previousNames";

/// kustomize runs a kustomization's validators after its `namePrefix` and
/// `nameSuffix` renamed objects but before it carries the renames over to the
/// references (its name-reference fix-up comes at the end of the build): a
/// validator there sees `ServiceAccount/prod-nvcf-worker-web` and a pod still
/// naming `nvcf-worker-web`. Each renamed object carries its earlier names in
/// `KUSTOMIZE_PREVIOUS_NAMES`; completing the renames in the references that
/// name a ServiceAccount or a Role (a pod spec's account, a binding's `roleRef`
/// and ServiceAccount subjects), as kustomize will, lets the guard judge the
/// output the build will have, not a build half done.
fn complete_kustomize_renames(docs: &mut [Document]) {
    use std::collections::HashMap;
    type Key = (String, String, String); // kind, namespace, earlier name
    let namespace = |n: &crate::manifest::Node| {
        n.str_at(&["metadata", "namespace"])
            .unwrap_or("")
            .to_string()
    };
    let mut renamed: HashMap<Key, String> = HashMap::new();
    for d in docs.iter().filter(|d| !d.is_empty()) {
        let root = d.view();
        let Some(earlier) = root
            .path(&["metadata", "annotations", KUSTOMIZE_PREVIOUS_NAMES])
            .and_then(crate::manifest::Node::as_str)
        else {
            continue;
        };
        let (Some(kind), Some(name)) = (root.str_at(&["kind"]), root.str_at(&["metadata", "name"]))
        else {
            continue;
        };
        for e in earlier
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty() && *e != name)
        {
            renamed.insert((kind.into(), namespace(root), e.into()), name.into());
        }
    }
    if renamed.is_empty() {
        return;
    }
    let now = |kind: &str, ns: &str, name: &str| {
        renamed.get(&(kind.into(), ns.into(), name.into())).cloned()
    };
    for d in docs.iter_mut().filter(|d| !d.is_empty()) {
        let root = d.view();
        let ns = namespace(root);
        let api = root.str_at(&["apiVersion"]).unwrap_or("").to_string();
        let kind = root.str_at(&["kind"]).unwrap_or("").to_string();
        // (the path to a mapping, its key, the name it takes)
        let mut fixes: Vec<(Vec<String>, &str, String)> = Vec::new();
        if let Some(spec) = crate::workload::pod_spec_path(&api, &kind) {
            let path: Vec<String> = spec.iter().map(|s| s.to_string()).collect();
            if let Some(to) = root
                .path(spec)
                .and_then(|p| p.str_at(&["serviceAccountName"]))
                .and_then(|a| now("ServiceAccount", &ns, a))
            {
                fixes.push((path, "serviceAccountName", to));
            }
        }
        if matches!(kind.as_str(), "RoleBinding" | "ClusterRoleBinding") {
            let role_kind = root.str_at(&["roleRef", "kind"]).unwrap_or("");
            let role_ns = if role_kind == "Role" { ns.as_str() } else { "" };
            if let Some(to) = root
                .str_at(&["roleRef", "name"])
                .and_then(|r| now(role_kind, role_ns, r))
            {
                fixes.push((vec!["roleRef".into()], "name", to));
            }
            for (i, subject) in root
                .get("subjects")
                .and_then(|s| s.items())
                .unwrap_or(&[])
                .iter()
                .enumerate()
            {
                if subject.str_at(&["kind"]) != Some("ServiceAccount") {
                    continue;
                }
                let subject_ns = subject.str_at(&["namespace"]).unwrap_or(&ns);
                if let Some(to) = subject
                    .str_at(&["name"])
                    .and_then(|n| now("ServiceAccount", subject_ns, n))
                {
                    fixes.push((vec!["subjects".into(), i.to_string()], "name", to));
                }
            }
        }
        if fixes.is_empty() {
            continue;
        }
        let root = d.edit();
        for (path, key, to) in fixes {
            let mut node = Some(&mut *root);
            for step in &path {
                node = node.and_then(|n| match step.parse::<usize>() {
                    Ok(i) => n.items_mut().and_then(|items| items.get_mut(i)),
                    Err(_) => n.get_mut(step),
                });
            }
            if let Some(map) = node {
                map.set(key, crate::manifest::Node::string(to));
            }
        }
    }
}
