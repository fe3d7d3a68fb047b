//! Where an object is and what it is called: what every message about an input
//! object names, whatever the message is about.

use serde::Serialize;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl ResourceRef {
    /// `kind/namespace/name`, or `kind/name` without a namespace.
    pub fn display(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{}/{}/{}", self.kind, ns, self.name),
            None => format!("{}/{}", self.kind, self.name),
        }
    }

    /// kubectl's short form: `deployment/web`.
    pub fn short(&self) -> String {
        format!("{}/{}", self.kind.to_ascii_lowercase(), self.name)
    }
}

/// Where something was found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Location {
    /// File path, `<stdin>`, or the path annotation of a KRM item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// 0-based document index in the file (or the KRM index annotation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// 1-based line in the input the tool read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}
