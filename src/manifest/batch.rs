//! The objects of one run, wherever they came from: documents of files and stdin,
//! the items of Lists, or the items of a KRM ResourceList (and of Lists among them).
//! Every face of the tool (inject, guard, validate) reads objects through this one
//! view, which is the list of objects `kubectl apply -f` sends (checked against
//! kubectl's own code by `tests/differential.rs`).

use super::node::Node;
use super::parse::{reread, Document, Edited, Frozen};
use super::place::{Location, ResourceRef};
use crate::work::Workers;

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
    /// The items of a KRM ResourceList, each read as a document of its own (so
    /// that each can be dropped and read again as a stream's documents are):
    /// objects as in a `Stream`, located as in a `ResourceList`.
    Items,
}

impl SourceKind {
    /// Whether the objects came from a ResourceList: kpt's annotations, not the
    /// stream, say where they live.
    pub fn is_krm(self) -> bool {
        matches!(self, SourceKind::ResourceList | SourceKind::Items)
    }
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
    /// The run's worker pool (serial unless the caller gives one).
    pub workers: Workers,
    /// Objects to add next to an object (before it when true), in order, applied
    /// by `commit_inserts`; as documents, which may already be written.
    inserts: Vec<(Addr, bool, Vec<Document>)>,
    /// Objects to remove at the next commit (documents, List items).
    removals: Vec<Addr>,
}

/// How many dropped documents `Batch::with_rereads` reads ahead of the one in work.
const READ_AHEAD: usize = 8;

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
        if self.source.kind.is_krm() {
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
    /// nothing more when it was read, or to need its tree only `Later`.
    pub fn is_evicted(&self) -> bool {
        self.doc.evicted
    }
    /// Whether its tree was dropped to be read again when its turn comes.
    pub fn is_reread(&self) -> bool {
        self.doc.reread
    }
    /// What the run decided of it as it read it (`Need::Now`), when it was edited
    /// then: the decision, of the run's own type.
    pub fn decided<T: std::any::Any>(&self) -> Option<&'a T> {
        self.doc.decided.as_ref()?.downcast_ref()
    }
    /// The object in `doc`, its own document read again (`parse::reread`).
    pub fn in_document<'b>(&self, doc: &'b Document) -> Object<'b>
    where
        'a: 'b,
    {
        assert!(self.addr.item.is_none(), "a document of its own");
        Object {
            addr: self.addr,
            node: doc.view(),
            source: self.source,
            doc,
        }
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
        SourceKind::Stream | SourceKind::Items if is_list(root) => {
            for (ii, item) in list_items(root).iter().enumerate() {
                out.push(at(Some(ii), None, item));
            }
        }
        SourceKind::Stream | SourceKind::Items if !doc.is_empty() => out.push(at(None, None, root)),
        SourceKind::Stream | SourceKind::Items => {}
    }
}

/// What a run needs of an object it has just read (`evict`).
#[derive(Debug)]
pub enum Need {
    /// Its tree, from now to the end.
    Tree,
    /// Its tree when its turn comes: a document of its own may be read again then.
    Later,
    /// Its tree now only, to edit as decided: what the run will do to it depends on
    /// the object alone, so it is edited and written as it is read and never read
    /// again. Where that cannot be (an item of a List, a document with directives,
    /// aliases or merge keys, or one not given its text yet), `Later`.
    Now(Box<dyn Decided>),
    /// Its skeleton: it passes through as read.
    Skeleton,
}

/// What a run decided of an object as soon as it read it (`Need::Now`).
pub trait Decided: Send + Sync + std::fmt::Debug {
    /// Edits the object's tree as decided; whether it changed anything.
    fn edit(&self, root: &mut Node) -> bool;
    /// What the run reads of the decision when the object's turn comes
    /// (`Object::decided`), kept on its document (`Document::decided`) to the end:
    /// for a large stream, as little as it can be.
    fn keep(self: Box<Self>) -> Kept;
}

/// What a run keeps of a decision (`Decided::keep`), of the run's own type.
pub type Kept = std::sync::Arc<dyn std::any::Any + Send + Sync>;

