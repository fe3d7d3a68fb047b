use serde_json::json;

use super::*;

fn run(t: &str, v: serde_json::Value) -> Result<String, String> {
    Template::parse(t)?.render(&v)
}

#[test]
fn kubectls_documented_examples() {
    let v = json!({"kind": "List", "items": [
        {"metadata": {"name": "a"}, "status": {"n": 1}},
        {"metadata": {"name": "b"}, "status": {"n": 2.5}},
    ]});
    assert_eq!(run("{.kind}", v.clone()).unwrap(), "List");
    assert_eq!(run("{.items[*].metadata.name}", v.clone()).unwrap(), "a b");
    assert_eq!(run("{.items[-1].metadata.name}", v.clone()).unwrap(), "b");
    assert_eq!(run("{.items[0:1].status.n}", v.clone()).unwrap(), "1");
    assert_eq!(
        run(
            r#"{range .items[*]}{.metadata.name}{"\t"}{.status.n}{"\n"}{end}"#,
            v.clone()
        )
        .unwrap(),
        "a\t1\nb\t2.5\n"
    );
    assert_eq!(
        run(r#"{.items[?(@.metadata.name=="b")].status.n}"#, v.clone()).unwrap(),
        "2.5"
    );
    assert_eq!(run("{..name}", v.clone()).unwrap(), "a b");
    assert_eq!(run("{.items[0].status}", v.clone()).unwrap(), r#"{"n":1}"#);
    assert_eq!(run("x {.missing} y", v.clone()).unwrap(), "x  y");
    assert!(run("{.items[5]}", v.clone()).is_err());
    assert!(run("{.kind", v).is_err());
}

proptest::proptest! {
    /// Any text, and any text inside an action, parses or is refused, and a
    /// parsed template runs or is refused, without a panic (huge indices included).
    #[test]
    fn any_template_parses_and_runs_or_is_refused(
        text in "[{}\\[\\]().@$*?:,='\"!<>a-z0-9 -]{0,24}",
        index in proptest::prelude::any::<i64>(),
    ) {
        let v = json!({"a": [1, {"b": "x"}, null], "b": {"a": 2.5}});
        for t in [text.clone(), format!("{{{text}}}"), format!("{{.a[{index}]}}"), format!("{{.a[{index}:]}}")] {
            if let Ok(p) = Template::parse(&t) {
                let _ = p.render(&v);
            }
        }
    }
}
