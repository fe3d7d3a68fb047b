use serde_json::json;

use super::*;

fn cols(spec: &str, rows: &[Value], no_headers: bool) -> String {
    let Form::CustomColumns(c) = Form::parse(&format!("custom-columns={spec}")).unwrap() else {
        panic!("custom-columns")
    };
    let mut out = Vec::new();
    custom_columns(&c, rows, no_headers, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn custom_columns_print_none_for_missing_values_and_pad_as_tabwriter() {
    let rows = [
        json!({"name": "a", "n": 1, "l": [1, 2]}),
        json!({"name": "long-name"}),
    ];
    let expected = [
        format!("{:<12}{:<9}L", "N", "NUM"),
        format!("{:<12}{:<9}1,2", "a", "1"),
        format!("{:<12}{:<9}<none>", "long-name", "<none>"),
    ];
    assert_eq!(
        cols("N:.name,NUM:n,L:{.l[*]}", &rows, false),
        expected.join("\n") + "\n"
    );
    assert_eq!(cols("N:.name", &rows, true), "a\nlong-name\n");
    let hostile = [json!({"name": "a\u{1b}[2Jb\rc"})];
    assert_eq!(cols("N:.name", &hostile, true), "a^[[2Jb\\rc\n");
}

#[test]
fn unknown_forms_are_refused_in_kubectls_words() {
    let e = Form::parse("xml").unwrap_err();
    assert!(e.starts_with("unable to match a printer suitable for the output format \"xml\", allowed formats are: custom-columns,"), "{e}");
    assert_eq!(
        Form::parse("jsonpath").unwrap_err(),
        "template format specified but no template given"
    );
    assert!(Form::parse("custom-columns=NAME")
        .unwrap_err()
        .contains("expected <header>:<json-path-expr>"));
    let e = Form::Wide
        .check("audit", &["wide"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"wide\"") && !e.contains(",wide,"), "{e}");
}

#[test]
fn sort_by_puts_missing_first_and_compares_like_kubectl() {
    let rows = [json!({"a": 3}), json!({}), json!({"a": 1}), json!({"a": 2})];
    assert_eq!(sort_order(".a", &rows).unwrap(), vec![1, 2, 3, 0]);
    let rows = [json!({"a": "b"}), json!({"a": "a"})];
    assert_eq!(sort_order("{.a}", &rows).unwrap(), vec![1, 0]);
    assert!(sort_order(".zz", &rows).is_err());
    assert!(sort_order(".a", &[json!({"a": 1}), json!({"a": "x"})]).is_err());
    assert_eq!(
        reorder(vec!['x', 'y', 'z'], &[2, 0, 1]),
        vec!['z', 'x', 'y']
    );
}

#[test]
fn names_are_kind_dot_group() {
    assert_eq!(object_name("v1", "ServiceAccount", "w"), "serviceaccount/w");
    assert_eq!(
        object_name("rbac.authorization.k8s.io/v1", "Role", "w"),
        "role.rbac.authorization.k8s.io/w"
    );
}
