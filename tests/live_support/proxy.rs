//! A small fault-injecting HTTP proxy in front of the real kube-apiserver: the
//! plugin talks plain HTTP/1.1 to it on loopback, it records every request and
//! either forwards it (as the admin, over TLS) or answers with an injected fault
//! in the real server's wording. Nothing here answers an API request itself
//! except these faults.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use super::client::{runtime, Admin};

/// One request as the proxy received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Upper-case HTTP method.
    pub method: String,
    /// URL path without the query string.
    pub path: String,
    /// Decoded query parameters in the order sent.
    pub query: Vec<(String, String)>,
    pub accept: Option<String>,
    pub content_type: Option<String>,
    /// The body, when it was JSON.
    pub body: Option<Value>,
}

impl Request {
    /// The first value of a query parameter.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// What an injected fault does.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultKind {
    /// Answer with this HTTP code and the `Status` reason kube-apiserver pairs
    /// with it (500 InternalError, 503 ServiceUnavailable, 504 Timeout).
    Status(u16),
    /// 429 with `Retry-After`, as API priority and fairness sends.
    TooManyRequests { retry_after_secs: u64 },
    /// Only on a list request carrying a `continue` token: 410 Expired, as when
    /// the token outlived etcd compaction.
    ExpireContinue,
    /// Wait, then forward the request.
    Delay(Duration),
    /// Close the connection without an answer; the server never sees the request.
    Drop,
    /// Forward the request, then close the connection instead of answering: the
    /// server acted, the client cannot know.
    DropAfterForward,
    /// Hold the request until the test opens the gate, then forward it: the test
    /// acts on the cluster while the plugin is paused at a known point.
    Gate(Gate),
}

/// A point where the proxy holds requests until the test opens it.
#[derive(Clone, Default)]
pub struct Gate(Arc<GateState>);

#[derive(Default)]
struct GateState {
    held: AtomicUsize,
    open: AtomicBool,
    opened: tokio::sync::Notify,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gate(held: {})", self.held())
    }
}

impl PartialEq for Gate {
    fn eq(&self, other: &Gate) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Gate {
    pub fn new() -> Gate {
        Gate::default()
    }

    /// Requests that reached the gate.
    pub fn held(&self) -> usize {
        self.0.held.load(Ordering::SeqCst)
    }

    /// Waits (bounded) until a request is held.
    pub fn wait_held(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.held() == 0 {
            assert!(Instant::now() < deadline, "no request reached the gate");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn open(&self) {
        self.0.open.store(true, Ordering::SeqCst);
        self.0.opened.notify_waiters();
    }

    async fn pass(&self) {
        self.0.held.fetch_add(1, Ordering::SeqCst);
        loop {
            let opened = self.0.opened.notified();
            tokio::pin!(opened);
            opened.as_mut().enable();
            if self.0.open.load(Ordering::SeqCst) {
                return;
            }
            opened.await;
        }
    }
}

/// A fault for matching requests; it fires `times` times, then disappears.
/// When several match, the one added first fires.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// HTTP method to match (case-insensitive); `None` matches any.
    pub method: Option<String>,
    /// Substring the URL path (without query) must contain; "" matches all.
    pub path_contains: String,
    /// A query parameter the request must carry with this value.
    pub param: Option<(String, String)>,
    /// Matching requests let through before it fires.
    pub skip: usize,
    pub times: usize,
    pub kind: FaultKind,
}

impl Fault {
    /// A fault firing once on any method.
    pub fn new(path_contains: &str, kind: FaultKind) -> Self {
        Fault {
            method: None,
            path_contains: path_contains.to_string(),
            param: None,
            skip: 0,
            times: 1,
            kind,
        }
    }

    pub fn method(mut self, method: &str) -> Self {
        self.method = Some(method.to_string());
        self
    }

    /// Matches only requests whose query parameter `key` is `value`.
    pub fn param(mut self, key: &str, value: &str) -> Self {
        self.param = Some((key.to_string(), value.to_string()));
        self
    }

    /// Lets the first `skip` matching requests through untouched.
    pub fn skip(mut self, skip: usize) -> Self {
        self.skip = skip;
        self
    }

    pub fn times(mut self, times: usize) -> Self {
        self.times = times;
        self
    }

    fn matches(&self, r: &Request) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(&r.method))
            && r.path.contains(&self.path_contains)
            && self
                .param
                .as_ref()
                .is_none_or(|(k, v)| r.param(k) == Some(v.as_str()))
            && (self.kind != FaultKind::ExpireContinue || r.param("continue").is_some())
    }
}

