//! Where pod specs live: by kind for the workloads the transformer handles, and by
//! shape for anything else (custom resources that embed a pod spec).

use std::collections::BTreeMap;

use crate::manifest::Node;

/// Path from the object root to the pod spec of a workload kind the transformer
/// handles, or None for everything else.
pub fn pod_spec_path(api_version: &str, kind: &str) -> Option<&'static [&'static str]> {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    const TEMPLATE: &[&str] = &["spec", "template", "spec"];
    match (group, kind) {
        ("", "Pod") => Some(&["spec"]),
        ("", "PodTemplate") => Some(&["template", "spec"]),
        ("", "ReplicationController") => Some(TEMPLATE),
        ("apps" | "extensions", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet") => {
            Some(TEMPLATE)
        }
        ("batch", "Job") => Some(TEMPLATE),
        ("batch", "CronJob") => Some(&["spec", "jobTemplate", "spec", "template", "spec"]),
        _ => None,
    }
}

/// The labels of the pod template (the `metadata` beside the pod spec).
pub fn template_labels<'a>(obj: &'a Node, spec_path: &[&str]) -> Option<&'a Node> {
    let parent = &spec_path[..spec_path.len() - 1];
    if parent.is_empty() {
        return None; // a Pod's own metadata is the workload's
    }
    obj.path(parent)?.path(&["metadata", "labels"])
}

/// A label mapping as strings; values that are not strings are skipped, as the API
/// server would reject them anyway.
pub fn label_map(labels: Option<&Node>) -> BTreeMap<String, String> {
    labels
        .and_then(Node::entries)
        .unwrap_or(&[])
        .iter()
        .filter_map(|(k, v)| Some((k.text()?.to_string(), v.as_str()?.to_string())))
        .collect()
}

/// `spec.template.spec` from path segments.
pub fn dotted(path: &[&str]) -> String {
    path.join(".")
}

/// Whether a mapping looks like a pod spec: a `containers` list whose entries have
/// an `image` or a `name`. This is how the guard finds pod specs in custom
/// resources (Argo Rollouts, Knative, operators) without a list of kinds.
pub fn looks_like_pod_spec(n: &Node) -> bool {
    n.get("containers").and_then(Node::items).is_some_and(|cs| {
        cs.iter()
            .any(|c| c.get("image").is_some() || c.get("name").is_some())
    })
}

/// Every pod-spec-shaped mapping in an object, with its dotted path. Also counts a
/// mapping with `serviceAccountName`/`serviceAccount` as a pod spec, so that a
/// forged account cannot hide behind a missing `containers` list.
pub fn find_pod_specs(obj: &Node) -> Vec<(String, &Node)> {
    let mut out = Vec::new();
    let mut path = Vec::new();
    walk(obj, &mut path, &mut out);
    out
}

/// One step of a field path; the dotted string is only built for what is found, so
/// walking every node of a large stream allocates nothing.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

fn render(path: &[Step]) -> String {
    let mut s = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Step::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

fn walk<'a>(n: &'a Node, path: &mut Vec<Step<'a>>, out: &mut Vec<(String, &'a Node)>) {
    if let Some(entries) = n.entries() {
        if looks_like_pod_spec(n)
            || n.get("serviceAccountName").is_some()
            || n.get("serviceAccount").is_some()
        {
            out.push((render(path), n));
        }
        for (k, v) in entries {
            if v.as_scalar().is_some() {
                continue; // nothing below a scalar
            }
            path.push(Step::Key(k.text().unwrap_or("?")));
            walk(v, path, out);
            path.pop();
        }
    } else if let Some(items) = n.items() {
        for (i, v) in items.iter().enumerate() {
            if v.as_scalar().is_some() {
                continue;
            }
            path.push(Step::Index(i));
            walk(v, path, out);
            path.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::parse_stream;

    #[test]
    fn kinds_and_groups() {
        assert_eq!(pod_spec_path("v1", "Pod"), Some(&["spec"][..]));
        assert_eq!(pod_spec_path("batch/v1", "CronJob").unwrap().len(), 5);
        assert_eq!(pod_spec_path("example.com/v1", "Deployment"), None);
        assert_eq!(pod_spec_path("v1", "Service"), None);
    }

    #[test]
    fn pod_specs_found_by_shape_with_paths() {
        let d = parse_stream(b"kind: Rollout\nspec:\n  template:\n    spec:\n      containers:\n      - image: x\n  extra:\n  - serviceAccountName: a\n").unwrap();
        let found: Vec<String> = find_pod_specs(d[0].view())
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(found, vec!["spec.template.spec", "spec.extra[0]"]);
    }
}
