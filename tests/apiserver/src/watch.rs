//! Watches: newline-delimited `WatchEvent`s streamed from the store's event
//! history, with the real server's start semantics (synthetic ADDED events
//! without a resourceVersion, 410 for compacted versions, the
//! `initial-events-end` bookmark for `sendInitialEvents`).

use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::resources::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};
use crate::server::{lock, negotiate, render, selectors, Ctx, Output, Shared, Target};
use crate::status::ApiError;
use crate::store::Store;

/// A watch request, streamed as newline-delimited `WatchEvent`s.
pub(crate) struct Watch {
    rt: &'static ResourceType,
    ns: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    output: Output,
    /// Resume after this resourceVersion; `None` starts with synthetic
    /// ADDED events for everything that exists.
    from: Option<u64>,
    /// Ends the initial events with an `initial-events-end` bookmark.
    initial_events_end: bool,
    timeout: Duration,
}

impl Watch {
    pub fn new(ctx: &Ctx, t: &Target) -> Result<Self, ApiError> {
        let (labels, fields) = selectors(ctx, t.rt)?;
        // Watches stream single objects, so metadata-only watches ask for
        // PartialObjectMetadata rather than the list type.
        let output = negotiate(ctx.accept.as_deref(), false)?;
        let send_initial = ctx.flag("sendInitialEvents");
        let from = match ctx.param("resourceVersion") {
            None | Some("0") => None,
            _ if send_initial => None,
            Some(rv) => Some(rv.parse().map_err(|_| {
                ApiError::bad_request(format!(
                    "resourceVersion: Invalid value: {rv:?}: must be an integer"
                ))
            })?),
        };
        let timeout = ctx
            .param("timeoutSeconds")
            .and_then(|s| s.parse().ok())
            .unwrap_or(1800);
        Ok(Watch {
            rt: t.rt,
            ns: t.ns.clone(),
            labels,
            fields,
            output,
            from,
            initial_events_end: send_initial && ctx.flag("allowWatchBookmarks"),
            timeout: Duration::from_secs(timeout),
        })
    }

    fn selects(&self, obj: &Value) -> bool {
        let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str);
        self.ns.as_deref().is_none_or(|want| ns == Some(want))
            && self.labels.matches_object(obj)
            && self.fields.matches(obj)
    }

    fn event(&self, kind: &str, obj: &Value) -> Value {
        json!({"type": kind, "object": render(obj, self.output)})
    }

    /// Events after `cursor`, seen through this watch's selectors: an
    /// object modified into (out of) the selection is ADDED (DELETED).
    fn pending(&self, store: &Store, cursor: u64) -> Vec<Value> {
        let index = self.rt.index();
        let start = store.events.partition_point(|e| e.rv <= cursor);
        store
            .events
            .range(start..)
            .filter(|e| e.rt == index)
            .filter_map(|e| {
                let now = self.selects(&e.object);
                let was = e.previous.as_ref().map(|p| self.selects(p));
                let kind = match (e.kind, was, now) {
                    ("MODIFIED", Some(false), true) => "ADDED",
                    ("MODIFIED", Some(true), false) => "DELETED",
                    (kind, _, true) => kind,
                    _ => return None,
                };
                Some(self.event(kind, &e.object))
            })
            .collect()
    }

    /// Streams the response as chunked JSON lines until the timeout, the
    /// server stopping, or the client hanging up; then the connection
    /// closes (the response says so), as watch connections are not reused.
    pub fn stream(self, shared: &Shared, out: &mut impl Write) -> io::Result<()> {
        out.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\
              Cache-Control: no-cache, private\r\nConnection: close\r\n\r\n",
        )?;
        out.flush()?;
        let deadline = Instant::now() + self.timeout;
        let mut store = lock(&shared.store);
        let mut batch = Vec::new();
        let mut cursor = match self.from {
            Some(rv) if rv < store.compacted => {
                let gone = ApiError::new(
                    410,
                    "Expired",
                    format!("too old resource version: {rv} ({})", store.compacted + 1),
                );
                drop(store);
                send_events(out, &[json!({"type": "ERROR", "object": gone.to_status()})])?;
                return end(out);
            }
            Some(rv) => rv,
            None => {
                for (_, obj) in store.list(self.rt, self.ns.as_deref()) {
                    if self.labels.matches_object(obj) && self.fields.matches(obj) {
                        batch.push(self.event("ADDED", obj));
                    }
                }
                let rv = store.resource_version();
                if self.initial_events_end {
                    batch.push(json!({"type": "BOOKMARK", "object": {
                        "kind": self.rt.kind,
                        "apiVersion": self.rt.api_version(),
                        "metadata": {
                            "resourceVersion": rv.to_string(),
                            "annotations": {"k8s.io/initial-events-end": "true"},
                        },
                    }}));
                }
                rv
            }
        };
        loop {
            batch.extend(self.pending(&store, cursor));
            cursor = store.resource_version();
            if !batch.is_empty() {
                // Never write while holding the store: a slow client must
                // not stall the server.
                drop(store);
                send_events(out, &batch)?;
                batch.clear();
                store = lock(&shared.store);
                continue;
            }
            let now = Instant::now();
            if shared.stopping.load(Ordering::Relaxed) || now >= deadline {
                break;
            }
            let wait = (deadline - now).min(Duration::from_millis(500));
            store = shared
                .changed
                .wait_timeout(store, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(store);
        end(out)
    }
}

/// Sends events as one chunk of newline-terminated JSON documents.
fn send_events(out: &mut impl Write, events: &[Value]) -> io::Result<()> {
    let mut data = String::new();
    for e in events {
        data.push_str(&e.to_string());
        data.push('\n');
    }
    write!(out, "{:x}\r\n{data}\r\n", data.len())?;
    out.flush()
}

/// The last chunk.
fn end(out: &mut impl Write) -> io::Result<()> {
    out.write_all(b"0\r\n\r\n")?;
    out.flush()
}