#[derive(Default)]
struct State {
    requests: Vec<Request>,
    faults: Vec<Fault>,
}

/// A running proxy; it stops when dropped.
pub struct Proxy {
    pub url: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Listens on a free loopback port and forwards as `upstream`.
    pub fn start(upstream: Admin) -> Proxy {
        let state = Arc::new(Mutex::new(State::default()));
        let listener = runtime()
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind the proxy");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shared = state.clone();
        let task = runtime().spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let _ = conn.set_nodelay(true);
                let (state, upstream) = (shared.clone(), upstream.clone());
                tokio::spawn(async move {
                    let _ = serve(conn, state, upstream).await;
                });
            }
        });
        Proxy { url, state, task }
    }

    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().requests.clone()
    }

    pub fn clear_requests(&self) {
        self.state.lock().unwrap().requests.clear();
    }

    pub fn add_fault(&self, fault: Fault) {
        self.state.lock().unwrap().faults.push(fault);
    }

    /// Faults that have not fired all their times yet.
    pub fn pending_faults(&self) -> Vec<Fault> {
        self.state.lock().unwrap().faults.clone()
    }

    pub fn clear_faults(&self) {
        self.state.lock().unwrap().faults.clear();
    }
}

/// Percent-decoding of a query component (`+` is a space, as in forms).
fn decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let pair = (bytes[i] == b'%' && i + 2 < bytes.len())
            .then(|| hex(bytes[i + 1]).zip(hex(bytes[i + 2])))
            .flatten();
        match (pair, bytes[i]) {
            (Some((hi, lo)), _) => {
                out.push(hi * 16 + lo);
                i += 3;
                continue;
            }
            (None, b'+') => out.push(b' '),
            (None, b) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Serves one connection: HTTP/1.1 requests with Content-Length bodies, kept alive.
async fn serve(conn: TcpStream, state: Arc<Mutex<State>>, upstream: Admin) -> std::io::Result<()> {
    let (read, mut write) = conn.into_split();
    let mut read = BufReader::new(read);
    loop {
        let mut line = String::new();
        if read.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let (method, target) = match (parts.next(), parts.next()) {
            (Some(m), Some(t)) => (m.to_string(), t.to_string()),
            _ => return Ok(()),
        };
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if read.read_line(&mut h).await? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let header = |k: &str| headers.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        read.read_exact(&mut body).await?;

        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let request = Request {
            method: method.to_ascii_uppercase(),
            path: path.to_string(),
            query: query
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (decode(k), decode(v))
                })
                .collect(),
            accept: header("accept"),
            content_type: header("content-type"),
            body: serde_json::from_slice(&body).ok(),
        };
        let fault = {
            let mut s = state.lock().unwrap();
            s.requests.push(request.clone());
            let hit = s.faults.iter().position(|f| f.matches(&request));
            hit.and_then(|i| {
                if s.faults[i].skip > 0 {
                    s.faults[i].skip -= 1;
                    return None;
                }
                let kind = s.faults[i].kind.clone();
                s.faults[i].times -= 1;
                if s.faults[i].times == 0 {
                    s.faults.remove(i);
                }
                Some(kind)
            })
        };
        let answer = match fault {
            Some(FaultKind::Drop) => return Ok(()),
            Some(FaultKind::Delay(d)) => {
                tokio::time::sleep(d).await;
                None
            }
            Some(FaultKind::Gate(gate)) => {
                gate.pass().await;
                None
            }
            Some(FaultKind::DropAfterForward) => {
                let _ = forward(&upstream, &request, &target, body, header("accept")).await;
                return Ok(());
            }
            Some(kind) => Some(fault_answer(&kind)),
            None => None,
        };
        let (code, extra, content_type, text) = match answer {
            Some(a) => a,
            None => match forward(&upstream, &request, &target, body, header("accept")).await {
                Ok(r) => r,
                Err(e) => (502, Vec::new(), "text/plain".into(), e.into_bytes()),
            },
        };
        let mut head = format!(
            "HTTP/1.1 {code} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n",
            http::StatusCode::from_u16(code)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or(""),
            text.len()
        );
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        // One write per answer: a head and a body written apart meet Nagle's
        // algorithm and the client's delayed ACK, 40 ms per request.
        let mut answer = head.into_bytes();
        answer.extend_from_slice(&text);
        write.write_all(&answer).await?;
        write.flush().await?;
    }
}

