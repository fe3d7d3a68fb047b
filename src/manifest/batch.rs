//! The objects of one run, wherever they came from: documents of files and stdin,
//! the items of Lists, or the items of a KRM ResourceList (and of Lists among them).
//! Every face of the tool (inject, guard, validate) reads objects through this one
//! view, which is the list of objects `kubectl apply -f` sends (checked against
//! kubectl's own code by `tests/differential.rs`).

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

/// Where an object lives: a document, the `items[item]` of a document, or the
/// `items[item].items[sub]` of a ResourceList whose item is a List (kpt hands a
/// package's List documents over unexpanded; kubectl applies their items).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Addr {
    pub source: usize,
    pub doc: usize,
    pub item: Option<usize>,
    pub sub: Option<usize>,
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
    /// Objects to add next to an object (before it when true), in order, applied
    /// by `commit_inserts`.
    inserts: Vec<(Addr, bool, Vec<Node>)>,
    /// Objects to remove at the next commit (documents, List items).
    removals: Vec<Addr>,
}

/// An object with its address and where to report it.
#[derive(Clone, Copy)]
pub struct Object<'a> {
    pub addr: Addr,
    pub node: &'a Node,
    source: &'a Source,
    doc: &'a Document,
}

/// Whether kubectl decodes a document as a list: apimachinery's unstructured decoder
/// takes *any* object with an `items` key for one, whatever its kind, and kubectl
/// applies the items instead of the object (`items: null` is an empty list).
pub fn is_list(n: &Node) -> bool {
    n.is_map() && n.get("items").is_some()
}

/// The items of a list; none for `items: null`.
pub fn list_items(n: &Node) -> &[Node] {
    n.get("items").and_then(Node::items).unwrap_or(&[])
}

fn list_items_mut(n: &mut Node) -> &mut Vec<Node> {
    n.get_mut("items")
        .and_then(Node::items_mut)
        .expect("addressed items")
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
            removals: Vec::new(),
        }
    }

    /// Every object in input order, as kubectl applies them. Empty documents are
    /// skipped; a list contributes its items instead of itself.
    pub fn objects(&self) -> Vec<Object<'_>> {
        let mut out = Vec::new();
        for (si, source) in self.sources.iter().enumerate() {
            for (di, doc) in source.docs.iter().enumerate() {
                let root = doc.view();
                let at = |item, sub, node| Object {
                    addr: Addr {
                        source: si,
                        doc: di,
                        item,
                        sub,
                    },
                    node,
                    source,
                    doc,
                };
                match source.kind {
                    SourceKind::ResourceList => {
                        for (ii, item) in list_items(root).iter().enumerate() {
                            if is_list(item) {
                                for (i, sub) in list_items(item).iter().enumerate() {
                                    out.push(at(Some(ii), Some(i), sub));
                                }
                            } else {
                                out.push(at(Some(ii), None, item));
                            }
                        }
                    }
                    SourceKind::Stream if is_list(root) => {
                        for (ii, item) in list_items(root).iter().enumerate() {
                            out.push(at(Some(ii), None, item));
                        }
                    }
                    SourceKind::Stream if !doc.is_empty() => out.push(at(None, None, root)),
                    SourceKind::Stream => {}
                }
            }
        }
        out
    }

    pub fn object(&self, addr: Addr) -> Object<'_> {
        let source = &self.sources[addr.source];
        let doc = &source.docs[addr.doc];
        let mut node = doc.view();
        for i in [addr.item, addr.sub].into_iter().flatten() {
            node = &list_items(node)[i];
        }
        Object {
            addr,
            node,
            source,
            doc,
        }
    }

    /// The object to edit; its document switches to its alias-free form first.
    pub fn object_mut(&mut self, addr: Addr) -> &mut Node {
        let mut node = self.sources[addr.source].docs[addr.doc].edit();
        for i in [addr.item, addr.sub].into_iter().flatten() {
            node = &mut list_items_mut(node)[i];
        }
        node
    }

    /// Queues objects to follow the object at `after` (in its `items`, or as new
    /// documents after its document).
    pub fn insert_after(&mut self, after: Addr, nodes: Vec<Node>) {
        self.inserts.push((after, false, nodes));
    }

    /// Queues objects to precede the object at `before` (in its `items`, or as new
    /// documents before its document): what an object needs to exist first (a Pod's
    /// ServiceAccount) comes first in what `kubectl apply` creates.
    pub fn insert_before(&mut self, before: Addr, nodes: Vec<Node>) {
        self.inserts.push((before, true, nodes));
    }

    /// Applies queued inserts; addresses taken before are invalid afterwards.
    pub fn commit_inserts(&mut self) {
        // (address, rank, nodes): an insert after an object (rank 2), its removal
        // (1), an insert before it (0). Applied last address first and, at one
        // address, in falling rank, so every pending address stays valid and an
        // object inserted before a removed one is not removed in its place.
        let mut ops: Vec<(Addr, u8, Option<Vec<Node>>)> = std::mem::take(&mut self.inserts)
            .into_iter()
            .map(|(a, before, n)| (a, if before { 0 } else { 2 }, Some(n)))
            .chain(
                std::mem::take(&mut self.removals)
                    .into_iter()
                    .map(|a| (a, 1, None)),
            )
            .collect();
        ops.sort_by_key(|(addr, rank, _)| std::cmp::Reverse((*addr, *rank)));
        for (addr, rank, nodes) in ops {
            let source = &mut self.sources[addr.source];
            let at = |i: usize| if rank == 0 { i } else { i + 1 };
            match (addr.item, addr.sub, nodes) {
                (Some(i), None, Some(nodes)) => {
                    let items = list_items_mut(source.docs[addr.doc].edit());
                    items.splice(at(i)..at(i), nodes);
                }
                (Some(i), None, None) => {
                    list_items_mut(source.docs[addr.doc].edit()).remove(i);
                }
                (Some(i), Some(sub), nodes) => {
                    let items =
                        list_items_mut(&mut list_items_mut(source.docs[addr.doc].edit())[i]);
                    match nodes {
                        Some(nodes) => drop(items.splice(at(sub)..at(sub), nodes)),
                        None => drop(items.remove(sub)),
                    }
                }
                (None, _, Some(nodes)) => {
                    let docs = nodes.into_iter().map(Document::new);
                    source.docs.splice(at(addr.doc)..at(addr.doc), docs);
                }
                (None, _, None) => {
                    source.docs.remove(addr.doc);
                }
            }
        }
    }

    /// Removes the object at `addr` (a document, or an item of a List) at the next
    /// `commit_inserts`.
    pub fn remove(&mut self, addr: Addr) {
        self.removals.push(addr);
    }
}
