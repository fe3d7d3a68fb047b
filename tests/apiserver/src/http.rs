//! A minimal HTTP/1.1 server on `std::net`: one thread per connection,
//! keep-alive, Content-Length and chunked request bodies.
//!
//! Hand-rolled rather than tiny_http because tiny_http's connection pool
//! can leave a new keep-alive connection unserved while other connections
//! stay open, which hangs kube-rs as soon as it runs requests concurrently.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

use crate::server::{self, lock, Reply, Shared};
use crate::status::ApiError;

/// Request heads larger than this are refused, as are bodies over
/// [`MAX_BODY`]: a test server needs no more and must not balloon.
const MAX_HEAD: usize = 1 << 20;
const MAX_BODY: usize = 64 << 20;

/// A parsed request.
pub(crate) struct HttpRequest {
    pub method: String,
    /// Path and query as sent.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Open connections, so that stopping the server can hang them up.
#[derive(Default)]
pub(crate) struct Connections {
    next: AtomicU64,
    open: Mutex<HashMap<u64, TcpStream>>,
}

impl Connections {
    fn register(&self, stream: &TcpStream) -> Option<u64> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.open).insert(id, stream.try_clone().ok()?);
        Some(id)
    }

    fn forget(&self, id: u64) {
        lock(&self.open).remove(&id);
    }

    /// Shuts every open connection down, unblocking their threads.
    pub fn close_all(&self) {
        for (_, stream) in lock(&self.open).drain() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// Accepts connections until `shared.stopping` is set and the listener is
/// woken by a connection (see [`wake`]).
pub(crate) fn spawn_accept_loop(listener: TcpListener, shared: Arc<Shared>) -> JoinHandle<()> {
    thread::Builder::new()
        .name("loopback-apiserver".into())
        .spawn(move || {
            for stream in listener.incoming() {
                if shared.stopping.load(Ordering::Relaxed) {
                    break;
                }
                // A failed accept concerns one client only.
                let Ok(stream) = stream else { continue };
                let shared = Arc::clone(&shared);
                thread::spawn(move || serve(stream, &shared));
            }
        })
        .expect("spawn the accept loop")
}

/// Unblocks the accept loop so it can see the stop flag.
pub(crate) fn wake(addr: SocketAddr) {
    let _ = TcpStream::connect(addr);
}

fn serve(stream: TcpStream, shared: &Shared) {
    let Some(id) = shared.connections.register(&stream) else {
        return;
    };
    let _ = serve_requests(&stream, shared);
    shared.connections.forget(id);
    let _ = stream.shutdown(Shutdown::Both);
}

fn serve_requests(stream: &TcpStream, shared: &Shared) -> io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream.try_clone()?;
    loop {
        let (request, keep_alive) = match read_request(&mut reader, &mut out) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let error = ApiError::bad_request(format!("malformed HTTP request: {e}"));
                return write_reply(&mut out, error.into(), false);
            }
            Err(e) => return Err(e),
        };
        match server::handle(shared, &request) {
            Reply::Watch(watch) => return watch.stream(shared, &mut out),
            reply => write_reply(&mut out, reply, keep_alive)?,
        }
        if !keep_alive || shared.stopping.load(Ordering::Relaxed) {
            return Ok(());
        }
    }
}

fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

/// Reads a line, refusing ones that would exceed `budget`.
fn read_line(reader: &mut impl BufRead, budget: &mut usize) -> io::Result<String> {
    let mut line = Vec::new();
    let n = reader
        .by_ref()
        .take(*budget as u64 + 1)
        .read_until(b'\n', &mut line)?;
    if n > *budget {
        return Err(invalid("request head too large"));
    }
    *budget -= n;
    let line = String::from_utf8(line).map_err(|_| invalid("request head is not UTF-8"))?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

/// Reads one request; `None` when the client closed the connection
/// between requests. Also says whether the connection stays open.
fn read_request(
    reader: &mut BufReader<TcpStream>,
    out: &mut TcpStream,
) -> io::Result<Option<(HttpRequest, bool)>> {
    let mut budget = MAX_HEAD;
    let mut start = String::new();
    // Tolerate stray blank lines between requests, as RFC 9112 suggests.
    while start.is_empty() {
        if reader.fill_buf()?.is_empty() {
            return Ok(None);
        }
        start = read_line(reader, &mut budget)?;
    }
    let mut parts = start.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid("bad request line"));
    };
    let mut headers = Vec::new();
    loop {
        let line = read_line(reader, &mut budget)?;
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').ok_or_else(|| invalid("bad header"))?;
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let mut request = HttpRequest {
        method: method.to_ascii_uppercase(),
        target: target.to_string(),
        headers,
        body: Vec::new(),
    };
    let connection = request
        .header("Connection")
        .unwrap_or("")
        .to_ascii_lowercase();
    let keep_alive = match version {
        "HTTP/1.1" => !connection.contains("close"),
        "HTTP/1.0" => connection.contains("keep-alive"),
        _ => return Err(invalid("unsupported HTTP version")),
    };
    if request
        .header("Expect")
        .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
    {
        out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    let chunked = request
        .header("Transfer-Encoding")
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    if chunked {
        request.body = read_chunked(reader)?;
    } else if let Some(len) = request.header("Content-Length") {
        let len: usize = len.parse().map_err(|_| invalid("bad Content-Length"))?;
        if len > MAX_BODY {
            return Err(invalid("request body too large"));
        }
        request.body = vec![0; len];
        reader.read_exact(&mut request.body)?;
    }
    Ok(Some((request, keep_alive)))
}

fn read_chunked(reader: &mut BufReader<TcpStream>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut budget = MAX_HEAD;
    loop {
        let line = read_line(reader, &mut budget)?;
        let size = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16).map_err(|_| invalid("bad chunk size"))?;
        if size == 0 {
            // Trailers, then the blank line that ends the body.
            while !read_line(reader, &mut budget)?.is_empty() {}
            return Ok(body);
        }
        if body.len() + size > MAX_BODY {
            return Err(invalid("request body too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        read_line(reader, &mut budget)?;
    }
}

fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        409 => "Conflict",
        410 => "Gone",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

fn write_reply(out: &mut TcpStream, reply: Reply, keep_alive: bool) -> io::Result<()> {
    let Reply::Json {
        code,
        body,
        content_type,
        retry_after,
    } = reply
    else {
        unreachable!("watches are streamed, not written whole");
    };
    let body = body.to_string();
    let mut head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-cache, private\r\n",
        reason_phrase(code),
        body.len()
    );
    if let Some(secs) = retry_after {
        head.push_str(&format!("Retry-After: {secs}\r\n"));
    }
    if !keep_alive {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    head.push_str(&body);
    out.write_all(head.as_bytes())?;
    out.flush()
}