type Answer = (u16, Vec<(String, String)>, String, Vec<u8>);

async fn forward(
    upstream: &Admin,
    request: &Request,
    target: &str,
    body: Vec<u8>,
    accept: Option<String>,
) -> Result<Answer, String> {
    let mut req = http::Request::builder()
        .method(request.method.as_str())
        .uri(target);
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    if let Some(ct) = &request.content_type {
        req = req.header("content-type", ct);
    }
    let req = req.body(body.into()).map_err(|e| e.to_string())?;
    let resp = upstream.client.send(req).await.map_err(|e| e.to_string())?;
    let code = resp.status().as_u16();
    let mut extra = Vec::new();
    for name in ["retry-after", "warning", "audit-id"] {
        for v in resp.headers().get_all(name) {
            extra.push((name.to_string(), v.to_str().unwrap_or("").to_string()));
        }
    }
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let bytes = resp
        .into_body()
        .collect_bytes()
        .await
        .map_err(|e| e.to_string())?;
    Ok((code, extra, content_type, bytes.to_vec()))
}

/// The answer kube-apiserver gives in these situations, with its wording.
fn fault_answer(kind: &FaultKind) -> Answer {
    let status = |code: u16, reason: &str, message: &str, details: Value| {
        let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "reason": reason, "code": code});
        if !details.is_null() {
            s["details"] = details;
        }
        serde_json::to_vec(&s).unwrap()
    };
    let json = "application/json".to_string();
    match *kind {
        FaultKind::Status(code) => {
            let (reason, message) = match code {
                500 => ("InternalError", "Internal error occurred: injected by the test proxy"),
                503 => ("ServiceUnavailable", "the server is currently unable to handle the request"),
                504 => ("Timeout", "the server was unable to return a response in the time allotted"),
                _ => ("", "injected by the test proxy"),
            };
            (code, Vec::new(), json, status(code, reason, message, Value::Null))
        }
        FaultKind::TooManyRequests { retry_after_secs } => (
            429,
            vec![("retry-after".into(), retry_after_secs.to_string())],
            json,
            status(
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
                json!({"retryAfterSeconds": retry_after_secs}),
            ),
        ),
        FaultKind::ExpireContinue => (
            410,
            Vec::new(),
            json,
            status(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list result. \
                 You can start a new list without the continue parameter, or use the continue token \
                 in this response to retrieve the remainder of the results. Continuing with the \
                 provided token results in an inconsistent list - objects that were created, \
                 modified, or deleted between the time the first chunk was returned and now may \
                 show up in the list.",
                Value::Null,
            ),
        ),
        FaultKind::Delay(_)
        | FaultKind::Drop
        | FaultKind::DropAfterForward
        | FaultKind::Gate(_) => {
            unreachable!("handled by the caller")
        }
    }
}
