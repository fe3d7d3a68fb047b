//! A minimal blocking HTTP/1.1 client, so the tests exercise the server over
//! real sockets without pulling in an HTTP client crate.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub text: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
}

/// Writes one request on `stream`.
pub fn send(
    stream: &mut TcpStream,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &str,
    close: bool,
) {
    let mut req = format!(
        "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if close {
        req.push_str("Connection: close\r\n");
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).expect("write request");
}

/// Reads one response (Content-Length or chunked) from `reader`.
pub fn receive(reader: &mut impl BufRead) -> Response {
    let mut line = String::new();
    reader.read_line(&mut line).expect("status line");
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).expect("header line");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').expect("header");
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _): &&(String, String)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if get("Transfer-Encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            reader.read_line(&mut line).expect("chunk size");
            let size = usize::from_str_radix(line.trim(), 16).expect("hex chunk size");
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).expect("chunk");
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        let len: usize = get("Content-Length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        body.resize(len, 0);
        reader.read_exact(&mut body).expect("body");
    }
    Response {
        status,
        headers,
        text: String::from_utf8(body).expect("UTF-8 body"),
    }
}

/// One request on a fresh connection.
pub fn call(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    send(&mut stream, method, target, headers, body, true);
    receive(&mut BufReader::new(stream))
}

pub fn get(addr: SocketAddr, target: &str) -> Response {
    call(addr, "GET", target, &[("Accept", "application/json")], "")
}

pub fn post(addr: SocketAddr, target: &str, body: &Value) -> Response {
    call(
        addr,
        "POST",
        target,
        &[("Content-Type", "application/json")],
        &body.to_string(),
    )
}
