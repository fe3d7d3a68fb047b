//! The objects of one run, wherever they came from: documents of files and stdin,
//! the items of Lists, or the items of a KRM ResourceList (and of Lists among them).
//! Every face of the tool (inject, guard, validate) reads objects through this one
//! view, which is the list of objects `kubectl apply -f` sends (checked against
//! kubectl's own code by `tests/differential.rs`).

use super::node::Node;
use super::parse::{Document, Edited};
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
    /// Whether the batch is written as YAML from its documents' text: then an edit
    /// may write a document as soon as it is done with it (`freeze_object`).
    pub freeze: bool,
    /// Objects to add next to an object (before it when true), in order, applied
    /// by `commit_inserts`; as documents, which may already be written.
    inserts: Vec<(Addr, bool, Vec<Document>)>,
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
    /// Whether only the object's skeleton is left (`evict`): it was found to need
    /// nothing more when it was read.
    pub fn is_evicted(&self) -> bool {
        self.doc.evicted
    }
    /// Whether the document this object is in is written as JSON (flow style).
    pub fn in_flow_document(&self) -> bool {
        self.doc.view().is_flow()
    }
}

/// The objects of one document of `source`, in order, appended to `out`.
fn doc_objects<'a>(
    si: usize,
    source: &'a Source,
    di: usize,
    doc: &'a Document,
    out: &mut Vec<Object<'a>>,
) {
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

/// Drops the tree of a stream document (just read, not yet in a batch) when `keep`
/// wants none of its objects, leaving each object's skeleton: what is still read of
/// an object a run passes through untouched (type, name, namespace and the
/// `annotations` named). The document is then written from its text, and its tree
/// is never held with the rest of the stream: a large stream needs memory for the
/// objects a run works on, not for all of them.
pub fn evict(doc: &mut Document, annotations: &[&str], keep: impl Fn(&Object) -> bool) {
    let scratch = Source {
        name: String::new(),
        kind: SourceKind::Stream,
        docs: Vec::new(),
    };
    let mut objects = Vec::new();
    doc_objects(0, &scratch, 0, doc, &mut objects);
    if objects.iter().any(keep) {
        return;
    }
    keep_skeleton(doc, annotations);
}

/// Replaces a document's tree by the skeletons of its objects.
fn keep_skeleton(doc: &mut Document, annotations: &[&str]) {
    let view = doc.view();
    let root = if is_list(view) {
        let items = list_items(view)
            .iter()
            .map(|i| skeleton(i, annotations))
            .collect();
        Node::map(vec![(Node::string("items"), Node::seq(items))])
    } else {
        skeleton(view, annotations)
    };
    doc.root = root;
    doc.resolved = None;
    doc.evicted = true;
}

/// Writes a document now and keeps only its bytes (`Edited::Frozen`) and skeleton;
/// an untouched one keeps its text. Left as it is when the bytes would not begin
/// with what precedes its body, which `write_docs` may write apart.
fn freeze(doc: &mut Document) {
    if doc.evicted {
        return;
    }
    if doc.text.is_none() || !matches!(doc.edited, Edited::No) {
        let bytes = super::splice::render_doc(doc);
        let head_kept = match &doc.text {
            Some(text) => bytes.starts_with(&text[doc.region.0..doc.body]),
            None => bytes.starts_with(b"---"),
        };
        if !head_kept {
            return;
        }
        doc.edited = Edited::Frozen(bytes);
    }
    keep_skeleton(doc, &[]);
}

/// An object's type, name, namespace and the `annotations` named, with their lines.
fn skeleton(n: &Node, annotations: &[&str]) -> Node {
    let copy = |from: &Node, keys: &[&str]| -> Vec<(Node, Node)> {
        keys.iter().filter_map(|k| from.entry(k).cloned()).collect()
    };
    let mut entries = copy(n, &["apiVersion", "kind"]);
    if let Some((key, meta)) = n.entry("metadata") {
        let mut m = copy(meta, &["name", "namespace"]);
        if let Some((akey, a)) = meta.entry("annotations") {
            let kept = copy(a, annotations);
            if !kept.is_empty() {
                m.push((akey.clone(), Node::map(kept)));
            }
        }
        entries.push((key.clone(), Node::map(m)));
    }
    Node {
        line: n.line,
        span: n.span,
        ..Node::map(entries)
    }
}

impl Batch {
    pub fn new(sources: Vec<Source>) -> Batch {
        Batch {
            sources,
            freeze: false,
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
                doc_objects(si, source, di, doc, &mut out);
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
        self.inserts
            .push((after, false, nodes.into_iter().map(Document::new).collect()));
    }

    /// Queues objects to precede the object at `before` (in its `items`, or as new
    /// documents before its document): what an object needs to exist first (a Pod's
    /// ServiceAccount) comes first in what `kubectl apply` creates.
    pub fn insert_before(&mut self, before: Addr, nodes: Vec<Node>) {
        self.inserts
            .push((before, true, nodes.into_iter().map(Document::new).collect()));
    }

    /// Writes the document of the object at `addr` now, and the new documents
    /// queued beside it, when the batch is frozen as it goes (`freeze`) and nothing
    /// else will change them: the object is a document of its own, and no document
    /// is taken out before a new one goes to the stream's start. A run then holds
    /// the trees of the documents it is editing, not of all it edited.
    pub fn freeze_object(&mut self, addr: Addr, removals_planned: bool) {
        if !self.freeze
            || addr.item.is_some()
            || self.sources[addr.source].kind != SourceKind::Stream
        {
            return;
        }
        freeze(&mut self.sources[addr.source].docs[addr.doc]);
        if addr.doc == 0 || removals_planned {
            return; // a new first document's `---` depends on the one after it
        }
        for (_, _, docs) in self
            .inserts
            .iter_mut()
            .rev()
            .take_while(|(a, ..)| *a == addr)
        {
            docs.iter_mut().for_each(freeze);
        }
    }

    /// Applies queued inserts; addresses taken before are invalid afterwards.
    pub fn commit_inserts(&mut self) {
        // (address, rank, documents): an insert after an object (rank 2), its
        // removal (1), an insert before it (0).
        type Op = (Addr, u8, Option<Vec<Document>>);
        let (items, docs): (Vec<Op>, Vec<Op>) = std::mem::take(&mut self.inserts)
            .into_iter()
            .map(|(a, before, n)| (a, if before { 0 } else { 2 }, Some(n)))
            .chain(
                std::mem::take(&mut self.removals)
                    .into_iter()
                    .map(|a| (a, 1, None)),
            )
            .partition(|(a, ..)| a.item.is_some());
        self.commit_items(items);
        self.commit_docs(docs);
    }

    /// Inserts and removals inside documents (List items), applied last address
    /// first and, at one address, in falling rank, so every pending address stays
    /// valid and an object inserted before a removed one is not removed in its place.
    fn commit_items(&mut self, mut ops: Vec<(Addr, u8, Option<Vec<Document>>)>) {
        ops.sort_by_key(|(addr, rank, _)| std::cmp::Reverse((*addr, *rank)));
        for (addr, rank, docs) in ops {
            let doc = &mut self.sources[addr.source].docs[addr.doc];
            let at = |i: usize| if rank == 0 { i } else { i + 1 };
            let nodes = docs.map(|docs| docs.into_iter().map(|d| d.root).collect::<Vec<_>>());
            let (i, items) = match addr.sub {
                None => (addr.item.expect("an item"), list_items_mut(doc.edit())),
                Some(sub) => {
                    let list = &mut list_items_mut(doc.edit())[addr.item.expect("an item")];
                    (sub, list_items_mut(list))
                }
            };
            match nodes {
                Some(nodes) => drop(items.splice(at(i)..at(i), nodes)),
                None => drop(items.remove(i)),
            }
        }
    }

    /// Whole documents inserted and removed: each source rebuilt in one pass (one
    /// `splice` per insert would move the rest of a large stream every time). At one
    /// place, the last queued insert comes first, as when applied one by one.
    fn commit_docs(&mut self, mut ops: Vec<(Addr, u8, Option<Vec<Document>>)>) {
        ops.sort_by_key(|(addr, rank, _)| (addr.source, addr.doc, *rank));
        let mut ops = ops.into_iter().peekable();
        for (si, source) in self.sources.iter_mut().enumerate() {
            if ops.peek().is_none_or(|(a, ..)| a.source != si) {
                continue;
            }
            let old = std::mem::take(&mut source.docs);
            let mut docs = Vec::with_capacity(old.len());
            for (di, doc) in old.into_iter().enumerate() {
                let mut here = Vec::new();
                while let Some((_, rank, d)) = ops.next_if(|(a, ..)| (a.source, a.doc) == (si, di))
                {
                    here.push((rank, d));
                }
                for (_, d) in here.iter_mut().rev().filter(|(r, _)| *r == 0) {
                    docs.extend(d.take().expect("an insert"));
                }
                if !here.iter().any(|(r, _)| *r == 1) {
                    docs.push(doc);
                }
                for (_, d) in here.iter_mut().rev().filter(|(r, _)| *r == 2) {
                    docs.extend(d.take().expect("an insert"));
                }
            }
            source.docs = docs;
        }
    }

    /// Removes the object at `addr` (a document, or an item of a List) at the next
    /// `commit_inserts`.
    pub fn remove(&mut self, addr: Addr) {
        self.removals.push(addr);
    }
}