/// Drops the tree of a stream document (just read, not yet in a batch) when `need`
/// wants none of its objects' trees now, leaving each object's skeleton: what is
/// still read of an object a run passes through untouched (type, name, namespace
/// and the `annotations` named). The document is then written from its text, or
/// read again when wanted `Later` (`Document::reread`), or edited first and written
/// ahead when wanted `Now`; its tree is never held with the rest of the stream: a
/// large stream needs memory for the objects a run is working on, not for all of
/// them.
pub fn evict(doc: &mut Document, annotations: &[&str], need: impl Fn(&Object) -> Need) {
    let scratch = Source {
        name: String::new(),
        kind: SourceKind::Stream,
        docs: Vec::new(),
    };
    let mut objects = Vec::new();
    doc_objects(0, &scratch, 0, doc, &mut objects);
    let mut later = false;
    let mut now = None;
    for o in &objects {
        match need(o) {
            Need::Tree => return,
            // An item of a List is edited inside its document: kept whole.
            Need::Later | Need::Now(_) if o.addr.item.is_some() || doc.directives => return,
            Need::Later => later = true,
            Need::Now(decided) => now = Some(decided),
            Need::Skeleton => {}
        }
    }
    drop(objects);
    if let Some(decided) = now {
        if edit_now(doc, &*decided) {
            doc.decided = Some(decided.keep());
            keep_skeleton(doc, annotations);
            return;
        }
        later = true;
    }
    keep_skeleton(doc, annotations);
    doc.reread = later;
}

