//! PATCH bodies: JSON merge patch (RFC 7386), strategic merge patch
//! (approximated as a merge patch) and JSON patch (RFC 6902).

use serde_json::Value;

/// Applies an RFC 7386 merge patch in place: objects merge recursively,
/// `null` deletes, anything else (arrays included) replaces.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let target = target.as_object_mut().expect("made an object above");
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// Strategic merge patch, approximated as a merge patch after dropping the
/// `$`-prefixed directives (`$setElementOrder/...`, `$retainKeys`, `$patch`)
/// that kubectl adds. Lists are replaced rather than merged by key; the
/// label/annotation edits kubectl makes only touch maps, where the two agree.
pub fn strategic(target: &mut Value, patch: &Value) {
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(k, _)| !k.starts_with('$'))
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    merge(target, &strip(patch));
}

/// Resolves an RFC 6901 pointer's parent and final token.
fn split_pointer(path: &str) -> Result<(String, String), String> {
    if path.is_empty() {
        return Err("the root cannot be patched".into());
    }
    let (parent, last) = path
        .rsplit_once('/')
        .ok_or_else(|| format!("invalid JSON pointer {path:?}"))?;
    Ok((
        parent.to_string(),
        last.replace("~1", "/").replace("~0", "~"),
    ))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let (parent, last) = split_pointer(path)?;
    match doc.pointer_mut(&parent) {
        Some(Value::Object(m)) => {
            m.insert(last, value);
            Ok(())
        }
        Some(Value::Array(a)) => {
            let i = if last == "-" {
                a.len()
            } else {
                last.parse::<usize>()
                    .ok()
                    .filter(|i| *i <= a.len())
                    .ok_or_else(|| format!("invalid array index {last:?}"))?
            };
            a.insert(i, value);
            Ok(())
        }
        _ => Err(format!("doc is missing path: {path:?}")),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, last) = split_pointer(path)?;
    let missing = || format!("doc is missing path: {path:?}");
    match doc.pointer_mut(&parent) {
        Some(Value::Object(m)) => m.remove(&last).ok_or_else(missing),
        Some(Value::Array(a)) => match last.parse::<usize>() {
            Ok(i) if i < a.len() => Ok(a.remove(i)),
            _ => Err(missing()),
        },
        _ => Err(missing()),
    }
}

/// Applies an RFC 6902 JSON patch, all or nothing.
pub fn json_patch(doc: &Value, ops: &Value) -> Result<Value, String> {
    let ops = ops
        .as_array()
        .ok_or("json patch must be an array of operations")?;
    let mut doc = doc.clone();
    for op in ops {
        let field = |name: &str| {
            op.get(name)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("operation missing {name:?}: {op}"))
        };
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| format!("operation missing \"value\": {op}"))
        };
        let path = field("path")?;
        match field("op")?.as_str() {
            "add" => add(&mut doc, &path, value()?)?,
            "remove" => {
                remove(&mut doc, &path)?;
            }
            "replace" => {
                remove(&mut doc, &path)?;
                add(&mut doc, &path, value()?)?;
            }
            "move" => {
                let moved = remove(&mut doc, &field("from")?)?;
                add(&mut doc, &path, moved)?;
            }
            "copy" => {
                let from = field("from")?;
                let copied = doc
                    .pointer(&from)
                    .cloned()
                    .ok_or_else(|| format!("doc is missing from path: {from:?}"))?;
                add(&mut doc, &path, copied)?;
            }
            "test" => {
                if doc.pointer(&path) != Some(&value()?) {
                    return Err(format!("testing value {path:?} failed"));
                }
            }
            other => return Err(format!("unexpected kind of spec operation: {other:?}")),
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_rfc7386() {
        let mut doc = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        merge(&mut doc, &json!({"a": {"b": null, "d": 3}, "l": [3]}));
        assert_eq!(doc, json!({"a": {"c": 2, "d": 3}, "l": [3]}));
    }

    #[test]
    fn strategic_drops_directives() {
        let mut doc = json!({"metadata": {"labels": {"a": "1"}}});
        strategic(
            &mut doc,
            &json!({"metadata": {"labels": {"b": "2"}}, "$setElementOrder/x": []}),
        );
        assert_eq!(doc, json!({"metadata": {"labels": {"a": "1", "b": "2"}}}));
    }

    #[test]
    fn json_patch_ops() {
        let doc = json!({"metadata": {"labels": {"a/b": "1"}}, "l": [1]});
        let out = json_patch(
            &doc,
            &json!([
                {"op": "test", "path": "/metadata/labels/a~1b", "value": "1"},
                {"op": "replace", "path": "/metadata/labels/a~1b", "value": "2"},
                {"op": "add", "path": "/l/-", "value": 2},
                {"op": "copy", "from": "/l", "path": "/m"},
                {"op": "remove", "path": "/l/0"},
            ]),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"metadata": {"labels": {"a/b": "2"}}, "l": [2], "m": [1, 2]})
        );
        assert!(json_patch(&doc, &json!([{"op": "remove", "path": "/nope"}])).is_err());
    }
}
