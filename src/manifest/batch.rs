//! The objects of one run, wherever they came from: documents of files and stdin,
//! the items of `v1 List`s, or the items of a KRM ResourceList. Every face of the
//! tool (inject, guard, validate) reads objects through this one view.

use super::node::Node;
use super::parse::Document;
use crate::report::{Location, ResourceRef};

/// Annotations kpt and kustomize use to say which file an item came from.
pub const PATH_ANNOTATIONS: [&str; 2] = [
    "internal.config.kubernetes.io/path",
    "config.kubernetes.io/path",
];
pub const INDEX_ANNOTATIONS: [&str; 2] = [
    "internal.config.kubernetes.io/index",
    "config.kubernetes.io/index",
];

/// Where an object lives: a document, or the `items[item]` of a document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Addr {
    pub source: usize,
    pub doc: usize,
    pub item: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// A stream of documents; `v1 List` documents contribute their items.
    Stream,
    /// One KRM ResourceList document; its `items` are the objects.
    ResourceList,
}

#[derive(Debug)]
pub struct Source {
    /// File path as given, or `<stdin>`.
    pub name: String,
    pub kind: SourceKind,
    pub docs: Vec<Document>,
}

#[derive(Debug, Default)]
pub struct Batch {
    pub sources: Vec<Source>,
    /// Objects to add after an object, in order, applied by `commit_inserts`.
    inserts: Vec<(Addr, Vec<Node>)>,
}

/// An object with its address and where to report it.
#[derive(Clone, Copy)]
pub struct Object<'a> {
    pub addr: Addr,
    pub node: &'a Node,
    source: &'a Source,
    doc: &'a Document,
}

pub fn is_list(n: &Node) -> bool {
    n.str_at(&["kind"])
        .is_some_and(|k| k == "List" || (k.ends_with("List") && n.get("items").is_some()))
        && n.str_at(&["apiVersion"]).is_some()
}

impl<'a> Object<'a> {
    pub fn api_version(&self) -> &'a str {
        self.node.str_at(&["apiVersion"]).unwrap_or("")
    }
    pub fn kind(&self) -> &'a str {
        self.node.str_at(&["kind"]).unwrap_or("")
    }
    pub fn name(&self) -> &'a str {
        self.node.str_at(&["metadata", "name"]).unwrap_or("")
    }
    pub fn namespace(&self) -> Option<&'a str> {
        self.node
            .str_at(&["metadata", "namespace"])
            .filter(|s| !s.is_empty())
    }
    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.node
            .path(&["metadata", "annotations"])?
            .get(key)?
            .as_str()
    }
    pub fn resource_ref(&self) -> ResourceRef {
        ResourceRef {
            api_version: self.api_version().to_string(),
            kind: self.kind().to_string(),
            name: self.name().to_string(),
            namespace: self.namespace().map(str::to_string),
        }
    }
    /// The object's file and index: kpt's annotations for ResourceList items, else
    /// the source file and document index.
    pub fn location(&self) -> Location {
        let line = Some(self.node.line).filter(|&l| l > 0);
        if self.source.kind == SourceKind::ResourceList {
            let file = PATH_ANNOTATIONS
                .iter()
                .find_map(|a| self.annotation(a))
                .map(str::to_string);
            let index = INDEX_ANNOTATIONS
                .iter()
                .find_map(|a| self.annotation(a))
                .and_then(|i| i.parse().ok());
            return Location { file, index, line };
        }
        Location {
            file: Some(self.source.name.clone()),
            index: Some(self.doc.index),
            line,
        }
    }
    /// Whether the document this object is in is written as JSON (flow style).
    pub fn in_flow_document(&self) -> bool {
        self.doc.view().is_flow()
    }
}

impl Batch {
    pub fn new(sources: Vec<Source>) -> Batch {
        Batch {
            sources,
            inserts: Vec::new(),
        }
    }

    /// Every object in input order. Empty documents are skipped; a `v1 List`
    /// contributes its items instead of itself.
    pub fn objects(&self) -> Vec<Object<'_>> {
        let mut out = Vec::new();
        for (si, source) in self.sources.iter().enumerate() {
            for (di, doc) in source.docs.iter().enumerate() {
                let root = doc.view();
                let as_items = match source.kind {
                    SourceKind::ResourceList => true,
                    SourceKind::Stream => is_list(root),
                };
                if as_items {
                    for (ii, item) in root
                        .get("items")
                        .and_then(Node::items)
                        .unwrap_or(&[])
                        .iter()
                        .enumerate()
                    {
                        out.push(Object {
                            addr: Addr {
                                source: si,
                                doc: di,
                                item: Some(ii),
                            },
                            node: item,
                            source,
                            doc,
                        });
                    }
                } else if !doc.is_empty() {
                    out.push(Object {
                        addr: Addr {
                            source: si,
                            doc: di,
                            item: None,
                        },
                        node: root,
                        source,
                        doc,
                    });
                }
            }
        }
        out
    }

    pub fn object(&self, addr: Addr) -> Object<'_> {
        let source = &self.sources[addr.source];
        let doc = &source.docs[addr.doc];
        let root = doc.view();
        let node = match addr.item {
            Some(i) => &root
                .get("items")
                .and_then(Node::items)
                .expect("addressed items")[i],
            None => root,
        };
        Object {
            addr,
            node,
            source,
            doc,
        }
    }

    /// The object to edit; its document switches to its alias-free form first.
    pub fn object_mut(&mut self, addr: Addr) -> &mut Node {
        let root = self.sources[addr.source].docs[addr.doc].edit();
        match addr.item {
            Some(i) => &mut root
                .get_mut("items")
                .and_then(Node::items_mut)
                .expect("addressed items")[i],
            None => root,
        }
    }

    /// Queues objects to follow the object at `after` (in its `items`, or as new
    /// documents after its document).
    pub fn insert_after(&mut self, after: Addr, nodes: Vec<Node>) {
        self.inserts.push((after, nodes));
    }

    /// Applies queued inserts; addresses taken before are invalid afterwards.
    pub fn commit_inserts(&mut self) {
        let mut inserts = std::mem::take(&mut self.inserts);
        // From the back, so earlier positions stay valid while inserting.
        inserts.sort_by_key(|(addr, _)| std::cmp::Reverse(*addr));
        for (addr, nodes) in inserts {
            let source = &mut self.sources[addr.source];
            match addr.item {
                Some(i) => {
                    let items = source.docs[addr.doc]
                        .edit()
                        .get_mut("items")
                        .and_then(Node::items_mut)
                        .expect("items");
                    items.splice(i + 1..i + 1, nodes);
                }
                None => {
                    let docs = nodes.into_iter().map(Document::new);
                    source.docs.splice(addr.doc + 1..addr.doc + 1, docs);
                }
            }
        }
    }
}
