//! The KRM function reads the items of a ResourceList laid out as kpt writes it
//! as the documents of a stream (`load::lay_out_resource_list`,
//! `load::resource_list_items`), dropping and reading again their trees as
//! `inject` does, and writes them back re-indented (`sink::resource_list_items`).
//! None of it may change anything: over the real files wrapped as kpt wraps them,
//! generated streams and hand-made edge cases, under inject (several configs, and
//! again on its output), uninject and validate, stdout and exit are those of the
//! same run reading the ResourceList as one tree (`Memory::Hold`).

use crate::support;

use kubectl_nvcf_worker::error::Exit;
use kubectl_nvcf_worker::manifest::{attach_text, parse_stream, splice, Node, Style};
use kubectl_nvcf_worker::pipeline::{load, Memory};
use kubectl_nvcf_worker::work::Workers;
use support::corpus_files;
use support::krm_diff::{anchored_doc, answer, same, streams, ANCHORED_KINDS};

/// Indents a document as an item of `items:` at column 0, as kpt writes them.
fn item(doc: &str) -> String {
    let mut out = String::new();
    for (i, line) in doc.split_inclusive('\n').enumerate() {
        if i == 0 {
            out.push_str("- ");
        } else if line != "\n" && line != "\r\n" {
            out.push_str("  ");
        }
        out.push_str(line);
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// A ConfigMap functionConfig with `data`, indented under `functionConfig:`.
fn config(data: &[(&str, &str)]) -> String {
    let mut s = String::from(
        "functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fn\n  data:\n",
    );
    for (k, v) in data {
        s.push_str(&format!("    {k}: {}\n", serde_json::to_string(v).unwrap()));
    }
    s
}

/// A ResourceList of `items` (already indented) with `config` after them, as kpt
/// orders them, or before them (as `bench/bench.py` does).
fn resource_list(items: &str, config: &str, config_first: bool) -> String {
    let head = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n";
    match config_first {
        true => format!("{head}{config}items:\n{items}"),
        false => format!("{head}items:\n{items}{config}"),
    }
}

/// The documents of a file as kpt hands them to a function: each with kpt's path
/// and index annotations (added with the crate's own splicing, so comments and
/// layout stay as written), indented as items. `None` for documents kpt would not
/// read as objects.
fn kpt_items(file: &str, text: &str) -> Option<String> {
    let mut docs = parse_stream(text.as_bytes()).ok()?;
    attach_text(&mut docs, std::sync::Arc::new(text.as_bytes().to_vec()));
    let mut out = String::new();
    for (index, doc) in docs.iter_mut().filter(|d| !d.is_empty()).enumerate() {
        if !doc.root.is_map() || doc.root.get("kind").is_none() {
            return None;
        }
        let root = doc.edit_as_written();
        let meta = root.get_or_insert("metadata", || Node::map(Vec::new()));
        if !meta.is_map() {
            return None;
        }
        let annotations = meta.get_or_insert("annotations", || Node::map(Vec::new()));
        if !annotations.is_map() {
            return None;
        }
        for (key, value) in [
            ("config.kubernetes.io/index", index.to_string()),
            ("config.kubernetes.io/path", file.to_string()),
            ("internal.config.kubernetes.io/index", index.to_string()),
            ("internal.config.kubernetes.io/path", file.to_string()),
        ] {
            annotations.set(key, Node::scalar(value, Style::SingleQuoted));
        }
        let bytes = splice::render_doc(doc);
        let text = String::from_utf8(bytes).ok()?;
        // The document's own lines, its head comments first (kpt writes them
        // after the item's `- `), without markers.
        let body: String = text
            .split_inclusive('\n')
            .skip_while(|l| l.starts_with("---") || l.trim().is_empty())
            .filter(|l| !l.starts_with("...") && !l.starts_with("---"))
            .collect();
        out.push_str(&item(body.trim_end_matches(['\n', ' '])));
    }
    (!out.is_empty()).then_some(out)
}

/// The items of a ResourceList the function answered, as kpt sends them to the
/// next function: without `results`, which the function wrote at the end.
fn items_of(answer: &str, config_first: bool) -> Option<String> {
    let text = answer.split("\nresults:\n").next().unwrap();
    let text = format!("{}\n", text.trim_end_matches('\n'));
    // (A ResourceList written anew may have its items elsewhere: not sent again.)
    let from = text.find("\nitems:\n")? + "\nitems:\n".len();
    let rest = &text[from..];
    let to = match config_first {
        true => rest.len(),
        false => rest.find("\nfunctionConfig:").map_or(rest.len(), |i| i + 1),
    };
    Some(rest[..to].to_string())
}

const INJECT: [&[(&str, &str)]; 3] = [
    &[("clusterID", "c1")],
    &[("clusterID", "c1"), ("selector", "")],
    &[
        ("clusterID", "c1"),
        ("selector", ""),
        ("naming", "per-namespace"),
    ],
];

/// Each config on `items`, then on what came out: validate, re-injection with a
/// new cluster ID, and uninject. Returns how many runs read the items as a stream
/// and how many changed them.
fn check(items: &str, what: &str, config_first: bool) -> (usize, usize) {
    let (mut streamed, mut changed) = (0, 0);
    let mut run = |items: &str, data: &[(&str, &str)], label: &str| {
        let input = resource_list(items, &config(data), config_first);
        streamed += usize::from(streams(&input));
        same(&input, &format!("{what} ({label})"))
    };
    let _ = run(items, &[("mode", "validate")], "validate");
    for (i, data) in INJECT.iter().enumerate() {
        let Ok((out, Exit::Success)) = run(items, data, &format!("inject {i}")) else {
            continue;
        };
        let Some(again) = items_of(&out, config_first) else {
            continue;
        };
        if again == items {
            continue;
        }
        changed += 1;
        let _ = run(
            &again,
            &[("mode", "validate")],
            &format!("inject {i}, validate"),
        );
        let _ = run(
            &again,
            &[("clusterID", "c2"), ("selector", "")],
            &format!("inject {i}, again"),
        );
        let _ = run(
            &again,
            &[("mode", "uninject")],
            &format!("inject {i}, uninject"),
        );
    }
    (streamed, changed)
}

#[test]
fn real_files_wrapped_by_kpt_come_out_as_from_one_tree() {
    let (mut streamed, mut changed, mut files) = (0, 0, 0);
    for f in corpus_files() {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let Some(items) = kpt_items(&name, &text) else {
            continue;
        };
        files += 1;
        let (s, c) = check(&items, &name, files % 2 == 0);
        streamed += s;
        changed += c;
    }
    assert!(files > 200, "most files wrap: {files}");
    assert!(
        changed > 100,
        "most files have a workload to inject: {changed}"
    );
    // (1544 before items headed by comments streamed too: 1632 since.)
    assert!(
        streamed > 1600,
        "most runs read their items as a stream: {streamed}"
    );
}

#[test]
fn generated_resource_lists_come_out_as_from_one_tree() {
    let text = support::generated_corpus(60, &[]);
    let items: String = support::split_docs(&text)
        .iter()
        .map(|d| item(d.trim_end()))
        .collect();
    let (streamed, changed) = check(&items, "generated", true);
    assert_eq!((streamed, changed), (13, 3));
    // Several chunks of the parallel parser: items dropped on both threads.
    let big: String = (0..40)
        .map(|i| items.replace("name: ", &format!("name: x{i}")))
        .collect();
    assert!(big.len() > 1 << 20, "{}", big.len());
    let input = resource_list(&big, &config(INJECT[1]), false);
    assert!(streams(&input));
    let _ = same(&input, "generated, big");
}

/// Where the items' layout or meaning decides whether they are read as a stream:
/// each case answered alike both ways, and read as a stream exactly where its
/// text can be written back byte for byte (`streams`).
#[test]
fn edge_cases_come_out_as_from_one_tree() {
    let pod = |name: &str, extra: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels:\n    nvcf.io/worker: \"true\"\n  annotations:\n    config.kubernetes.io/path: 'p.yaml'\n    config.kubernetes.io/index: '0'\nspec:\n{extra}  containers:\n  - name: c\n    image: x\n"
        )
    };
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  labels: {a: b}\ndata:\n  a: b # inside\n";
    let items = |docs: &[&str]| docs.iter().map(|d| item(d)).collect::<String>();
    let a = pod("a", "");
    let b = pod("b", "  # a comment in an item\n");
    let inject = config(INJECT[1]);
    let rl = |items: &str| resource_list(items, &inject, false);
    let forged = pod("f", "  serviceAccountName: nvcf-worker-pod-f\n")
        .replace("nvcf.io/worker: \"true\"", "app: f");
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n- {}",
        pod("l", "").replace('\n', "\n  ").trim_end()
    );
    let typed = "apiVersion: v1\nkind: ServiceAccountList\nitems:\n- metadata:\n    name: s\n";
    // (name, ResourceList, whether read as a stream)
    let cases: Vec<(&str, String, bool)> = vec![
        ("plain", rl(&items(&[&a, cm, &b])), true),
        (
            "head comments after the dash, as kpt writes them",
            rl(&items(&[&format!("# head of a\n# more\n{a}"), cm, &format!("# head of b\n{b}")])),
            true,
        ),
        ("config first", resource_list(&items(&[&a, cm]), &inject, true), true),
        ("no config", resource_list(&items(&[&a, cm]), "", false), true),
        (
            "comments between items",
            rl(&items(&[&a, cm]).replace("- apiVersion: v1\n  kind: ConfigMap", "  # before cm\n\n- apiVersion: v1\n  kind: ConfigMap")),
            true,
        ),
        (
            "a comment left of the items",
            rl(&items(&[&a, cm]).replace("- apiVersion: v1\n  kind: ConfigMap", "# at the margin\n- apiVersion: v1\n  kind: ConfigMap")),
            true,
        ),
        ("blank lines before the config", rl(&format!("{}\n\n", items(&[&a, cm]))), true),
        (
            "blank lines after the last item",
            format!("{}\n\n", resource_list(&items(&[&a, cm]), "", false).trim_end()),
            false,
        ),
        ("CRLF", rl(&items(&[&a, cm, &b])).replace('\n', "\r\n"), true),
        // Found by the `resource_list` fuzz target: a byte order mark after an
        // item's indentation is content in the ResourceList (which then does not
        // parse) but a mark at a line's start in the item alone.
        (
            "a byte order mark after an item's indentation",
            rl(&items(&[&a, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    metadata:\n      labels:\n        app: x\n    spec:\n      containers:\n      - name: c\n        image: x\n"])
                .replace("\n        labels:", "\n  \u{feff}      labels:")),
            false,
        ),
        (
            "a byte order mark in a scalar",
            rl(&items(&[&a, cm]).replace("  data:\n    a: b", "  data:\n    a: b\u{feff}c")),
            false,
        ),
        ("CRLF items only", rl(&items(&[&a, cm]).replace('\n', "\r\n")), true),
        ("a flow item", rl(&format!("{}- {{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {{\"name\": \"j\"}}}}\n", items(&[&a]))), true),
        (
            "a JSON ResourceList",
            format!("{{\"apiVersion\": \"config.kubernetes.io/v1\", \"kind\": \"ResourceList\", \"items\": [{}]}}\n", serde_json::to_string(&support::docs(&a)[0]).unwrap()),
            false,
        ),
        (
            "anchors across items",
            rl(&items(&[&a.replace("  labels:\n", "  labels: &l\n"), &cm.replace("labels: {a: b}", "labels: *l")])),
            false,
        ),
        // An item's own anchors mean the same in it alone: it streams (and when
        // inject edits it, the tree answers, as it writes such a list anew).
        ("an alias in an item", rl(&items(&[&a.replace("image: x\n", "image: &n x\n  - name: d\n    image: *n\n")])), true),
        ("an alias in an item, validated", resource_list(&items(&[&a.replace("image: x\n", "image: &n x\n  - name: d\n    image: *n\n"), cm]), &config(&[("mode", "validate")]), false), true),
        ("a merge key in an item, as kpt writes it", rl(&items(&[cm, &anchored_doc(0, 2), &a])), true),
        ("tags in an item", rl(&items(&[&anchored_doc(0, 3), &a])), true),
        ("one anchor name in two items", rl(&items(&[&anchored_doc(0, 1), &anchored_doc(1, 4), cm])), true),
        ("an anchor on an item", rl(&items(&[&a, cm]).replace("- apiVersion: v1\n  kind: ConfigMap", "- &i\n  apiVersion: v1\n  kind: ConfigMap")), false),
        ("an alias to the functionConfig", resource_list(&items(&[&a.replace("image: x", "image: *img")]), &config(INJECT[1]).replace("name: fn\n", "name: fn\n  labels:\n    img: &img nginx\n"), true), false),
        ("an item in error with an alias", rl(&items(&[&a, &anchored_doc(0, 5)])), true),
        ("an edited item with an anchor, another with an alias", rl(&items(&[&a.replace("image: x", "image: &i x"), &anchored_doc(1, 4)])), true),
        ("merge keys in an edited item, comments between items", rl(&items(&[&anchored_doc(0, 6), &anchored_doc(1, 4), &a]).replace("- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: x1", "  # between\n\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: x1")), true),
        ("a List item", rl(&items(&[&list, cm])), true),
        ("a typed List item", rl(&items(&[typed, &a])), false),
        // (Reported as the tree reports it; the items go back as they came.)
        ("an item that is no object", rl(&items(&[&a, "kind: ConfigMap\nmetadata:\n  name: x\n"])), true),
        ("an item that is no object, then a duplicate key", rl(&items(&[&a, "kind: ConfigMap\nmetadata:\n  name: x\n", &cm.replace("data:\n", "data:\n  a: c\n")])), false),
        ("results already there", format!("{}results:\n- message: earlier\n  severity: info\n", rl(&items(&[&a]))), false),
        // (Its items read as a stream; the function answers from the tree.)
        ("a bad functionConfig", resource_list(&items(&[&a, cm]), &config(&[("naming", "sideways")]), false), true),
        ("a forged account", rl(&items(&[cm, &forged, &a])), true),
        ("a Helm hook", rl(&items(&[&a.replace("  annotations:\n", "  annotations:\n    helm.sh/hook: pre-install\n"), cm])), true),
        ("no items", rl("").replace("items:\n", "items: []\n"), false),
        ("items indented", rl(&support::indent(&items(&[&a, cm]), 2)), false),
        ("a directive", format!("%YAML 1.1\n---\n{}", rl(&items(&[&a]))), false),
        ("a lone CR", rl(&items(&[&a, &cm.replace("a: b # inside", "a: \"b\rc\"")])), false),
        (
            "a lone CR outside the items",
            rl(&items(&[&a])).replace("kind: ResourceList\n", "kind: ResourceList\nmetadata:\n  annotations:\n    x: \"a\rb\"\n"),
            false,
        ),
    ];
    for (name, input, expected) in &cases {
        assert_eq!(streams(input), *expected, "{name}: read as a stream");
        let first = same(input, name);
        for mode in ["validate", "uninject"] {
            // What kpt sends the next function: the items, no results.
            let again = match &first {
                Ok((out, _)) => format!("{}\n", out.split("\nresults:\n").next().unwrap()),
                Err(_) => continue,
            };
            let again = again.replace(&inject, &config(&[("mode", mode)]));
            let _ = same(&again, &format!("{name}, then {mode}"));
        }
    }
    // The forged account is refused both ways; the items go back as they came.
    let (name, input, _) = cases.iter().find(|c| c.0 == "a forged account").unwrap();
    let (out, exit) = answer(input, Memory::Evict).unwrap();
    assert_eq!(exit, Exit::Problem, "{name}");
    assert!(out.contains("NVW101"), "{name}: {out}");
    assert!(
        out.starts_with(input.split("functionConfig:").next().unwrap()),
        "{name}: {out}"
    );
}

/// A selected item is edited as it is read (`Need::Now`) when the ResourceList's
/// indentation is known before its items are (its functionConfig has a mapping
/// inside): else it is read again when its turn comes. Either way the answer is
/// the tree path's.
#[test]
fn items_are_edited_as_they_are_read_when_the_indentation_is_known_first() {
    use kubectl_nvcf_worker::config::Config;
    use kubectl_nvcf_worker::pipeline::Processor;
    let cfg = Config {
        cluster_id: Some("c1".into()),
        selector: kubectl_nvcf_worker::selector::Selector::parse("").unwrap(),
        ..Config::default()
    };
    let processor = Processor::Inject(&cfg);
    let evict = |d: &mut kubectl_nvcf_worker::manifest::Document| processor.evict(d);
    let pod = item("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: x\n");
    let decided = |input: &str| {
        let mut laid = load::lay_out_resource_list(input.as_bytes()).expect("laid out");
        let items =
            load::resource_list_items(&mut laid, input.as_bytes(), Some(&evict), Workers::new(2))
                .expect("streams");
        let d = &items.docs[0];
        (d.decided.is_some(), d.reread)
    };
    let nested = resource_list(
        &pod,
        &config(&[("clusterID", "c1"), ("selector", "")]),
        true,
    );
    assert_eq!(decided(&nested), (true, false));
    let flat = resource_list(
        &pod,
        "functionConfig: {apiVersion: v1, kind: ConfigMap, data: {clusterID: c1, selector: ''}}\n",
        false,
    );
    assert_eq!(decided(&flat), (false, true));
    for (input, what) in [(nested, "nested"), (flat, "flat")] {
        let (out, exit) = same(&input, what).unwrap();
        assert!(
            out.contains("nvcf-worker-token") && exit == Exit::Success,
            "{out}"
        );
    }
}

/// kpt writes the closing quote of a multi-line single-quoted scalar at the
/// margin, inside the item (a ConfigMap's embedded config): the parser says
/// where the items are, so the item still reads alone and is written back as it
/// came, beside an item that is edited.
#[test]
fn a_closing_quote_at_the_margin_inside_an_item_streams() {
    let cm = "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm\n  data:\n    app.yaml: 'log_level: info\n\n      workers: 4\n\n'\n    other: \"a\n b\"\n";
    let pod = item("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n    nvcf.io/worker: \"true\"\nspec:\n  containers:\n  - name: c\n    image: x\n");
    for (items, what) in [
        (format!("{cm}{pod}"), "quote, then a workload"),
        (format!("{pod}{cm}"), "a workload, then the quote"),
        (format!("{pod}{cm}#c\n \n  \n  x: y\n"), "short lines"),
    ] {
        for config_first in [false, true] {
            let input = resource_list(&items, &config(INJECT[1]), config_first);
            assert!(streams(&input), "{what}: streams\n{input}");
            let (out, exit) = same(&input, what).unwrap();
            assert_eq!(exit, Exit::Success, "{out}");
            assert!(out.contains(cm), "{what}: the ConfigMap as it came\n{out}");
        }
    }
    // An edited item with such a line goes the tree's way, with the same answer.
    let odd = pod.replace("    image: x\n", "    image: x\n    args: ['a\n\n']\n");
    let input = resource_list(&odd, &config(INJECT[1]), false);
    let (out, _) = same(&input, "edited, with a short line").unwrap();
    assert!(out.contains("nvcf-worker-token"), "{out}");
}

/// `items:` inside a multi-line double-quoted scalar is no list of items: the
/// stream's answer is the tree's refusal, and input that is no YAML is refused
/// as the tree refuses it.
#[test]
fn items_inside_a_scalar_are_not_the_items() {
    let cm = item("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n");
    let head = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n";
    let inside = format!(
        "{head}note: \"\nitems:\n{cm}\"\nitems:\n{}",
        config(INJECT[1])
    );
    let broken = format!(
        "{head}note: \"\nitems:\n{cm}\"\n  - x: [\n{}",
        config(INJECT[1])
    );
    for (input, what) in [(inside, "items in a scalar"), (broken, "not YAML")] {
        assert!(!streams(&input), "{what}");
        let streamed = same(&input, what);
        assert!(
            !matches!(streamed, Ok((_, Exit::Success))),
            "{what}: {streamed:?}"
        );
    }
}

/// A workload inside a v1 List item, then one edited as it is read (the
/// functionConfig first, so its indentation is known before the items), each
/// with a trio of its own (`naming: per-workload`): their trios take the same
/// kpt indexes on both paths, in plan order. Before trios were made in plan
/// order, the List-first case streamed with the edited pod's trio at indexes 2-4
/// and the List's at 5-7, the tree path the other way round.
#[test]
fn generated_trios_take_the_same_kpt_indexes_on_both_paths() {
    let pod = |name: &str, index: usize| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels:\n    nvcf.io/worker: \"true\"\n  annotations:\n    config.kubernetes.io/path: 'p.yaml'\n    config.kubernetes.io/index: '{index}'\nspec:\n  containers:\n  - name: c\n    image: x\n"
        )
    };
    let list = format!(
        "apiVersion: v1\nkind: List\nmetadata:\n  annotations:\n    config.kubernetes.io/path: 'p.yaml'\n    config.kubernetes.io/index: '0'\nitems:\n- {}",
        pod("l", 0).replace('\n', "\n  ").trim_end()
    );
    for order in [[&list, &pod("a", 1)], [&pod("a", 0), &list]] {
        let items: String = order.iter().map(|d| item(d)).collect();
        let per_workload = [
            ("clusterID", "c1"),
            ("selector", ""),
            ("naming", "per-workload"),
        ];
        let input = resource_list(&items, &config(&per_workload), true);
        assert!(streams(&input));
        let (out, exit) = same(&input, "List and an item edited as read").unwrap();
        assert_eq!(exit, Exit::Success, "{out}");
        assert_eq!(out.matches("kind: RoleBinding").count(), 2, "{out}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Generated ResourceLists whose items use anchors, aliases, merge keys and
    /// tags of their own, share anchor names, alias another item's anchor, or
    /// are in error (`anchored_doc`): under validate, inject and uninject both
    /// ways answer alike, and the items stream exactly when no alias crosses an
    /// item (an undefined one included).
    #[test]
    fn items_with_anchors_of_their_own_stream_as_from_one_tree(
        kinds in proptest::collection::vec(0..ANCHORED_KINDS, 1..7),
        config_first: bool,
    ) {
        let items: String = (kinds.iter().enumerate())
            .map(|(i, &k)| item(&anchored_doc(i, k)))
            .collect();
        let across = kinds.contains(&(ANCHORED_KINDS - 1));
        for data in [&[("mode", "validate")][..], INJECT[1], &[("mode", "uninject")]] {
            let input = resource_list(&items, &config(data), config_first);
            proptest::prop_assert_eq!(streams(&input), !across, "{}", input);
            let _ = same(&input, &format!("{kinds:?} {data:?}"));
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Where inject edits items that have aliases or merge keys of their own,
    /// the tree path writes only those anew, expanded: every other item keeps
    /// its bytes (anchors, aliases and comments too), and the items read as a
    /// stream come out the same.
    #[test]
    fn only_the_edited_items_with_aliases_are_written_anew(
        kinds in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 2, 3, 4, 6]), 1..7),
    ) {
        let docs: Vec<String> = (kinds.iter().enumerate())
            .map(|(i, &k)| anchored_doc(i, k))
            .collect();
        let items: String = docs.iter().map(|d| item(d)).collect();
        let input = resource_list(&items, &config(INJECT[1]), false);
        proptest::prop_assert!(streams(&input));
        let (out, exit) = same(&input, &format!("{kinds:?}")).unwrap();
        proptest::prop_assert_eq!(exit, Exit::Success);
        for (d, k) in docs.iter().zip(&kinds) {
            // ConfigMaps are not edited; workloads are, kind 0 spliced (lines
            // added after its own), the others written anew.
            let kept = out.contains(&item(d));
            proptest::prop_assert_eq!(kept, matches!(k, 0 | 3 | 4), "{}\n{}", d, out);
        }
        let aliased = kinds.iter().filter(|&&k| k == 4).count();
        proptest::prop_assert_eq!(out.matches("*labels").count(), aliased, "{}", out);
        proptest::prop_assert!(!out.contains("<<"), "{}", out);
    }
}
