//! The JSONPath evaluator against real kubectl: generated templates on generated
//! objects, each run by `kubectl label --local -f OBJ -o jsonpath=T` (kubectl's
//! own printer, offline) and by ours on the same JSON; same output, or both refuse.
//! Go walks a map's keys in random order, so where a template steps into maps
//! with `*` or `..` the outputs are compared as multisets of characters.

use std::process::Command;

use kubectl_nvcf_worker::output::jsonpath::Template;
use proptest::prelude::*;
use serde_json::{json, Value};

const KUBECTL: &str = "/usr/bin/kubectl";

/// kubectl's output for template `t` on `object` (None when kubectl refuses).
fn kubectl(object: &Value, t: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("obj.json");
    std::fs::write(&file, serde_json::to_vec(object).unwrap()).unwrap();
    let out = Command::new(KUBECTL)
        .args(["label", "--local", "--overwrite", "-f"])
        .arg(&file)
        .args(["zz=y", "--kubeconfig=/dev/null"])
        .arg(format!("-o=jsonpath={t}"))
        .output()
        .expect("kubectl runs");
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).unwrap())
}

fn ours(object: &Value, t: &str) -> Option<String> {
    Template::parse(t).and_then(|p| p.render(object)).ok()
}

fn same(object: &Value, t: &str) -> Result<(), TestCaseError> {
    let (theirs, mine) = (kubectl(object, t), ours(object, t));
    let unordered = t.contains(".*") || t.contains("..");
    let key = |s: &Option<String>| {
        s.as_ref().map(|s| {
            let mut c: Vec<char> = s.chars().collect();
            if unordered {
                c.sort_unstable();
            }
            c.into_iter().collect::<String>()
        })
    };
    prop_assert_eq!(
        key(&mine),
        key(&theirs),
        "template {:?} on {}: ours {:?}, kubectl {:?}",
        t,
        object,
        mine,
        theirs
    );
    Ok(())
}

fn object(spec: Value) -> Value {
    json!({
        "apiVersion": "x.io/v1",
        "kind": "Thing",
        "metadata": {"name": "t", "labels": {"zz": "y"}},
        "spec": spec,
    })
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-3i64..20).prop_map(Value::from),
        (-40i64..40).prop_map(|n| json!(f64::from(n as i32) + 0.5)),
        prop::sample::select(vec!["", "a", "b c", "x<y&z", "é", "2"]).prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(
                prop::sample::select(vec!["a", "b", "name", "n"]).prop_map(String::from),
                inner,
                0..3
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn segment() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec!["a", "b", "name", "n", "spec", "metadata"]);
    let lit = prop::sample::select(vec!["1", "2.5", "-0.5", "\"a\"", "'b c'", "true", "0"]);
    let op = prop::sample::select(vec!["==", "!=", "<", ">", "<=", ">="]);
    prop_oneof![
        key.clone().prop_map(|k| format!(".{k}")),
        (-4i64..5).prop_map(|n| format!("[{n}]")),
        (-3i64..4, -3i64..5).prop_map(|(a, b)| format!("[{a}:{b}]")),
        (0i64..3, 1i64..3).prop_map(|(a, s)| format!("[{a}::{s}]")),
        Just("[*]".to_string()),
        Just(".*".to_string()),
        key.clone().prop_map(|k| format!("..{k}")),
        key.clone().prop_map(|k| format!("['{k}']")),
        Just("[0,1]".to_string()),
        (key.clone(), op, lit).prop_map(|(k, o, l)| format!("[?(@.{k}{o}{l})]")),
        key.prop_map(|k| format!("[?(@.{k})]")),
    ]
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(segment(), 0..4).prop_map(|s| format!(".spec{}", s.concat()))
}

fn template() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        path().prop_map(|p| format!("{{{p}}}")),
        prop::sample::select(vec!["x", " ", "{\"\\n\"}", "{'-'}", "{@}", "{.kind}"])
            .prop_map(String::from),
        (path(), path()).prop_map(|(a, b)| format!("{{range {a}}}[{{{}}}]{{end}}", &b[5..])),
        path().prop_map(|p| format!("{{range {p}}}{{@}};{{end}}")),
    ];
    prop::collection::vec(piece, 1..4).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("JSONPATH_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(96), ..ProptestConfig::default() })]

    #[test]
    fn generated_templates_print_as_kubectl_prints_them(spec in value(), t in template()) {
        same(&object(spec), &t)?;
    }
}

/// The forms the docs show, and the parser's refusals, each once against kubectl.
#[test]
fn documented_forms_and_refusals_match_kubectl() {
    let spec = json!({
        "items": [
            {"name": "a", "n": 1, "tags": ["x", "y"]},
            {"name": "b", "n": 2.5, "ok": true},
            {"name": "c", "n": 1234567.5, "tiny": 0.00001},
        ],
        "text": "hé <b>",
    });
    let obj = object(spec);
    for t in [
        "{.spec.items[*].name}",
        "{.spec.items[0].name}{\"\\n\"}",
        "{.spec.items[-1:]}",
        "{.spec.items[0:2].n}",
        "{.spec.items[::2].name}",
        "{..name}",
        "{.spec.items[?(@.n>1)].name}",
        "{.spec.items[?(@.ok)].name}",
        "{.spec.items[?(@.name==\"c\")].n}",
        "{.spec.items[*]['name','n']}",
        "{range .spec.items[*]}{.name}{\"\\t\"}{.n}{\"\\n\"}{end}",
        "{range .spec.items[*]}{range .tags[*]}<{@}>{end}{end}",
        "{.spec.text} {.spec.items[2].tiny}",
        "{.spec.items[0]}",
        "{.metadata.name.*}",
        "{.spec.items[5]}",
        "{.spec.items[?(@.n==\"x\")]}",
        "{.spec.items[0].name",
        "{end}",
        "{.spec.items[1:0]}",
        "{.spec.items[::0]}",
        "{unknown}",
        "{.spec.items[x]}",
        "{\"unterminated}",
        "text only",
        "{$.kind}{@.kind}",
        "{.spec.items[*].nope}",
    ] {
        same(&obj, t).unwrap();
    }
}