/// Edits a document just read as `decided` and writes it (`write_now`), or leaves it
/// as read when it has aliases or merge keys, has no text yet, or cannot be
/// written ahead; whether it was edited and written.
fn edit_now(doc: &mut Document, decided: &dyn Decided) -> bool {
    if doc.text.is_none() || doc.resolved.is_some() {
        return false;
    }
    let changed = decided.edit(doc.edit_as_written());
    if changed && write_now(doc) {
        return true;
    }
    // The tree as read: nothing changed (it is written from its text), or it
    // cannot be written ahead (it is read again in its turn).
    if let Edited::Spliced(old) = std::mem::take(&mut doc.edited) {
        doc.root = *old;
    }
    !changed
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

/// Writes a document now, keeping only what writes it (`Edited::Frozen`) and its
/// skeleton; an untouched one keeps its text. Left as it is when the bytes would
/// not begin with what precedes its body, which `write_docs` may write apart.
pub fn freeze(doc: &mut Document) {
    if doc.evicted || !write_now(doc) {
        return;
    }
    if doc.text.is_some() {
        keep_skeleton(doc, &[]);
    } else {
        // A new document was reported when it was planned; only the writer reads
        // it again, and an empty mapping is not an empty document.
        doc.root = Node::map(Vec::new());
        doc.resolved = None;
        doc.evicted = true;
    }
}

/// A document read again (`Document::reread`) and done with, as what writes it
/// (`Edited::Frozen`, or `No` when untouched: its skeleton in the batch is all else
/// the run needs), or whole when it cannot be written ahead (`put_back`).
pub fn written(mut doc: Document) -> Result<Edited, Box<Document>> {
    match write_now(&mut doc) {
        true => Ok(doc.edited),
        false => Err(Box::new(doc)),
    }
}

/// Writes an edited or new document now (`Edited::Frozen`), unless its bytes would
/// not begin with what precedes its body; whether its tree is no longer needed.
fn write_now(doc: &mut Document) -> bool {
    if doc.text.is_some() && matches!(doc.edited, Edited::No) {
        return true; // written from its text
    }
    let mut frozen = super::splice::frozen(doc);
    if let Frozen::Bytes(bytes) = &mut frozen {
        let head_kept = match &doc.text {
            Some(text) => bytes.starts_with(&text[doc.region.0..doc.body]),
            None => bytes.starts_with(b"---"),
        };
        if !head_kept {
            return false;
        }
        bytes.shrink_to_fit(); // held to the end of the run
    }
    doc.edited = Edited::Frozen(frozen);
    true
}

/// An object's type, name, namespace, the `annotations` named and kpt's, with
/// their lines.
/// Held for every object of a stream, so each list is allocated at its exact size.
fn skeleton(n: &Node, annotations: &[&str]) -> Node {
    /// `from`'s entries under `keys`, then `more`, in a list of their exact size.
    fn copy<'k>(
        from: &Node,
        keys: impl Iterator<Item = &'k str> + Clone,
        more: Option<(&Node, Node)>,
    ) -> Vec<(Node, Node)> {
        let found = keys.filter_map(|k| from.entry(k));
        let mut kept = Vec::with_capacity(found.clone().count() + usize::from(more.is_some()));
        kept.extend(found.cloned());
        kept.extend(more.map(|(k, v)| (k.clone(), v)));
        kept
    }
    // And kpt's: where the item of a ResourceList came from (`Object::location`).
    let kept = (annotations.iter().copied())
        .chain(PATH_ANNOTATIONS)
        .chain(INDEX_ANNOTATIONS);
    let metadata = n.entry("metadata").map(|(key, meta)| {
        let annotations = meta
            .entry("annotations")
            .map(|(akey, a)| (akey, copy(a, kept.clone(), None)))
            .filter(|(_, kept)| !kept.is_empty())
            .map(|(akey, kept)| (akey, Node::map(kept)));
        (
            key,
            Node::map(copy(meta, ["name", "namespace"].into_iter(), annotations)),
        )
    });
    let entries = copy(n, ["apiVersion", "kind"].into_iter(), metadata);
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
            workers: Workers::serial(),
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

    /// Queues objects to precede the object at `before` (in its `items`, or as new
    /// documents before its document): what an object needs to exist first (a Pod's
    /// ServiceAccount) comes first in what `kubectl apply` creates.
    pub fn insert_before(&mut self, before: Addr, nodes: Vec<Node>) {
        self.inserts
            .push((before, true, nodes.into_iter().map(Document::new).collect()));
    }

    /// Writes the document of the object at `addr` now, and the new documents
    /// queued beside it, when the batch is frozen as it goes (`freeze`) and nothing
    /// else will change them: the object is a document of its own. A run then holds
    /// the trees of the documents it is editing, not of all it edited.
    pub fn freeze_object(&mut self, addr: Addr) {
        if !self.freeze
            || addr.item.is_some()
            || self.sources[addr.source].kind == SourceKind::ResourceList
        {
            return;
        }
        freeze(&mut self.sources[addr.source].docs[addr.doc]);
        for (_, _, docs) in self
            .inserts
            .iter_mut()
            .rev()
            .take_while(|(a, ..)| *a == addr)
        {
            docs.iter_mut().for_each(freeze);
        }
    }

    /// Puts back a document read again (`Document::reread`) and done with (see
    /// `written`), with the new documents to go before it; only those for a
    /// document edited as it was read (`None`: `Need::Now`).
    pub fn put_back(
        &mut self,
        addr: Addr,
        doc: Option<Result<Edited, Box<Document>>>,
        before: Vec<Document>,
    ) {
        assert!(addr.item.is_none(), "a document of its own");
        let held = &mut self.sources[addr.source].docs[addr.doc];
        match doc {
            Some(Ok(edited)) => {
                held.edited = edited;
                held.reread = false;
            }
            Some(Err(whole)) => *held = *whole,
            None => debug_assert!(held.decided.is_some(), "edited as it was read"),
        }
        if !before.is_empty() {
            self.inserts.push((addr, true, before));
        }
    }

    /// Takes back the edits made to documents as they were read (`Need::Now`): a
    /// run that ends in errors changes nothing.
    pub fn undo_decided(&mut self) {
        for d in self.sources.iter_mut().flat_map(|s| s.docs.iter_mut()) {
            if d.decided.take().is_some() {
                d.edited = Edited::No;
            }
        }
    }

    /// Runs `f` with the documents dropped to be read again (`Need::Later`), read
    /// again in input order, a few ahead of the one `f` works on when the workers
    /// have a second thread, so that `f` rarely waits.
    pub fn with_rereads<R>(&self, f: impl FnOnce(&mut dyn Iterator<Item = Document>) -> R) -> R {
        let dropped = || {
            self.sources
                .iter()
                .flat_map(|s| s.docs.iter())
                .filter(|d| d.reread)
        };
        // A thread of its own pays off once there are more to read than it reads
        // ahead (starting one costs more than a small input takes: 1.4 ms against
        // 1.8 ms for a one-item ResourceList).
        let workers = match dropped().nth(READ_AHEAD) {
            Some(_) => self.workers,
            None => Workers::serial(),
        };
        workers.read_ahead(READ_AHEAD, dropped().map(reread), f)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::parse::{attach_text, parse_stream};
    use crate::manifest::splice::write_docs;

    /// Every node's line and byte span, in order (`Span`s always compare equal).
    fn marks(n: &Node, out: &mut Vec<(u32, u32, u32)>) {
        out.push((n.line, n.span.start, n.span.end));
        if let Some(items) = n.items() {
            items.iter().for_each(|i| marks(i, out));
        }
        if let Some(entries) = n.entries() {
            for (k, v) in entries {
                marks(k, out);
                marks(v, out);
            }
        }
    }

    fn all_marks(n: &Node) -> Vec<(u32, u32, u32)> {
        let mut out = Vec::new();
        marks(n, &mut out);
        out
    }

    fn read(text: &str) -> Vec<Document> {
        let mut docs = parse_stream(text.as_bytes()).unwrap();
        attach_text(&mut docs, std::sync::Arc::new(text.as_bytes().to_vec()));
        docs
    }

    /// Drops every document's tree as `Need::Later` does and reads the dropped ones
    /// again: each comes back as it was first read, node for node, at the same
    /// lines and bytes. A List (edited inside) and a document after directives
    /// (which its bytes alone would not carry) keep their trees.
    #[test]
    fn a_dropped_document_reads_again_as_it_was_read() {
        let cases: [(&str, &[&str]); 7] = [
            (
                "# head\napiVersion: v1\nkind: Pod\nmetadata:\n  name: a # c\n---\n# between\nkind: X\nmetadata: {name: b}\n...\n# after its end\n---\n{\"kind\": \"Y\", \"metadata\": {\"name\": \"c\"}}\n",
                &["a", "b", "c"],
            ),
            (
                "\u{feff}kind: A\r\nmetadata:\r\n  name: a\r\n---\r\nkind: B\r\nmetadata:\r\n  name: b\r\n",
                &["a", "b"],
            ),
            (
                "kind: A\nmetadata: &m\n  name: a\nspec:\n  <<: *m\n---\nkind: B\nmetadata:\n  name: b\n  labels: {x: &y z, w: *y}\n",
                &["a", "b"],
            ),
            (
                "%YAML 1.1\n---\nkind: A\nmetadata:\n  name: a\n...\n%YAML 1.1\n---\nkind: B\nmetadata:\n  name: b\n---\nkind: C\nmetadata:\n  name: c\n",
                &["c"],
            ),
            (
                "kind: A\nmetadata:\n  name: a\n---\nkind: B\nmetadata:\n  name: b\ndata:\n  k: |\n    ---\n    x",
                &["a", "b"],
            ),
            (
                "kind: List\nitems:\n- kind: A\n  metadata: {name: a}\n---\n--- \nkind: B\nmetadata:\n  name: b\n",
                &["b"],
            ),
            (
                "--- # c\nkind: A\nmetadata:\n  name: a\n\n\n--- !!map\nkind: B\nmetadata:\n  name: b\n",
                &["a", "b"],
            ),
        ];
        for (text, reread_names) in cases {
            let held = read(text);
            let mut dropped = held.clone();
            for d in dropped.iter_mut().filter(|d| !d.is_empty()) {
                evict(d, &[], |_| Need::Later);
            }
            let mut batch = Batch::new(vec![Source {
                name: "s".into(),
                kind: SourceKind::Stream,
                docs: dropped,
            }]);
            // (A thread reads ahead only past READ_AHEAD documents: the streams
            // of tests/streaming.rs have that many.)
            batch.workers = Workers::new(2);
            let again: Vec<Document> = batch.with_rereads(|r| r.collect());
            let names: Vec<&str> = again
                .iter()
                .map(|d| d.view().str_at(&["metadata", "name"]).unwrap())
                .collect();
            assert_eq!(names, reread_names, "{text:?}");
            for d in &again {
                let was = &held[d.index];
                assert_eq!(d.root, was.root, "{text:?}");
                assert_eq!(d.resolved, was.resolved, "{text:?}");
                assert_eq!(all_marks(&d.root), all_marks(&was.root), "{text:?}");
                assert_eq!(
                    (d.explicit_start, d.explicit_end, d.line, d.region, d.body),
                    (
                        was.explicit_start,
                        was.explicit_end,
                        was.line,
                        was.region,
                        was.body
                    ),
                    "{text:?}"
                );
                assert!(!d.reread && !d.evicted && matches!(d.edited, Edited::No));
            }
        }
    }

    /// A new document written as soon as it is made (`freeze`) comes out as it would
    /// have unfrozen, also where it starts a stream that has no `---`.
    #[test]
    fn a_frozen_new_document_is_written_as_an_unfrozen_one() {
        let object = || {
            let meta = Node::map(vec![(Node::string("name"), Node::string("w"))]);
            Node::map(vec![
                (Node::string("kind"), Node::string("ServiceAccount")),
                (Node::string("metadata"), meta),
            ])
        };
        for source in ["kind: A\n", "---\nkind: A\n", "# head\nkind: A\n"] {
            for json in [false, true] {
                let node = if json {
                    object().into_json_style()
                } else {
                    object()
                };
                let written = |freeze_new: bool| {
                    let mut fresh = Document::new(node.clone());
                    if freeze_new {
                        freeze(&mut fresh);
                        assert!(matches!(fresh.edited, Edited::Frozen(_)));
                    }
                    let mut docs = vec![fresh];
                    docs.extend(read(source));
                    let mut out = Vec::new();
                    write_docs(&docs, &mut out);
                    String::from_utf8(out).unwrap()
                };
                assert_eq!(written(true), written(false), "{source:?} json={json}");
            }
        }
    }
}
